package harnessd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/appserver"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/status"
	"oce.dev/oce/shared/supervise"
)

// stopMargin is what a stop may take beyond the child's budget: the kill,
// the reap, harnessd's and tini's exits.
const stopMargin = 2 * time.Second

// leakScan polls every process of the test's PID namespace while harnessd
// runs and records any whose argv or environment carries a secret. tini and
// harnessd themselves are exempt from the environment check only when the
// secret was handed to them in the environment (the reference's env
// projection puts it in their initial environment block; the secret-file
// delivery does not).
type leakScan struct {
	mu       sync.Mutex
	leaks    []string
	seen     map[string]bool // process names observed
	stop     chan struct{}
	done     chan struct{}
	exemptFn func(comm string) bool
}

func scanLeaks(secrets []string, exempt func(comm string) bool) *leakScan {
	s := &leakScan{seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{}), exemptFn: exempt}
	self := os.Getpid()
	go func() {
		defer close(s.done)
		for {
			for _, pid := range allPids() {
				if pid == self {
					continue
				}
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				name := strings.TrimSpace(string(comm))
				s.mu.Lock()
				s.seen[name] = true
				for _, sec := range secrets {
					if bytes.Contains(cmdline, []byte(sec)) {
						s.leaks = append(s.leaks, fmt.Sprintf("%s(%d) argv", name, pid))
					}
					if bytes.Contains(environ, []byte(sec)) && !s.exemptFn(name) {
						s.leaks = append(s.leaks, fmt.Sprintf("%s(%d) environ", name, pid))
					}
				}
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *leakScan) finish() ([]string, map[string]bool) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaks, s.seen
}

func phaseNames(recs []map[string]any) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprint(r["phase"], ":", r["outcome"]))
	}
	return out
}

// Cold start to ready, a real turn over the WebSocket with the token, a
// refused connection without it, the plugin status on the HMAC route, and
// no planted credential anywhere.
func TestColdStartTurnAndNoLeaks(t *testing.T) {
	fp := startFake(t, plantedKey)
	// Env projection hands the secrets to tini and harnessd themselves (and
	// to a harnessd fork for the instant before it execs its child): their
	// environment blocks are exempt here; the file-delivery test exempts none.
	scan := scanLeaks([]string{plantedKey, plantedToken}, func(comm string) bool { return comm == "tini" || comm == "harnessd" })
	// Login state of an earlier start and node credentials an earlier
	// version left in the workspace must not survive this start.
	stale := func(h *hd) {
		require.NoError(t, os.MkdirAll(h.codexHome, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(h.codexHome, "auth.json"), []byte(`{"OPENAI_API_KEY":"`+staleKey+`"}`), 0o600))
		legacy := filepath.Join(h.dir, "workspace", LegacyNodeStateDir, "agent")
		require.NoError(t, os.MkdirAll(legacy, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(legacy, "device-token"), []byte("old-device-token"), 0o600))
	}
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, baseURL: fp.URL() + "/v1", plugins: "github", plant: stale})
	h.waitReady()
	auth, err := os.ReadFile(filepath.Join(h.codexHome, "auth.json"))
	require.NoError(t, err, "this start's login state")
	require.NotContains(t, string(auth), staleKey)
	_, err = os.Stat(filepath.Join(h.dir, "workspace", LegacyNodeStateDir))
	require.ErrorIs(t, err, os.ErrNotExist, "node credentials left in the workspace are removed")
	code, out := h.readyCmd()
	require.Equal(t, 0, code, out)
	require.Equal(t, []string{"login-env:ok", "workspace-setup:ok", "codex-login:ok", "model-probe:ok",
		"native-spawn:ok", "plugin-install:ok", "ready-marker:ok"}, phaseNames(h.log.phases()))
	for _, r := range h.log.phases() {
		require.Equal(t, Container, r["container"])
	}
	probeRequests := fp.Requests()
	require.Equal(t, int64(1), probeRequests, "one probe turn")

	st, err := os.Stat(filepath.Join(h.codexHome, ConfigFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// Plugin status for the Gateway peer: api_key mode disables plugins.
	ps, err := status.FetchRemote(h.ctx(), "http://"+h.statusAddr, status.RemoteStatusToken([]byte(statusKey), revisionID))
	require.NoError(t, err)
	require.Equal(t, podUID, ps.PodUID)
	require.Len(t, ps.StartupID, 32)
	require.Empty(t, ps.SuccessfulPluginIDs)
	require.Equal(t, []status.PluginFailure{{PluginID: "github", Code: codes.PluginAuthRequired}}, ps.Failures)
	_, err = status.FetchRemote(h.ctx(), "http://"+h.statusAddr, status.RemoteStatusToken([]byte("other-key-000"), revisionID))
	require.ErrorIs(t, err, status.ErrUnauthorized)

	url := fmt.Sprintf("ws://127.0.0.1:%d", h.appPort)
	_, err = appserver.Dial(h.ctx(), url, "")
	require.ErrorIs(t, err, appserver.ErrUnauthorized)
	_, err = appserver.Dial(h.ctx(), url, "not-the-token")
	require.ErrorIs(t, err, appserver.ErrUnauthorized)

	c, err := appserver.Dial(h.ctx(), url, plantedToken)
	require.NoError(t, err)
	defer c.Close()
	th, err := c.StartThread(h.ctx(), appserver.ThreadOptions{Cwd: filepath.Join(h.dir, "workspace"),
		ApprovalPolicy: appserver.ApprovalNever, Sandbox: appserver.SandboxReadOnly, Ephemeral: true})
	require.NoError(t, err)
	var deltas strings.Builder
	res, err := c.RunTurn(h.ctx(), th.ID, "Say hello", func(d string) { deltas.WriteString(d) })
	require.NoError(t, err)
	require.Equal(t, appserver.StatusCompleted, res.Status, "%+v", res.Error)
	require.Contains(t, res.Text, fakeprovider.DefaultReply)
	require.Contains(t, res.Text, fakeprovider.Digest("Say hello"))
	require.Equal(t, res.Text, deltas.String())
	require.Equal(t, probeRequests+1, fp.Requests())

	// A durable thread's history lands in OCE_CODEX_STATE_DIR, not in the
	// ephemeral CODEX_HOME.
	durable, err := c.StartThread(h.ctx(), appserver.ThreadOptions{Cwd: filepath.Join(h.dir, "workspace"),
		ApprovalPolicy: appserver.ApprovalNever, Sandbox: appserver.SandboxReadOnly})
	require.NoError(t, err)
	res, err = c.RunTurn(h.ctx(), durable.ID, "Remember this", nil)
	require.NoError(t, err)
	require.Equal(t, appserver.StatusCompleted, res.Status, "%+v", res.Error)
	link, err := os.Readlink(filepath.Join(h.codexHome, CodexSessionsDir))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(h.codexState, CodexSessionsDir), link)
	require.Eventually(t, func() bool {
		rollouts, _ := filepath.Glob(filepath.Join(h.codexState, CodexSessionsDir, "*", "*", "*", "rollout-*.jsonl"))
		return len(rollouts) > 0
	}, 10*time.Second, 20*time.Millisecond, "a rollout in the durable state directory")
	dbs, _ := filepath.Glob(filepath.Join(h.codexState, "*.sqlite"))
	require.NotEmpty(t, dbs, "Codex's SQLite state in the durable state directory")

	exit, took := h.stop()
	require.Equal(t, 0, exit)
	require.Less(t, took, supervise.CodexStopBudget)
	left, err := os.ReadDir(h.codexHome)
	require.NoError(t, err)
	require.Empty(t, left, "the login state ends with the process")
	dbs, _ = filepath.Glob(filepath.Join(h.codexState, "*.sqlite"))
	require.NotEmpty(t, dbs, "the thread history stays")

	leaks, seen := scan.finish()
	require.Empty(t, leaks)
	require.True(t, seen["codex"], "the scan saw codex children: %v", seen)
	logs := h.log.String()
	require.NotContains(t, logs, plantedKey)
	require.NotContains(t, logs, plantedToken)
	require.Contains(t, logs, "child output", "app-server stderr reached the log as records")
}

// A bad key is held as AUTHENTICATION_FAILED; readiness polls never start
// another model call.
func TestBadKeyHeld(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: badKey, keyFile: true, baseURL: fp.URL() + "/v1"})
	f := h.waitHeld()
	require.Equal(t, codes.AuthenticationFailed, f.Code)
	require.Equal(t, PhaseModelProbe, f.Check)
	n := fp.Requests()
	require.Equal(t, int64(1), n, "an authentication failure is not retried")
	for i := 0; i < 100; i++ {
		ok, reason := h.readiness()
		require.False(t, ok)
		require.Equal(t, "runtime not ready; startup check model-probe failed with AUTHENTICATION_FAILED", reason)
	}
	code, out := h.readyCmd()
	require.Equal(t, 1, code)
	require.Equal(t, "runtime not ready; startup check model-probe failed with AUTHENTICATION_FAILED", out)
	require.Equal(t, n, fp.Requests(), "readiness polls made no model request")
	require.Equal(t, []string{"login-env:ok", "workspace-setup:ok", "codex-login:ok", "model-probe:failed"}, phaseNames(h.log.phases()))
	exit, _ := h.stop()
	require.Equal(t, 0, exit)
	require.NotContains(t, h.log.String(), badKey)
}

// A provider 500 is retried once, then held as MODEL_PROBE_FAILED.
func TestProvider500RetriedOnceThenHeld(t *testing.T) {
	fp := startFake(t, plantedKey)
	fp.SetFault(fakeprovider.Fault500)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, baseURL: fp.URL() + "/v1"})
	f := h.waitHeld()
	require.Equal(t, codes.ModelProbeFailed, f.Code)
	require.Equal(t, int64(2), fp.Requests())
	var attempts int
	for _, r := range h.log.records() {
		if r["msg"] == "codex.model_probe" {
			attempts++
		}
	}
	require.Equal(t, 2, attempts)
	for i := 0; i < 20; i++ {
		ok, _ := h.readiness()
		require.False(t, ok)
	}
	require.Equal(t, int64(2), fp.Requests())
	exit, _ := h.stop()
	require.Equal(t, 0, exit)
}

// SIGTERM while a turn streams: harnessd exits 0 within the Codex stop
// budget and the client reports the turn interrupted, never completed.
func TestSIGTERMMidTurnInterrupted(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, keyFile: true, baseURL: fp.URL() + "/v1"})
	// Secrets delivered as files: no process, harnessd and tini included, has them in its environment.
	scan := scanLeaks([]string{plantedKey, plantedToken}, func(string) bool { return false })
	h.waitReady()
	c, err := appserver.Dial(h.ctx(), fmt.Sprintf("ws://127.0.0.1:%d", h.appPort), plantedToken)
	require.NoError(t, err)
	defer c.Close()
	th, err := c.StartThread(h.ctx(), appserver.ThreadOptions{ApprovalPolicy: appserver.ApprovalNever, Sandbox: appserver.SandboxReadOnly, Ephemeral: true})
	require.NoError(t, err)
	streaming := make(chan struct{})
	var once sync.Once
	type out struct {
		res appserver.TurnResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := c.RunTurn(h.ctx(), th.ID, "please "+fakeprovider.TriggerSlow, func(string) { once.Do(func() { close(streaming) }) })
		done <- out{res, err}
	}()
	select {
	case <-streaming:
	case <-time.After(60 * time.Second):
		t.Fatal("turn never streamed")
	}
	exit, took := h.stop()
	require.Equal(t, 0, exit)
	// The 0.169.0 WebSocket app-server answers SIGTERM with a graceful drain
	// that waits for running turns; the slow turn outlasts it, so the
	// supervisor kills it at the 8 s budget. harnessd then exits at once.
	require.Less(t, took, supervise.CodexStopBudget+stopMargin)
	require.Contains(t, h.log.String(), "runningAssistantTurns=1")
	var r out
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("turn did not end after the stop")
	}
	require.NoError(t, r.err)
	require.Equal(t, appserver.StatusInterrupted, r.res.Status)
	require.True(t, r.res.Disconnected)
	leaks, _ := scan.finish()
	require.Empty(t, leaks)
	require.NotContains(t, h.log.String(), plantedKey)
}

// codex_pat without the at- prefix and an unknown login mode fail with
// LOGIN_FAILED before any process is spawned.
func TestLoginEnvRejectedBeforeAnyChild(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    hdOpts
	}{
		{"codex_pat without at-", hdOpts{mode: LoginCodexPAT, accessToken: "pat-not-an-access-token"}},
		{"unknown mode", hdOpts{mode: "password", key: plantedKey}},
		{"service account without workspace", hdOpts{mode: LoginServiceAccount, accessToken: "at-token-value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := startFake(t, plantedKey)
			tc.o.baseURL = fp.URL() + "/v1"
			h := startHD(t, tc.o)
			pid := h.harnessdPid()
			f := h.waitHeld()
			require.Equal(t, codes.LoginFailed, f.Code)
			require.Equal(t, PhaseCodexLogin, f.Check)
			require.Empty(t, childrenOf(pid), "no child is running")
			for _, r := range h.log.records() {
				require.NotEqual(t, "process started", r["msg"], "no child was ever spawned")
			}
			require.Equal(t, []string{"login-env:failed"}, phaseNames(h.log.phases()))
			require.Equal(t, "LOGIN_FAILED", h.log.phases()[0]["code"])
			require.Zero(t, fp.Requests())
			_, err := os.Stat(h.codexHome)
			require.ErrorIs(t, err, os.ErrNotExist, "nothing was set up")
			exit, _ := h.stop()
			require.Equal(t, 0, exit)
		})
	}
}

// The companion node starts when an enrollment file is present and is
// restarted after it exits (here: every time, the setup code is not one);
// the repeated identical exit is one warning, not one per restart.
func TestCompanionNodeRestarted(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, baseURL: fp.URL() + "/v1", enrollment: true})
	h.waitReady()
	count := func() int {
		n := 0
		for _, r := range h.log.records() {
			if r["msg"] == "runtime.workspace_node" && r["outcome"] == "ok" {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return count() >= 3 }, 30*time.Second, 50*time.Millisecond)
	warnings := 0
	for _, r := range h.log.records() {
		if r["msg"] == "nodehost exited" && r["level"] == "WARN" {
			warnings++
		}
	}
	require.Equal(t, 1, warnings, "one warning for three identical exits")
	exit, _ := h.stop()
	require.Equal(t, 0, exit)
}

// An app-server that dies while serving takes harnessd down with exit 1 (the
// container restarts); it is never silently left unready.
func TestAppServerExitEndsHarnessd(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, keyFile: true, baseURL: fp.URL() + "/v1"})
	h.waitReady()
	pid := h.harnessdPid()
	var app int
	for _, c := range childrenOf(pid) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(comm)) == "codex" {
			app = c
		}
	}
	require.NotZero(t, app, "app-server is harnessd's child")
	require.NoError(t, syscall.Kill(app, syscall.SIGKILL))
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatal("harnessd kept running without its app-server")
	}
	require.Equal(t, 1, h.exit)
	require.Contains(t, h.log.String(), "codex app-server exited")
}

// The access-token login with the real Codex: 0.169.0 accepts only an agent
// identity JWT (docs/design/codex.md#s2), so an opaque at- token fails locally, once
// (only timeouts are retried), and is held as LOGIN_FAILED before any model
// call.
func TestAccessTokenLoginRejectedByRealCodex(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginCodexPAT, accessToken: "at-opaque-planted-token-99", baseURL: fp.URL() + "/v1"})
	f := h.waitHeld()
	require.Equal(t, codes.LoginFailed, f.Code)
	require.Equal(t, PhaseCodexLogin, f.Check)
	require.Equal(t, []string{"login-env:ok", "workspace-setup:ok", "codex-login:failed"}, phaseNames(h.log.phases()))
	var attempts int
	for _, r := range h.log.records() {
		if r["msg"] == "codex.login" {
			attempts++
			require.Equal(t, "failed", r["outcome"])
		}
	}
	require.Equal(t, 1, attempts)
	require.Zero(t, fp.Requests())
	require.NotContains(t, h.log.String(), "at-opaque-planted-token-99")
	exit, _ := h.stop()
	require.Equal(t, 0, exit)
}

// Approval requests from the real app-server reach the client's policy and
// its decision is honoured: a declined command never runs.
func TestApprovalPolicyWithRealAppServer(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, keyFile: true, baseURL: fp.URL() + "/v1"})
	h.waitReady()
	var mu sync.Mutex
	var asked []appserver.ApprovalRequest
	policy := func(_ context.Context, r appserver.ApprovalRequest) appserver.Decision {
		mu.Lock()
		asked = append(asked, r)
		mu.Unlock()
		return appserver.Decline
	}
	c, err := appserver.Dial(h.ctx(), fmt.Sprintf("ws://127.0.0.1:%d", h.appPort), plantedToken, appserver.WithApprovalPolicy(policy))
	require.NoError(t, err)
	defer c.Close()
	th, err := c.StartThread(h.ctx(), appserver.ThreadOptions{Cwd: filepath.Join(h.dir, "workspace"),
		ApprovalPolicy: appserver.ApprovalUntrusted, Sandbox: appserver.SandboxReadOnly, Ephemeral: true})
	require.NoError(t, err)
	res, err := c.RunTurn(h.ctx(), th.ID, "run it "+fakeprovider.TriggerTool, nil)
	require.NoError(t, err)
	require.Equal(t, appserver.StatusCompleted, res.Status, "%+v", res.Error)
	mu.Lock()
	require.NotEmpty(t, asked, "the command needed approval")
	require.Equal(t, appserver.MethodCommandApproval, asked[0].Method)
	require.Equal(t, th.ID, asked[0].ThreadID)
	require.Equal(t, res.TurnID, asked[0].TurnID)
	mu.Unlock()
	var cmd *appserver.Item
	for i := range res.Items {
		if res.Items[i].Type == "commandExecution" {
			cmd = &res.Items[i]
		}
	}
	require.NotNil(t, cmd, "items: %+v", res.Items)
	require.Equal(t, "declined", cmd.Status)
	exit, _ := h.stop()
	require.Equal(t, 0, exit)
}

// SIGTERM during the model probe ends harnessd at once with exit 0: the
// probe child is killed, nothing is held and no retry starts.
func TestSIGTERMDuringProbe(t *testing.T) {
	fp := startFake(t, plantedKey)
	fp.SetFault(fakeprovider.FaultSlow)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, keyFile: true, baseURL: fp.URL() + "/v1"})
	require.Eventually(t, func() bool { return fp.Requests() == 1 }, 60*time.Second, 10*time.Millisecond, "probe in flight")
	exit, took := h.stop()
	require.Equal(t, 0, exit)
	require.Less(t, took, stopMargin)
	require.Equal(t, int64(1), fp.Requests())
	require.NotContains(t, h.log.String(), "startup failure held")
	for _, p := range allPids() {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		require.NotEqual(t, "codex", strings.TrimSpace(string(comm)), "no codex process outlives the stop")
	}
}

// InstallPlugins speaks the real app-server's plugin/list: offline, with
// plugins off, the catalog has no such plugin.
func TestInstallPluginsAgainstRealAppServer(t *testing.T) {
	fp := startFake(t, plantedKey)
	h := startHD(t, hdOpts{mode: LoginAPIKey, key: plantedKey, keyFile: true, baseURL: fp.URL() + "/v1"})
	h.waitReady()
	c, err := appserver.Dial(h.ctx(), fmt.Sprintf("ws://127.0.0.1:%d", h.appPort), plantedToken)
	require.NoError(t, err)
	defer c.Close()
	var raw map[string]any
	require.NoError(t, c.Call(h.ctx(), appserver.MethodPluginList, map[string]any{}, &raw))
	require.Contains(t, raw, "marketplaces")
	r := InstallPlugins(h.ctx(), c, []string{"oce-no-such-plugin"}, PluginRequestTimeout)
	require.Empty(t, r.Successful)
	require.Equal(t, []status.PluginFailure{{PluginID: "oce-no-such-plugin", Code: codes.PluginNotInCatalog}}, r.Failures)
	require.Equal(t, int64(1), fp.Requests(), "only the probe called the model")
	exit, _ := h.stop()
	require.Equal(t, 0, exit)
}
