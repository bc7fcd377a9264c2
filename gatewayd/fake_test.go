package gatewayd

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/status"
)

// These tests run the real gatewayd binary under real tini with the fake
// openclaw CLI (internal/fakeopenclaw): fast, and exact about the process
// lifecycle. The real gateway is exercised in realgateway_test.go.

type fakeRun struct {
	dir    string
	env    map[string]string
	record string
}

func fakeSetup(t *testing.T, topology contract.Topology) fakeRun {
	dir := t.TempDir()
	env := gwEnv(t, dir, topology, freePort(t), freePort(t))
	rec := filepath.Join(dir, "record")
	env["OCE_OPENCLAW_BIN"] = fakeOCBin
	env["FAKEOC_RECORD"] = rec
	env["OCE_GATEWAYD_POLICY"] = "readyWithin=5s,readyPoll=50ms,backoffBase=20ms,oldProcessGrace=2s,stopBudget=5s,peerPoll=100ms,peerPluginPoll=50ms"
	writeJSONFile(t, env["OPENCLAW_CONFIG_PATH"], map[string]any{"gateway": map[string]any{"auth": map[string]any{"mode": "password"}}})
	return fakeRun{dir: dir, env: env, record: rec}
}

func (f fakeRun) lines() []string {
	b, _ := os.ReadFile(f.record)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (f fakeRun) count(prefix string) int {
	n := 0
	for _, l := range f.lines() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

var pidRe = regexp.MustCompile(`^gateway pid=(\d+)`)

// gatewayPids lists the pids of the fake gateways started, in order.
func (f fakeRun) gatewayPids() []int {
	var out []int
	for _, l := range f.lines() {
		if m := pidRe.FindStringSubmatch(l); m != nil {
			p, _ := strconv.Atoi(m[1])
			out = append(out, p)
		}
	}
	return out
}

func TestStartReadyStopPhasesInOrder(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedOpenClaw)
	require.NoError(t, os.MkdirAll(filepath.Join(f.dir, "assets-src", "skill-a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "assets-src", "skill-a", "SKILL.md"), []byte("# a"), 0o644))
	p := startGW(t, f.dir, f.env)
	p.waitReady(20 * time.Second)
	code, out := readyProbe(t, p.statusAddr)
	require.Equal(t, 0, code, out)

	var phases []string
	for _, r := range p.log.records() {
		if r["msg"] == "runtime.startup_phase" {
			require.Equal(t, "gateway", r["container"])
			require.Equal(t, "ok", r["outcome"], r)
			phases = append(phases, r["phase"].(string))
		}
	}
	require.Equal(t, []string{PhaseWorkspaceSetup, PhaseRuntimeAssets, PhaseConfigure, PhasePluginInstall,
		PhaseStateMigration, PhaseNativeSpawn}, phases, "dedicated gateways never probe")

	// private directories, the rendered config, published assets
	for _, d := range []string{"state", "state/agents", "state/media", "config"} {
		st, err := os.Stat(filepath.Join(f.dir, d))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), d)
	}
	st, err := os.Stat(filepath.Join(f.dir, "config", RenderedConfigName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, err = os.Stat(filepath.Join(f.dir, "assets", "skill-a", "SKILL.md"))
	require.NoError(t, err)
	require.Equal(t, 0, f.count("doctor"), "no agent database: doctor must not run")
	lines := f.lines()
	require.Contains(t, lines[0], "--bind loopback --auth password")
	require.Contains(t, lines[0], "password=true", "the managed password reaches the gateway")

	// nothing gatewayd itself logs carries the password or a path
	for _, r := range p.log.records() {
		if r["msg"] == "child output" {
			continue
		}
		for _, v := range r {
			s, _ := v.(string)
			require.NotContains(t, s, "gw-test-password-1")
			require.NotContains(t, s, f.dir, "a path in gatewayd's own record %v", r)
		}
	}

	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(15*time.Second))
	require.Equal(t, 1, f.count("gateway-sigterm"), "SIGTERM forwarded to the gateway")
	// the last record closes the process: exit status and stop duration
	recs := p.log.records()
	last := recs[len(recs)-1]
	require.Equal(t, "stopped", last["msg"], "%v", last)
	require.EqualValues(t, 0, last["exit"])
	require.GreaterOrEqual(t, last["stop_ms"], float64(0))
}

func TestRespawnAfterDeathsThenExhaustion(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedOpenClaw)
	p := startGW(t, f.dir, f.env)
	p.waitReady(20 * time.Second)
	// five deaths inside the window: each is respawned and ready again
	for i := 1; i <= MaxRespawns; i++ {
		pids := f.gatewayPids()
		require.Len(t, pids, i)
		require.NoError(t, syscall.Kill(-pids[i-1], syscall.SIGKILL))
		require.Eventually(t, func() bool { return len(p.log.phase(PhaseGatewayRespawn)) == i }, 20*time.Second, 20*time.Millisecond)
		require.Equal(t, "ok", p.log.phase(PhaseGatewayRespawn)[i-1]["outcome"])
		p.waitReady(10 * time.Second)
	}
	// the sixth death exceeds 5 respawns per 10 minutes: failed, exit 1
	pids := f.gatewayPids()
	require.NoError(t, syscall.Kill(-pids[len(pids)-1], syscall.SIGKILL))
	require.Equal(t, 1, p.waitExit(30*time.Second))
	rs := p.log.phase(PhaseGatewayRespawn)
	require.Len(t, rs, MaxRespawns+1)
	require.Equal(t, "failed", rs[MaxRespawns]["outcome"])
	require.Equal(t, "UNAVAILABLE", rs[MaxRespawns]["code"])
	require.Len(t, f.gatewayPids(), MaxRespawns+1, "no start after exhaustion")
}

func TestRespawnAttemptsExhausted(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedOpenClaw)
	f.env["OCE_GATEWAYD_POLICY"] += ",readyWithin=300ms"
	neverReady := filepath.Join(f.dir, "never-ready")
	f.env["FAKEOC_NEVER_READY_FILE"] = neverReady
	p := startGW(t, f.dir, f.env)
	p.waitReady(20 * time.Second)
	// from now on no new gateway gets ready: every attempt times out
	require.NoError(t, os.WriteFile(neverReady, nil, 0o600))
	pids := f.gatewayPids()
	require.NoError(t, syscall.Kill(-pids[0], syscall.SIGKILL))
	require.Equal(t, 1, p.waitExit(30*time.Second))
	require.Len(t, f.gatewayPids(), 1+AttemptsPerRespawn, "exactly three attempts")
	rs := p.log.phase(PhaseGatewayRespawn)
	require.Len(t, rs, 1)
	require.Equal(t, "failed", rs[0]["outcome"])
}

// The migration decision through the real process: doctor runs only for
// 0 < user_version < 24; its failure holds UNAVAILABLE; SIGTERM reaches it.
func TestStateMigrationDoctor(t *testing.T) {
	cases := []struct {
		name     string
		versions []int
		doctor   bool
	}{
		{"none", nil, false},
		{"fresh", []int{0}, false},
		{"current", []int{24}, false},
		{"newer", []int{30}, false},
		{"old", []int{23}, true},
		{"mixed", []int{24, 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeSetup(t, contract.DedicatedOpenClaw)
			for i, v := range tc.versions {
				craftAgentDB(t, filepath.Join(f.dir, "state"), "a"+string(rune('0'+i)), v)
			}
			p := startGW(t, f.dir, f.env)
			p.waitReady(20 * time.Second)
			require.Equal(t, boolInt(tc.doctor), f.count("doctor --fix --non-interactive"))
			p.signal(syscall.SIGTERM)
			require.Equal(t, 0, p.waitExit(15*time.Second))
		})
	}
	t.Run("doctor-fails-holds", func(t *testing.T) {
		f := fakeSetup(t, contract.DedicatedOpenClaw)
		craftAgentDB(t, filepath.Join(f.dir, "state"), "a", 3)
		f.env["FAKEOC_DOCTOR_EXIT"] = "1"
		p := startGW(t, f.dir, f.env)
		require.Eventually(t, func() bool { return len(p.log.phase(PhaseStateMigration)) == 1 }, 20*time.Second, 20*time.Millisecond)
		r := p.log.phase(PhaseStateMigration)[0]
		require.Equal(t, "failed", r["outcome"])
		require.Equal(t, "UNAVAILABLE", r["code"])
		code, out := readyProbe(t, p.statusAddr)
		require.Equal(t, 1, code)
		require.Contains(t, out, "startup check state-migration failed with UNAVAILABLE")
		require.Equal(t, 0, f.count("gateway "), "no gateway after a failed migration")
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.waitExit(15*time.Second))
	})
	t.Run("sigterm-forwarded-to-doctor", func(t *testing.T) {
		f := fakeSetup(t, contract.DedicatedOpenClaw)
		craftAgentDB(t, filepath.Join(f.dir, "state"), "a", 3)
		f.env["FAKEOC_DOCTOR_BLOCK"] = "1"
		p := startGW(t, f.dir, f.env)
		require.Eventually(t, func() bool { return f.count("doctor ") == 1 }, 20*time.Second, 20*time.Millisecond)
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.waitExit(15*time.Second))
		require.Equal(t, 1, f.count("doctor-sigterm"))
		require.Equal(t, 0, f.count("gateway "))
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scriptedPeer is a Harness status server whose answers the test scripts.
type scriptedPeer struct {
	srv   *status.Server
	down  atomic.Bool
	polls atomic.Int64
	url   string
}

func startPeer(t *testing.T, key []byte) *scriptedPeer {
	sp := &scriptedPeer{srv: status.New(status.Options{Component: "agent", RevisionID: "rev1", RemoteStatusKey: key})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := sp.srv.Handler()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sp.polls.Add(1)
		if sp.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	sp.url = "http://" + ln.Addr().String() + status.PathRemoteStatus
	return sp
}

func TestPeerPluginWaitAndWatcher(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedCodex)
	key := []byte("plugin-status-key-0123456789")
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "plugin-status-key"), key, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "app-server-token"), []byte("app-token-abcdef"), 0o600))
	peer := startPeer(t, key)
	f.env["OCE_PEER_STATUS_URL"] = peer.url
	f.env["OCE_APP_SERVER_URL"] = "ws://127.0.0.1:1"
	f.env["OCE_PLUGINS"] = "github,linear"
	f.env["OCE_GATEWAYD_POLICY"] += ",peerWaitLogEvery=1h"
	p := startGW(t, f.dir, f.env)

	// no status published: the gateway waits without a deadline, logging once
	require.Eventually(t, func() bool {
		return strings.Contains(p.log.String(), WaitingForPeerMsg+"not-published")
	}, 20*time.Second, 20*time.Millisecond)
	// several more polls happen; the throttle keeps the log at one line
	seen := peer.polls.Load()
	require.Eventually(t, func() bool { return peer.polls.Load() >= seen+5 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(p.log.String(), WaitingForPeerMsg))
	ok, _ := p.ready()
	require.False(t, ok)
	require.Equal(t, 0, f.count("gateway "))

	first := status.PluginStatus{StartupID: "s1", PodUID: "pod-1", SuccessfulPluginIDs: []string{"github", "linear"},
		Failures: []status.PluginFailure{}, Phase: status.PluginPhaseReady}
	peer.srv.SetPluginStatus(first)
	p.waitReady(20 * time.Second)
	require.Len(t, p.log.phase(PhasePeerPluginStatus), 1)
	rendered, err := os.ReadFile(filepath.Join(f.dir, "config", RenderedConfigName))
	require.NoError(t, err)
	require.Contains(t, string(rendered), `"transport": "websocket"`)

	// unreadable: wait, nothing else; the same identity back: restored only
	peer.down.Store(true)
	require.Eventually(t, func() bool { return strings.Contains(p.log.String(), `"state":"unreadable"`) },
		10*time.Second, 20*time.Millisecond)
	peer.down.Store(false)
	require.Eventually(t, func() bool { return len(p.log.phase(PhasePeerStatusRestored)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, f.gatewayPids(), 1, "a restored peer causes no respawn")
	require.Empty(t, p.log.phase(PhasePeerStatusChanged))

	// a replaced Harness: changed, respawn, ready again
	second := first
	second.StartupID = "s2"
	peer.srv.SetPluginStatus(second)
	require.Eventually(t, func() bool { return len(p.log.phase(PhaseGatewayRespawn)) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Len(t, p.log.phase(PhasePeerStatusChanged), 1)
	require.Equal(t, "ok", p.log.phase(PhaseGatewayRespawn)[0]["outcome"])
	require.Len(t, f.gatewayPids(), 2)
	require.Equal(t, 1, f.count("gateway-sigterm"), "the old gateway got SIGTERM")
	p.waitReady(10 * time.Second)
	require.NotContains(t, p.log.String(), "app-token-abcdef")

	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(15*time.Second))
}

func TestPeerWaitEndsOnSigterm(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedCodex)
	key := []byte("plugin-status-key-0123456789")
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "plugin-status-key"), key, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "app-server-token"), []byte("app-token-abcdef"), 0o600))
	peer := startPeer(t, key)
	f.env["OCE_PEER_STATUS_URL"] = peer.url
	f.env["OCE_APP_SERVER_URL"] = "ws://127.0.0.1:1"
	f.env["OCE_PLUGINS"] = "github"
	p := startGW(t, f.dir, f.env)
	require.Eventually(t, func() bool { return strings.Contains(p.log.String(), WaitingForPeerMsg) }, 20*time.Second, 20*time.Millisecond)
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(10*time.Second))
	require.Equal(t, 0, f.count("gateway "))
}

// A rejected key: held AUTHENTICATION_FAILED by the upfront check, never
// ready, and readiness polling makes no model request.
func TestEmbeddedBadKeyHeld(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp, err := fakeprovider.Start(ctx, fakeprovider.Options{ValidKeys: []string{"sk-good-key-123456"}})
	require.NoError(t, err)
	defer fp.Close()
	f := fakeSetup(t, contract.Embedded)
	writeJSONFile(t, f.env["OPENCLAW_CONFIG_PATH"], map[string]any{
		"agents": map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": "openai/gpt-fake-1"}}}})
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "secrets", "model-api-key"), []byte("sk-bad-key-654321"), 0o600))
	f.env["OCE_MODEL_PROVIDER_BASE_URL_OPENAI"] = fp.URL()
	p := startGW(t, f.dir, f.env)
	require.Eventually(t, func() bool { return len(p.log.phase(PhaseModelProbe)) == 1 }, 20*time.Second, 20*time.Millisecond)
	r := p.log.phase(PhaseModelProbe)[0]
	require.Equal(t, "failed", r["outcome"])
	require.Equal(t, "AUTHENTICATION_FAILED", r["code"])
	before := fp.Requests()
	require.Equal(t, int64(1), fp.UpfrontRequests())
	for i := 0; i < 100; i++ {
		ok, body := p.ready()
		require.False(t, ok)
		if i == 0 {
			require.Contains(t, body, "startup check model-probe failed with AUTHENTICATION_FAILED")
		}
	}
	code, out := readyProbe(t, p.statusAddr)
	require.Equal(t, 1, code)
	require.Contains(t, out, "AUTHENTICATION_FAILED")
	require.Equal(t, before, fp.Requests(), "readiness polls made a model request")
	rs := p.runtimeStatus()
	require.Contains(t, rs, "runtimeFailure")
	require.Equal(t, 0, f.count("gateway "), "no gateway after a failed probe")
	require.NotContains(t, p.log.String(), "sk-bad-key-654321")
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(10*time.Second))
}

func TestMissingAdmittedConfigHeld(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedOpenClaw)
	require.NoError(t, os.Remove(f.env["OPENCLAW_CONFIG_PATH"]))
	p := startGW(t, f.dir, f.env)
	require.Eventually(t, func() bool { return len(p.log.phase(PhaseConfigure)) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, "NOT_CONFIGURED", p.log.phase(PhaseConfigure)[0]["code"])
	code, out := readyProbe(t, p.statusAddr)
	require.Equal(t, 1, code)
	require.Contains(t, out, "startup check configure failed with NOT_CONFIGURED")
	require.Equal(t, 0, f.count("gateway "))
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(10*time.Second))
}

// TestConfigInvalidExitHeldAtOnce: a gateway that exits 78 (its
// configuration refused) is held NOT_CONFIGURED at once — never respawned.
func TestConfigInvalidExitHeldAtOnce(t *testing.T) {
	f := fakeSetup(t, contract.DedicatedOpenClaw)
	f.env["FAKEOC_GATEWAY_EXIT"] = "78"
	p := startGW(t, f.dir, f.env)
	require.Eventually(t, func() bool {
		code, out := readyProbe(t, p.statusAddr)
		return code == 1 && strings.Contains(out, "NOT_CONFIGURED")
	}, 20*time.Second, 20*time.Millisecond)
	_, out := readyProbe(t, p.statusAddr)
	require.Contains(t, out, CheckConfig)
	require.Equal(t, 1, f.count("gateway "), "no respawn of a refused configuration")
	require.Empty(t, p.log.phase(PhaseGatewayRespawn))
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.waitExit(10*time.Second))
}
