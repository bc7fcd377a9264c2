package occ_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"net/http/httptest"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/occ"
)

const token = "occ-test-token"

type harness struct {
	t   *testing.T
	b   *apitest.Backend
	url string
	dir string
	env map[string]string
	// now is occ's clock (nil: time.Now).
	now func() time.Time
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	b := apitest.New()
	srv := httptest.NewServer(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor}, b))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	// The default token file of a local coordinator, found from the work dir.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".oce", "coordinator"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".oce", "coordinator", "token"), []byte(token+"\n"), 0o600))
	return &harness{t: t, b: b, url: srv.URL, dir: dir, env: map[string]string{"OCC_SERVER": srv.URL}}
}

type result struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.runIn(nil, args...)
}

func (h *harness) runIn(stdin []byte, args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	code := occ.Main(context.Background(), args, occ.Options{
		Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv:     func(k string) string { return h.env[k] },
		ConfigFile: filepath.Join(h.dir, "occ.yaml"), WorkDir: h.dir,
		PollInterval: 5 * time.Millisecond, Now: h.now,
	})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (h *harness) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	require.Equal(h.t, 0, r.code, "occ %v: %s%s", args, r.stdout, r.stderr)
	return r.stdout
}

func (h *harness) file(name, content string) string {
	p := filepath.Join(h.dir, name)
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// seed creates namespace team, credential source anthropic (key "key",
// its value from stdin), configuration cfg and agent bot.
func (h *harness) seed() {
	h.t.Helper()
	h.ok("namespace", "create", "team")
	r := h.runIn([]byte("test-anthropic-value\n"), "-n", "team", "credential", "create", "anthropic", "--key", "key")
	require.Equal(h.t, 0, r.code, "%s%s", r.stdout, r.stderr)
	h.ok("-n", "team", "config", "create", "cfg", "-f", h.file("cfg.json", admission.ExampleEmbeddedAnthropic))
	h.ok("-n", "team", "agent", "create", "bot", "--config", "cfg", "--auth-method", "api_key",
		"--auth-kind", "secret", "--auth-ref", "secret://team/anthropic#key")
}

func TestNamespaceOutputs(t *testing.T) {
	h := newHarness(t)
	out := h.ok("namespace", "create", "team")
	require.Contains(t, out, "NAME")
	require.Contains(t, out, "team")

	var list []state.Namespace
	require.NoError(t, json.Unmarshal([]byte(h.ok("namespace", "list", "-o", "json")), &list))
	require.Len(t, list, 1)
	require.Equal(t, "team", list[0].Name)

	var ns state.Namespace
	require.NoError(t, yaml.Unmarshal([]byte(h.ok("ns", "get", "team", "-o", "yaml")), &ns))
	require.Equal(t, list[0].ID, ns.ID)

	r := h.run("namespace", "create", "team")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "RESOURCE_CONFLICT")
	r = h.run("namespace", "get", "team", "-o", "xml")
	require.Equal(t, occ.ExitUsage, r.code)
	require.Equal(t, occ.ExitUsage, h.run("namespace", "frobnicate").code)
	require.Equal(t, occ.ExitUsage, h.run("namespace", "create").code)
}

func TestConfigCommands(t *testing.T) {
	h := newHarness(t)
	h.ok("namespace", "create", "team")
	h.env["OCC_NAMESPACE"] = "team"
	h.ok("config", "create", "cfg", "-f", h.file("cfg.json", admission.ExampleEmbeddedAnthropic))
	// YAML documents are converted to JSON; stdin works with -f -.
	yamlDoc, err := yaml.JSONToYAML([]byte(admission.ExampleEmbeddedOpenAI))
	require.NoError(t, err)
	r := h.runIn(yamlDoc, "config", "update", "cfg", "-f", "-", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var cf state.Configuration
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cf))
	require.EqualValues(t, 2, cf.Generation)
	require.Contains(t, string(cf.Document), "gpt-5.5")

	out := h.ok("config", "get", "cfg")
	require.Contains(t, out, "GENERATION")
	require.Contains(t, out, "gpt-5.5")
	require.Contains(t, h.ok("config", "list"), "cfg")

	r = h.run("config", "create", "bad", "-f", h.file("bad.json", `{"agents":{"list":[{"id":"x"}]}}`))
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "INVALID_REQUEST")
	require.Equal(t, occ.ExitUsage, h.run("config", "create", "nofile").code)
}

func TestAgentCommands(t *testing.T) {
	h := newHarness(t)
	h.seed()
	var ag state.Agent
	require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "agent", "get", "bot", "-o", "json")), &ag))
	require.Equal(t, state.ModeEmbedded, ag.ExecutionMode)
	require.Equal(t, "api_key", ag.HarnessAuth.Method)

	// update without --mode keeps the mode; with it, changes it.
	h.ok("-n", "team", "agent", "update", "bot", "--mode", "dedicated")
	require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "agent", "update", "bot", "--plugin", "a", "--plugin", "b", "-o", "json")), &ag))
	require.Equal(t, state.ModeDedicated, ag.ExecutionMode)
	require.Equal(t, []string{"a", "b"}, ag.Plugins)
	require.Contains(t, h.ok("-n", "team", "agent", "list"), "dedicated")

	out := h.ok("-n", "team", "agent", "stop", "bot")
	require.Contains(t, out, "stop")
	require.Contains(t, h.ok("work", "--kind", "stop"), "queued")
	require.Contains(t, h.ok("-n", "team", "agent", "work", "bot"), "stop")
	out = h.ok("-n", "team", "agent", "delete", "bot")
	require.Contains(t, out, "delete")
	require.Contains(t, h.ok("-n", "team", "agent", "list"), "(deleting)")
	r := h.run("-n", "team", "agent", "delete", "bot")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "RESOURCE_CONFLICT")
	require.Equal(t, occ.ExitUsage, h.run("-n", "team", "agent", "create", "x").code, "--config is required")
}

// engine drives queued activate work like the activation engine would,
// failing it with failCode when set.
func engine(ctx context.Context, b *apitest.Backend, failCode string) {
	engineHeld(ctx, b, failCode, "")
}

// engineHeld is engine whose activated revisions are observed held with
// heldCode (when set).
func engineHeld(ctx context.Context, b *apitest.Backend, failCode, heldCode string) {
	m := b.Machine()
	for {
		ch := m.Changed()
		for _, w := range m.WorkItems(state.WorkFilter{State: state.WorkQueued, Kind: state.WorkActivate}) {
			ref := state.ClaimRef{WorkID: w.ID, Owner: "engine"}
			if _, err := b.Apply(state.CmdClaimWork, state.ClaimWork{WorkID: w.ID, Owner: "engine", LeaseExpiry: time.Now().Add(time.Hour)}); err != nil {
				continue
			}
			_, _ = b.Apply(state.CmdSetWorkPhase, state.SetWorkPhase{ClaimRef: ref, Phase: state.PhasePreparing})
			if failCode != "" {
				_, _ = b.Apply(state.CmdFailWork, state.FailWork{ClaimRef: ref, Code: failCode, Detail: "held startup failure"})
				continue
			}
			_, _ = b.Apply(state.CmdSetWorkPhase, state.SetWorkPhase{ClaimRef: ref, Phase: state.PhaseReady})
			a, _ := m.Agent(w.AgentID)
			_, _ = b.Apply(state.CmdActivateRevision, state.ActivateRevision{ClaimRef: ref, Expected: a.ActiveRevisionID})
			_, _ = b.Apply(state.CmdCompleteActivation, state.CompleteActivation{ClaimRef: ref})
			// The health watcher observes the active revision.
			obs := state.ObserveAgent{AgentID: w.AgentID, RevisionID: w.RevisionID, Ready: heldCode == ""}
			if heldCode != "" {
				obs.Reason, obs.HeldCode = "held", heldCode
			}
			_, _ = b.Apply(state.CmdObserveAgent, obs)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

func TestDeployWait(t *testing.T) {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go engine(ctx, h.b, "")

	r := h.run("-n", "team", "agent", "deploy", "bot", "--wait", "--timeout", "10s", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var rev state.Revision
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rev))
	require.Equal(t, state.RevisionActive, rev.Status)
	require.Contains(t, r.stderr, "queued")
	require.Contains(t, r.stderr, "active")
	require.Less(t, strings.Index(r.stderr, "queued"), strings.Index(r.stderr, "active"))

	var ag state.Agent
	require.NoError(t, json.Unmarshal([]byte(h.ok("-n", "team", "agent", "get", "bot", "-o", "json")), &ag))
	require.Equal(t, rev.ID, ag.ActiveRevisionID)
	out := h.ok("-n", "team", "revisions", "bot")
	require.Contains(t, out, "active")
	require.Contains(t, out, "*")
	require.Contains(t, h.ok("audit"), state.AuditActivate)
	status := h.ok("status")
	require.Contains(t, status, "team")
	require.NotContains(t, status, rev.ID[:12], "the active revision by number, not id")
	require.Regexp(t, `team\s+bot\s+embedded\s+1\s+1\s+serving`, status)
	wide := h.ok("status", "-o", "wide")
	require.Contains(t, wide, ag.ID, "-o wide adds the ids")
	require.Contains(t, wide, rev.ID)
	var st struct {
		Cluster struct{ State string }
		Agents  []struct{ Name, ActiveRevisionID string }
	}
	require.NoError(t, yaml.Unmarshal([]byte(h.ok("status", "-o", "yaml")), &st))
	require.Equal(t, "Leader", st.Cluster.State)
	require.Equal(t, rev.ID, st.Agents[0].ActiveRevisionID)
	require.Contains(t, h.ok("status", "-o", "json"), `"activeRevision": 1`, "json carries the number too")
	// --server wins over OCC_SERVER.
	h.env["OCC_SERVER"] = "http://127.0.0.1:1"
	require.Equal(t, occ.ExitErr, h.run("status").code)
	h.ok("status", "--server", h.url)
}

func TestDeployWaitFailure(t *testing.T) {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go engine(ctx, h.b, "MODEL_PROBE_FAILED")

	r := h.run("-n", "team", "agent", "deploy", "bot", "--wait", "--timeout", "10s")
	require.Equal(t, occ.ExitFailed, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "MODEL_PROBE_FAILED")
}

func TestDeployWaitTimeoutAndRefusal(t *testing.T) {
	h := newHarness(t)
	h.seed()
	// No engine: the revision stays queued.
	r := h.run("-n", "team", "agent", "deploy", "bot", "--wait", "--timeout", "50ms")
	require.Equal(t, occ.ExitTimeout, r.code, r.stderr)
	require.Contains(t, r.stderr, "timed out")

	// Without --wait the admitted revision is printed at once.
	out := h.ok("-n", "team", "agent", "deploy", "bot")
	require.Contains(t, out, "pending")

	// An admission refusal exits 1 with its code.
	h.ok("-n", "team", "agent", "create", "noauth", "--config", "cfg")
	r = h.run("-n", "team", "agent", "deploy", "noauth", "--wait")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "RESOURCE_CONFLICT")
}

func TestTokenSources(t *testing.T) {
	h := newHarness(t)
	// Default: ./.oce/coordinator/token.
	h.ok("namespace", "list")
	// A flag wins over the default file.
	r := h.run("namespace", "list", "--token", "wrong")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "UNAUTHORIZED")
	// The environment wins over the default file.
	h.env["OCC_TOKEN"] = "wrong"
	require.Equal(t, occ.ExitErr, h.run("namespace", "list").code)
	// --token-file wins over the environment; '-' reads stdin.
	tf := h.file("tok", token)
	h.ok("namespace", "list", "--token-file", tf)
	require.Equal(t, 0, h.runIn([]byte(token), "namespace", "list", "--token-file", "-").code)
	delete(h.env, "OCC_TOKEN")

	// occ.yaml supplies server, token file and namespace.
	require.NoError(t, os.Remove(filepath.Join(h.dir, ".oce", "coordinator", "token")))
	require.Equal(t, occ.ExitErr, h.run("namespace", "list").code)
	delete(h.env, "OCC_SERVER")
	h.file("occ.yaml", "server: "+h.url+"\ntokenFile: "+tf+"\nnamespace: team\noutput: json\n")
	h.ok("namespace", "create", "team")
	require.Contains(t, h.ok("config", "list"), "[]")
	h.file("occ.yaml", "bogus: 1\n")
	require.Equal(t, occ.ExitErr, h.run("namespace", "list").code)
}

func TestClusterCommands(t *testing.T) {
	h := newHarness(t)
	h.seed()
	require.Contains(t, h.ok("cluster", "members"), "Leader")
	require.Contains(t, h.ok("cluster", "join", "node-2", "127.0.0.1:7411", "127.0.0.1:7410"), "node-2")
	h.ok("cluster", "transfer", "node-2")
	h.ok("cluster", "transfer")
	require.NotContains(t, h.ok("cluster", "remove", "node-2"), "node-2")
	r := h.run("cluster", "remove", "node-2")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "INVALID_REQUEST")

	snap := filepath.Join(h.dir, "backup.snap")
	require.Contains(t, h.ok("cluster", "snapshot", "save", snap), "saved")
	fi, err := os.Stat(snap)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	h.ok("namespace", "create", "later")
	h.ok("cluster", "snapshot", "restore", snap)
	_, later := h.b.M.NamespaceByName("later")
	require.False(t, later, "restored to the backup")
	require.Contains(t, h.ok("audit", "--action", "oce.cluster.restore"), "oce.cluster.restore")
}

func TestCompletion(t *testing.T) {
	h := newHarness(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out := h.ok("completion", sh)
		require.Contains(t, out, "occ", sh)
		require.Greater(t, len(out), 200, sh)
	}
	require.Equal(t, occ.ExitUsage, h.run("completion", "tcsh").code)
}

func TestInstallationAndWork(t *testing.T) {
	h := newHarness(t)
	inst := h.ok("installation")
	require.Contains(t, inst, "embedded OpenClaw")
	require.Contains(t, inst, "dedicated Codex", "the runtimes that really run, Codex included")
	require.Contains(t, h.ok("work"), "KIND")
	require.Contains(t, h.ok("audit", "--limit", "5"), "SEQ")
	r := h.run("work", "--state", "bogus")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "INVALID_REQUEST")
}

// TestDeployWaitHeldAfterActivation: a revision active but observed held
// (the seeds' Recreate cutover with a bad key) is not reported as a
// success: deploy --wait exits 3 naming the held code.
func TestDeployWaitHeldAfterActivation(t *testing.T) {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go engineHeld(ctx, h.b, "", "AUTHENTICATION_FAILED")
	r := h.run("-n", "team", "agent", "deploy", "bot", "--wait", "--timeout", "10s")
	require.Equal(t, occ.ExitFailed, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "held AUTHENTICATION_FAILED")
	require.Contains(t, h.ok("status"), "degraded")
}

// TestDeployWaitInterrupted: Ctrl-C ends the wait with 130 and says the
// deploy continues on the server and how to follow it.
func TestDeployWaitInterrupted(t *testing.T) {
	h := newHarness(t)
	h.seed()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	go func() {
		for !strings.Contains(safeString(&errb), "queued") {
			time.Sleep(time.Millisecond)
		}
		cancel() // what the SIGINT handler of cmd/occ does
	}()
	code := occ.Main(ctx, []string{"-n", "team", "agent", "deploy", "bot", "--wait"}, occ.Options{
		Stdout: &out, Stderr: &syncWriter{b: &errb}, Getenv: func(k string) string { return h.env[k] },
		ConfigFile: filepath.Join(h.dir, "occ.yaml"), WorkDir: h.dir, PollInterval: 5 * time.Millisecond})
	require.Equal(t, occ.ExitInterrupted, code, errb.String())
	require.Contains(t, safeString(&errb), "continues on the server")
	require.Contains(t, safeString(&errb), "occ -n team revisions bot", "the hint keeps the namespace")
	require.Contains(t, h.ok("-n", "team", "agent", "work", "bot"), "queued", "the deploy is still there")
}

var bufMu sync.Mutex

type syncWriter struct{ b *bytes.Buffer }

func (w *syncWriter) Write(p []byte) (int, error) {
	bufMu.Lock()
	defer bufMu.Unlock()
	return w.b.Write(p)
}

func safeString(b *bytes.Buffer) string {
	bufMu.Lock()
	defer bufMu.Unlock()
	return b.String()
}
