package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute/local"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/occ"
)

// send runs `occ agent send` and returns its output.
func (e *env) send(t testing.TB, agent, msg string) string {
	t.Helper()
	out := e.mustOcc(t, "agent", "send", agent, msg, "--timeout", "6m")
	return out
}

func (e *env) agent(t testing.TB, name string) state.Agent {
	t.Helper()
	var a state.Agent
	e.getJSON(t, &a, "agent", "get", name)
	return a
}

func (e *env) revisions(t testing.TB, name string) []state.Revision {
	t.Helper()
	var rs []state.Revision
	e.getJSON(t, &rs, "revisions", name)
	return rs
}

func (e *env) audit(t testing.TB) []state.AuditRecord {
	t.Helper()
	var rs []state.AuditRecord
	e.getJSON(t, &rs, "audit", "--limit", "1000")
	return rs
}

func activations(recs []state.AuditRecord, agentID string) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		if r.Action == state.AuditActivate && r.AgentID == agentID {
			out[r.RevisionID]++
		}
	}
	return out
}

// TestEmbeddedOpenClaw: deploy → ready → send → the reply comes from the
// fake provider through the real gateway; redeploy → the predecessor is
// retired, one activate audit record per activated revision, the Agent
// answers again; stop and delete → every process gone, dirs as the seeds say.
func TestEmbeddedOpenClaw(t *testing.T) {
	e := &shared
	e.up(t)
	step := stepper(t)
	e.mustOcc(t, "config", "create", "emb-cfg", "-f", demoFile(t, "embedded.json"))
	e.mustOcc(t, "agent", "create", "emb", "--config", "emb-cfg", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(t, "agent", "deploy", "emb", "--wait", "--timeout", "5m")
	a := e.agent(t, "emb")
	require.NotEmpty(t, a.ActiveRevisionID)

	step("deployed")
	reply := e.send(t, "emb", "hello from the e2e test")
	require.Contains(t, reply, FakeReply, "the reply is the fake provider's, delivered by the real gateway")

	step("first reply")
	rt, err := local.ReadRoute(e.devDir(), a.ID)
	require.NoError(t, err)
	require.Equal(t, a.ActiveRevisionID, rt.RevisionID)
	first := a.ActiveRevisionID

	// Redeploy: the predecessor is retired and the Agent answers again.
	e.mustOcc(t, "agent", "deploy", "emb", "--wait", "--timeout", "8m")
	step("redeploy serving")
	a = e.agent(t, "emb")
	require.NotEqual(t, first, a.ActiveRevisionID)
	// deploy --wait returns once the new revision is observed serving;
	// retirement finishes the work.
	poll.Until(t, func() bool {
		revs := e.revisions(t, "emb")
		require.Len(t, revs, 2)
		for _, r := range revs {
			if r.ID == first && r.Status != state.RevisionRetired || r.ID != first && r.Status != state.RevisionActive {
				return false
			}
		}
		return true
	}, 7*time.Minute, 200*time.Millisecond, "the predecessor is retired")
	step("predecessor retired")
	require.NoDirExists(t, filepath.Join(e.devDir(), "runtimes", a.NamespaceID, a.ID, "revisions", first),
		"retirement removes what the revision owned")
	require.Equal(t, map[string]int{first: 1, a.ActiveRevisionID: 1}, activations(e.audit(t), a.ID),
		"exactly one activate audit record per activated revision")
	require.Contains(t, e.send(t, "emb", "hello again"), FakeReply, "the Agent answers after the redeploy")

	step("answered again")
	// Stop: every process the Agent had is gone; its claims stay.
	procs := e.agentProcs(t, a.ID)
	require.NotEmpty(t, procs)
	e.mustOcc(t, "agent", "stop", "emb")
	require.Eventually(t, func() bool { return e.agent(t, "emb").ActiveRevisionID == "" }, 7*time.Minute, 200*time.Millisecond)
	step("stopped")
	require.False(t, anyAlive(procs), "stop leaves no process of the Agent")
	agentDir := filepath.Join(e.devDir(), "runtimes", a.NamespaceID, a.ID)
	require.DirExists(t, filepath.Join(agentDir, "gateway-state"), "stop keeps the Agent's claims")

	// Delete: the Agent's claims and credentials go.
	e.mustOcc(t, "agent", "delete", "emb")
	require.Eventually(t, func() bool {
		_, code := e.occ(t, "agent", "get", "emb")
		return code != 0
	}, 2*time.Minute, 200*time.Millisecond)
	require.NoDirExists(t, agentDir, "deletion removes the Agent's claims and password")
	require.NoFileExists(t, local.RoutePath(e.devDir(), a.ID))
	step("deleted")
}

// stepper logs the time each step took.
func stepper(t testing.TB) func(string) {
	last := time.Now()
	return func(name string) {
		t.Logf("%-20s %6.1fs", name, time.Since(last).Seconds())
		last = time.Now()
	}
}

// TestDedicatedCodex: deploy → node enrolled → ready; redeploy with a bad
// key → AUTHENTICATION_FAILED, deploy --wait exits non-zero naming it, and
// the serving predecessor keeps running (the coordinator's default
// credential check before cutover refuses the key before any predecessor is
// stopped; --credential-check seed keeps the seeds' stop-first order);
// repair → active again, one activate audit record per
// activated revision; delete → every process and dir gone.
func TestDedicatedCodex(t *testing.T) {
	e := &shared
	e.up(t)
	step := stepper(t)
	e.mustOcc(t, "config", "create", "codex-cfg", "-f", demoFile(t, "dedicated-codex.json"))
	e.mustOcc(t, "agent", "create", "coder", "--config", "codex-cfg", "--mode", "dedicated",
		"--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(t, "agent", "deploy", "coder", "--wait", "--timeout", "8m")
	step("deployed")
	a := e.agent(t, "coder")
	require.NotEmpty(t, a.ActiveRevisionID)
	agentDir := filepath.Join(e.devDir(), "runtimes", a.NamespaceID, a.ID)
	run, err := os.ReadFile(filepath.Join(agentDir, "revisions", a.ActiveRevisionID, "run.json"))
	require.NoError(t, err)
	require.Contains(t, string(run), `"enrolled": true`, "the workspace node was observed enrolled before readiness")
	nodeState := filepath.Join(agentDir, "harness-workspace", "node-state")
	require.FileExists(t, filepath.Join(nodeState, "identity.json"), "the node identity lives on the Harness claim")
	require.NoDirExists(t, filepath.Join(agentDir, "harness-workspace", "workspace", ".oce-node"),
		"and not in the workspace the node serves")
	require.NoDirExists(t, filepath.Join(agentDir, "gateway-state", "workspace"), "a dedicated Gateway has no workspace")

	// Redeploy with a bad key.
	predecessor := e.agentProcs(t, a.ID)
	require.NotEmpty(t, predecessor)
	e.writeSecret(t, "bad-key", "sk-not-accepted")
	e.mustOcc(t, "agent", "update", "coder", "--auth-method", "api_key", "--auth-ref", "local:bad-key")
	out, code := e.occ(t, "agent", "deploy", "coder", "--wait", "--timeout", "5m")
	step("bad key failed")
	require.Equal(t, occ.ExitFailed, code, out)
	require.Contains(t, out, "AUTHENTICATION_FAILED", out)
	require.True(t, anyAlive(predecessor), "a bad key never takes the serving Agent down (credential check before cutover)")
	require.Equal(t, a.ActiveRevisionID, e.agent(t, "coder").ActiveRevisionID)

	// Repair: a good key deploys again.
	e.mustOcc(t, "agent", "update", "coder", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(t, "agent", "deploy", "coder", "--wait", "--timeout", "8m")
	step("repaired")
	a = e.agent(t, "coder")
	require.Eventually(t, func() bool {
		acts := activations(e.audit(t), a.ID)
		return len(acts) == 2 && acts[a.ActiveRevisionID] == 1
	}, 7*time.Minute, 200*time.Millisecond, "one activate audit record per activated revision; the failed one never")
	for rev, n := range activations(e.audit(t), a.ID) {
		require.Equal(t, 1, n, "revision %s", rev)
	}
	require.FileExists(t, filepath.Join(nodeState, "identity.json"), "the node identity survived the revisions")

	procs := e.agentProcs(t, a.ID)
	require.NotEmpty(t, procs)
	e.mustOcc(t, "agent", "delete", "coder")
	require.Eventually(t, func() bool {
		_, code := e.occ(t, "agent", "get", "coder")
		return code != 0
	}, 8*time.Minute, 200*time.Millisecond)
	step("deleted")
	require.False(t, anyAlive(procs), "no process of the Agent is left")
	require.NoDirExists(t, agentDir)
}

// TestDedicatedCodexTurn: the reply is produced by the real Codex app-server
// through the gateway's codex plugin, and a tool turn runs in the Harness.
// gatewayd installs the codex plugin offline from the runtimes' npm cache
// before the gateway's first start.
func TestDedicatedCodexTurn(t *testing.T) {
	e := &shared
	e.up(t)
	step := stepper(t)
	e.mustOcc(t, "config", "create", "codex-turn-cfg", "-f", demoFile(t, "dedicated-codex.json"))
	e.mustOcc(t, "agent", "create", "codex-turn", "--config", "codex-turn-cfg", "--mode", "dedicated",
		"--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(t, "agent", "deploy", "codex-turn", "--wait", "--timeout", "8m")
	step("deployed")
	a := e.agent(t, "codex-turn")
	agentDir := filepath.Join(e.devDir(), "runtimes", a.NamespaceID, a.ID)
	installed, err := filepath.Glob(filepath.Join(agentDir, "gateway-state", "state", "npm", "projects", "*",
		"node_modules", "@openclaw", "codex", "package.json"))
	require.NoError(t, err)
	require.NotEmpty(t, installed, "the codex plugin is a managed install in the gateway's state dir")

	require.Contains(t, e.send(t, "codex-turn", "hello codex"), FakeReply,
		"the fake provider's reply came through the gateway's codex plugin and the Harness's Codex")
	step("turn")
	tool := e.send(t, "codex-turn", "run a command TRIGGER_TOOL")
	require.Contains(t, tool, "Tool result received.", "Codex ran the tool call in the Harness and sent its result back")
	require.Contains(t, tool, FakeReply)
	step("tool turn")

	// The workspace documents go through the Gateway to the pinned node:
	// written on the Harness claim, versions checked by the node, no copy on
	// the Gateway.
	const marker = "OCE-ECHO-codex-agents"
	doc := filepath.Join(e.root, "codex-agents.md")
	require.NoError(t, os.WriteFile(doc, []byte("# Rules\nMention "+marker+".\n"), 0o600))
	e.mustOcc(t, "agent", "files", "put", "codex-turn", "AGENTS.md", "-f", doc, "--force")
	onNode, err := os.ReadFile(filepath.Join(agentDir, "harness-workspace", "workspace", "AGENTS.md"))
	require.NoError(t, err)
	require.Contains(t, string(onNode), marker, "written in the Harness workspace by the node")
	f := e.file(t, "codex-turn", "AGENTS.md")
	require.Equal(t, string(onNode), f.Content)
	out, code := e.occ(t, "agent", "files", "put", "codex-turn", "AGENTS.md", "-f", doc, "--replaces", strings.Repeat("0", 64))
	require.Equal(t, occ.ExitErr, code, out)
	require.Contains(t, out, "changed since the version you started from", "the node refused a stale version")
	require.Contains(t, out, f.SHA256)
	require.NoDirExists(t, filepath.Join(agentDir, "gateway-state", "workspace"), "the dedicated Gateway keeps no copy")
	step("workspace through the node")

	// Codex reads AGENTS.md from its thread's working directory when the
	// thread starts — the Harness workspace (the plugin's
	// remoteWorkspaceRoot) — and keeps that snapshot for the thread's life
	// (docs/console.md): the next turn of a new session carries the edit,
	// the running session's thread keeps what it started with.
	require.NotContains(t, e.send(t, "codex-turn", "hello again in the first session"), "["+marker+"]",
		"a running thread keeps the instructions it started with")
	require.Contains(t, e.mustOcc(t, "agent", "send", "codex-turn", "hello in a new session", "--session", "after-edit",
		"--timeout", "6m"), "["+marker+"]", "a new session's thread reads the edited AGENTS.md")
	step("edit in a new session")

	procs := e.agentProcs(t, a.ID)
	e.mustOcc(t, "agent", "delete", "codex-turn")
	require.Eventually(t, func() bool {
		_, code := e.occ(t, "agent", "get", "codex-turn")
		return code != 0
	}, 8*time.Minute, 200*time.Millisecond)
	require.False(t, anyAlive(procs), "no process of the Agent is left")
	step("deleted")
}
