package local

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"oce.dev/oce/shared/netns"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/proc"
	"oce.dev/oce/shared/runtimes"
)

func TestMain(m *testing.M) {
	if os.Getenv(envFake) == "1" {
		fakeMain()
		return
	}
	// A PID namespace of its own: no fake supervisor outlives the binary.
	netns.Main(m, netns.Options{HostNetwork: true})
}

type fixture struct {
	d      *Driver
	data   string
	creds  CredentialFiles
	events string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	paths, err := runtimes.Ensure(t.Context())
	require.NoError(t, err)
	root := t.TempDir()
	f := &fixture{data: filepath.Join(root, "data"), creds: CredentialFiles{Dir: filepath.Join(root, "credentials")},
		events: filepath.Join(root, "events")}
	// The credential sources good and bad of Namespace ns1.
	ns1 := state.Namespace{ID: "ns1", Name: "one"}
	require.NoError(t, f.creds.PutCredential(t.Context(), ns1, "good", 1, map[string][]byte{"value": []byte("sk-good")}))
	require.NoError(t, f.creds.PutCredential(t.Context(), ns1, "bad", 1, map[string][]byte{"value": []byte("bad")}))
	self, err := os.Executable()
	require.NoError(t, err)
	f.d, err = New(Config{DataDir: f.data, Binaries: Binaries{Gatewayd: self, Harnessd: self, Nodehost: self},
		Runtimes: runtimes.Paths{Tini: paths.Tini}, Credentials: f.creds, AllowHostNetwork: true,
		Env:             []string{envFake + "=1", envEvents + "=" + f.events},
		GatewayStopWait: 5 * time.Second, HarnessStopWait: 5 * time.Second, LeftoverGrace: 300 * time.Millisecond,
		PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		// Stop whatever a failed test left running.
		for _, r := range f.d.revs {
			_, _ = f.d.stopRuntime(context.Background(), r)
		}
		f.d.Close()
	})
	return f
}

func embeddedRev(id string, key string) state.Revision {
	return state.Revision{ID: id, AgentID: "agent1", NamespaceID: "ns1", Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw},
		Mode: state.ModeEmbedded, Document: []byte(`{"gateway":{"mode":"local"}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "local:" + key}}
}

func dedicatedRev(id string, key string) state.Revision {
	return state.Revision{ID: id, AgentID: "agent2", NamespaceID: "ns1", Harness: state.HarnessIdentity{ID: state.HarnessCodex},
		Mode: state.ModeDedicated, Document: []byte(`{"agents":{"defaults":{"model":"codex/gpt-5.5"}}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "credential:" + key}}
}

func (f *fixture) waitReady(t *testing.T, rev state.Revision) {
	t.Helper()
	var last compute.Observation
	poll.Until(t, func() bool {
		obs, err := f.d.ObserveRevision(t.Context(), rev)
		require.NoError(t, err)
		require.Empty(t, obs.HeldCode)
		last = obs
		return obs.Ready
	}, 20*time.Second, 20*time.Millisecond, "last observation %+v", &last)
}

// procsOf snapshots the revision's supervisors and all their descendants.
func (f *fixture) procsOf(t *testing.T, revID string) []*proc.Process {
	t.Helper()
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	r := f.d.revs[revID]
	require.NotNil(t, r)
	var out []*proc.Process
	for _, p := range []*proc.Process{r.Gateway, r.Harness} {
		if p != nil && p.Alive() {
			out = append(out, p)
			out = append(out, proc.Descendants(p.PID)...)
		}
	}
	return out
}

func (f *fixture) eventLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.events)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func dialRoute(t *testing.T, data, agent string) string {
	t.Helper()
	rt, err := ReadRoute(data, agent)
	require.NoError(t, err)
	c, err := net.Dial("unix", rt.Socket)
	require.NoError(t, err)
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

func requireMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, mode, st.Mode().Perm(), path)
}

func TestEmbeddedLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	rev := embeddedRev("rev1", "good")
	require.NoError(t, f.d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, f.d.PrepareRevision(ctx, rev))
	require.NoError(t, f.d.PrepareRevision(ctx, rev), "prepare is idempotent")
	f.waitReady(t, rev)

	revDir := f.d.RevisionDir(rev)
	requireMode(t, revDir, 0o700)
	requireMode(t, filepath.Join(revDir, "gateway", "secrets"), 0o700)
	for _, k := range []string{contract.SecretGatewayPassword, contract.SecretStatusToken, contract.SecretModelAPIKey} {
		requireMode(t, filepath.Join(revDir, "gateway", "secrets", k), 0o600)
	}
	key, err := os.ReadFile(filepath.Join(revDir, "gateway", "secrets", contract.SecretModelAPIKey))
	require.NoError(t, err)
	require.Equal(t, "sk-good", string(key))
	requireMode(t, f.d.GatewayWorkspace("ns1", "agent1"), 0o700)

	_, err = ReadRoute(f.data, "agent1")
	require.Error(t, err, "no route before activation")
	require.NoError(t, f.d.ActivateRevision(ctx, rev))
	require.Equal(t, "gateway rev1", dialRoute(t, f.data, "agent1"))

	procs := f.procsOf(t, "rev1")
	require.GreaterOrEqual(t, len(procs), 3, "tini, the supervisor and its grandchild")
	res, err := f.d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true, Found: true}, res)
	require.False(t, proc.AnyAlive(procs), "every process of the revision is gone")
	obs, err := f.d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, obs.Ready)

	res, err = f.d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true}, res, "stopping a stopped revision is idempotent")

	require.NoError(t, f.d.RetireRevision(ctx, rev))
	require.NoDirExists(t, revDir, "retire removes what the revision owns")
	require.DirExists(t, f.d.GatewayWorkspace("ns1", "agent1"), "the Agent's claim survives retirement")
	require.FileExists(t, filepath.Join(f.d.AgentDir("ns1", "agent1"), contract.SecretGatewayPassword))

	require.NoError(t, f.d.DeleteAgentRuntimeCredentials(ctx, state.Agent{ID: "agent1", NamespaceID: "ns1"}))
	require.NoDirExists(t, f.d.AgentDir("ns1", "agent1"), "delete removes the Agent's claims and password")
	require.NoFileExists(t, RoutePath(f.data, "agent1"))
	require.NoError(t, f.d.DeleteNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoDirExists(t, f.d.nsDir("ns1"))
}

func TestEmbeddedReplacementIsStagedUntilActivation(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	r1, r2 := embeddedRev("rev1", "good"), embeddedRev("rev2", "good")
	require.NoError(t, f.d.PrepareRevision(ctx, r1))
	f.waitReady(t, r1)
	require.NoError(t, f.d.ActivateRevision(ctx, r1))
	old := f.procsOf(t, "rev1")

	require.NoError(t, f.d.PrepareRevision(ctx, r2))
	obs, err := f.d.ObserveRevision(ctx, r2)
	require.NoError(t, err)
	require.Equal(t, compute.Observation{Ready: true, Reason: ReasonStaged, Staged: true}, obs)
	require.Nil(t, f.d.revs["rev2"].Gateway, "a staged replacement does not start beside the serving gateway")
	require.Equal(t, "gateway rev1", dialRoute(t, f.data, "agent1"), "the predecessor keeps serving")

	require.NoError(t, f.d.ActivateRevision(ctx, r2))
	require.False(t, proc.AnyAlive(old), "the serving gateway stopped before the replacement took over")
	f.waitReady(t, r2)
	require.Eventually(t, func() bool {
		rt, err := ReadRoute(f.data, "agent1")
		return err == nil && rt.RevisionID == "rev2"
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "gateway rev2", dialRoute(t, f.data, "agent1"))

	require.NoError(t, f.d.RetireRevision(ctx, r1))
	require.Equal(t, "gateway rev2", dialRoute(t, f.data, "agent1"), "retiring the predecessor keeps the route")
}

func TestDedicatedEnrollsNodeAndStopsGatewayFirst(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	rev := dedicatedRev("rev1", "good")
	require.NoError(t, f.d.PrepareRevision(ctx, rev))
	// the Agent has no node yet: its identity is provisioned (issue 23)
	node := f.d.revs["rev1"].ProvisionedNodeID
	require.Len(t, node, 64)
	requireMode(t, nodeIdentityFile(f.d.revs["rev1"]), 0o600)
	f.waitReady(t, rev)
	ev := f.eventLines(t)
	require.Contains(t, ev, "gateway rev1 minted")
	require.Contains(t, ev, "harness rev1 enrolled")
	require.Contains(t, ev, "harness rev1 adopted-identity")
	require.NotContains(t, ev, "harness rev1 insecure-enrollment")
	require.NotContains(t, ev, "harness rev1 insecure-identity")
	// The gateway runs pinned to the node (OCE_WORKSPACE_NODE_ID), which
	// renders its command allow-list — from its first start: the node
	// enrolled with the provisioned identity, nothing restarted.
	require.Contains(t, ev, "gateway rev1 pinned "+node)
	require.Equal(t, 1, strings.Count(strings.Join(ev, "\n"), "gateway rev1 started"), "no restart to pin the node")
	require.Equal(t, node, f.d.workspaceNode("ns1", rev.AgentID))
	require.NoFileExists(t, enrollmentFile(f.d.revs["rev1"]), "the one-use file was consumed")
	require.NoFileExists(t, nodeIdentityFile(f.d.revs["rev1"]), "the identity was adopted")

	hs := filepath.Join(f.d.RevisionDir(rev), "harness", "secrets")
	for _, k := range []string{contract.SecretAppServerToken, contract.SecretPluginStatusKey, contract.SecretOpenAIAPIKey} {
		requireMode(t, filepath.Join(hs, k), 0o600)
	}
	require.NoFileExists(t, filepath.Join(f.d.RevisionDir(rev), "gateway", "secrets", contract.SecretOpenAIAPIKey),
		"the dedicated Gateway receives no model credential")
	require.FileExists(t, filepath.Join(f.d.HarnessWorkspace("ns1", "agent2"), "harness-was-here"))
	// the coordinator reaches the Gateway's routes with the status token;
	// the Gateway's refusal is an answer, not an error
	code, body, err := f.d.CallGateway(ctx, rev, http.MethodPut, contract.WorkspaceFileRoute("AGENTS.md"), []byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, string(body), "AGENTS.md")

	require.NoError(t, f.d.ActivateRevision(ctx, rev))
	procs := f.procsOf(t, "rev1")
	res, err := f.d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, res.Stopped)
	require.False(t, proc.AnyAlive(procs))
	ev = f.eventLines(t)
	gwExit, harTerm := indexOf(ev, "gateway rev1 exit"), indexOf(ev, "harness rev1 term")
	require.GreaterOrEqual(t, gwExit, 0)
	require.Greater(t, harTerm, gwExit, "the Gateway is gone before the Harness is stopped: %v", ev)

	// Restarted behind the engine's back (a lost claim's late write).
	require.NoError(t, f.d.PrepareRevision(ctx, rev))
	res, err = f.d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, compute.StopResult{Stopped: true, Found: true, CameBack: true}, res)

	// A later revision reuses the Agent's workspace claim, and its gateway
	// starts pinned to the Agent's node at once.
	require.NoError(t, f.d.RetireRevision(ctx, rev))
	require.FileExists(t, filepath.Join(f.d.HarnessWorkspace("ns1", "agent2"), "harness-was-here"))
	rev2 := dedicatedRev("rev2", "good")
	require.NoError(t, f.d.PrepareRevision(ctx, rev2))
	require.Equal(t, node, f.d.revs["rev2"].GatewayNodeID, "pinned from its first start")
	require.Empty(t, f.d.revs["rev2"].ProvisionedNodeID, "the Agent's node: nothing provisioned")
	f.waitReady(t, rev2)
	require.Equal(t, 1, strings.Count(strings.Join(f.eventLines(t), "\n"), "gateway rev2 started"), "no restart to pin the node")
	_, _, err = f.d.CallGateway(ctx, rev, http.MethodGet, contract.RouteWorkspaceFiles, nil)
	require.ErrorIs(t, err, compute.ErrGatewayUnavailable, "a retired revision's Gateway is unavailable")
}

func indexOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}

func TestHeldFailureIsReported(t *testing.T) {
	for _, rev := range []state.Revision{embeddedRev("rev9", "bad"), dedicatedRev("rev9", "bad")} {
		t.Run(rev.Mode, func(t *testing.T) {
			f := newFixture(t)
			require.NoError(t, f.d.PrepareRevision(t.Context(), rev))
			poll.Until(t, func() bool {
				obs, err := f.d.ObserveRevision(t.Context(), rev)
				require.NoError(t, err)
				require.False(t, obs.Ready)
				return obs.HeldCode == codes.Code("AUTHENTICATION_FAILED")
			}, 20*time.Second, 20*time.Millisecond)
		})
	}
}

func TestRestartedDriverStopsWhatItHadStarted(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	rev := embeddedRev("rev1", "good")
	require.NoError(t, f.d.PrepareRevision(ctx, rev))
	f.waitReady(t, rev)
	require.NoError(t, f.d.ActivateRevision(ctx, rev))
	procs := f.procsOf(t, "rev1")
	f.d.Close()

	d2, err := New(f.d.cfg)
	require.NoError(t, err)
	defer d2.Close()
	require.Equal(t, "gateway rev1", dialRoute(t, f.data, "agent1"), "the route survives a coordinator restart")
	obs, err := d2.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, obs.Ready, "%+v", obs)
	res, err := d2.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, res.Stopped)
	require.Eventually(t, func() bool { return !proc.AnyAlive(procs) }, 5*time.Second, 10*time.Millisecond)
	f.d.revs = map[string]*revRuntime{}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	bad := embeddedRev("../x", "good")
	err := f.d.PrepareRevision(ctx, bad)
	code, permanent := compute.ErrorCode(err, "")
	require.Equal(t, codes.InvalidTarget, code)
	require.True(t, permanent)

	other := embeddedRev("rev1", "good")
	other.Mode = state.ModeDedicated
	err = f.d.PrepareRevision(ctx, other)
	code, permanent = compute.ErrorCode(err, "")
	require.Equal(t, codes.ComputeDriverMismatch, code)
	require.True(t, permanent)

	missing := embeddedRev("rev1", "nope")
	err = f.d.PrepareRevision(ctx, missing)
	code, permanent = compute.ErrorCode(err, "")
	require.Equal(t, codes.HarnessAuthRequired, code)
	require.True(t, permanent)

	require.NoError(t, f.creds.PutCredential(ctx, state.Namespace{ID: "ns1"}, "open", 1, map[string][]byte{"value": []byte("k")}))
	require.NoError(t, os.Chmod(filepath.Join(f.creds.Dir, "ns1", "open"), 0o644))
	err = f.d.PrepareRevision(ctx, embeddedRev("rev2", "open"))
	code, _ = compute.ErrorCode(err, "")
	require.Equal(t, codes.HarnessAuthRequired, code, "a group-readable secret file is refused")

	caps := f.d.Capabilities()
	require.True(t, caps.SupportsTopology(state.HarnessOpenClaw, state.ModeEmbedded))
	require.True(t, caps.SupportsTopology(state.HarnessCodex, state.ModeDedicated))
	require.False(t, caps.SupportsTopology(state.HarnessOpenClaw, state.ModeDedicated))
	require.True(t, caps.RequiresStoppedPredecessors(state.ModeDedicated))
	require.False(t, caps.ActivateBeforeCommit)
}

func TestRefusesHostNetworkUnlessAllowed(t *testing.T) {
	orig := isolationCheck
	t.Cleanup(func() { isolationCheck = orig })
	isolationCheck = func() error { return errors.New("interface \"eth0\" is present") }
	cfg := Config{DataDir: t.TempDir(), Binaries: BinariesIn("/nonexistent"), Runtimes: runtimes.Paths{Tini: "/usr/bin/tini"}}
	_, err := New(cfg)
	require.ErrorIs(t, err, ErrNotIsolated)
	require.Contains(t, err.Error(), "allow host networking")
	cfg.AllowHostNetwork = true
	d, err := New(cfg)
	require.NoError(t, err)
	d.Close()
	isolationCheck = func() error { return nil }
	cfg.AllowHostNetwork = false
	d, err = New(cfg)
	require.NoError(t, err)
	d.Close()
}

// TestGatewayRunsTheCompiledDocument: the gateway's configuration file is
// the admitted document with the custom-endpoint compile applied.
func TestGatewayRunsTheCompiledDocument(t *testing.T) {
	f := newFixture(t)
	rev := dedicatedRev("rev1", "good")
	rev.Document = []byte(admission.ExampleCustomEndpoint)
	require.NoError(t, f.d.PrepareRevision(t.Context(), rev))
	b, err := os.ReadFile(filepath.Join(f.d.RevisionDir(rev), "gateway", "config", "openclaw.json"))
	require.NoError(t, err)
	want, err := admission.GatewayDocument(rev.Document)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(b))
	require.Contains(t, string(b), "codex/openai-compatible/vendor/org/model")
	_, err = f.d.StopRevision(t.Context(), rev)
	require.NoError(t, err)
}
