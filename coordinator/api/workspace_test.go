package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// servingBot seeds team/bot, deploys it with the engine running over the
// memory driver and waits until it serves.
func servingBot(t *testing.T) (*env, *memory.Driver, string) {
	t.Helper()
	e := newEnv(t)
	d := e.b.Driver().(*memory.Driver)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.b.RunEngine(ctx)
	_, _, agent := e.seed()
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Eventually(t, func() bool {
		a, _ := e.b.M.Agent(agent["id"].(string))
		return a.ActiveRevisionID != ""
	}, 10*time.Second, 5*time.Millisecond)
	return e, d, agent["id"].(string)
}

const files = "/v1/namespaces/team/agents/bot/files"

func TestWorkspaceDocumentsThroughTheGateway(t *testing.T) {
	e, d, id := servingBot(t)

	list := e.expect(200, "GET", files, nil)
	require.Len(t, list["files"], 4)
	for i, n := range contract.WorkspaceDocuments() {
		f := list["files"].([]any)[i].(map[string]any)
		require.Equal(t, n, f["name"])
		require.Equal(t, true, f["missing"])
	}
	require.NotEmpty(t, list["revisionId"])

	// create, read back, replace naming the version, conflict on a stale one
	w := e.expect(200, "PUT", files+"/AGENTS.md", map[string]any{"content": "# v1\n", "replaces": contract.VersionAbsent})
	require.Equal(t, sha("# v1\n"), w["sha256"])
	require.Nil(t, w["content"], "a write answer carries no content")
	got := e.expect(200, "GET", files+"/AGENTS.md", nil)
	require.Equal(t, "# v1\n", got["content"])
	e.expect(200, "PUT", files+"/AGENTS.md", map[string]any{"content": "# v2\n", "replaces": sha("# v1\n")})
	rej := e.refuse(409, "RESOURCE_CONFLICT", "PUT", files+"/AGENTS.md", map[string]any{"content": "# v3\n", "replaces": sha("# v1\n")})
	det := rej["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, "WORKSPACE_CONFLICT", det["reason"])
	require.Equal(t, sha("# v2\n"), det["current"])
	doc, _ := d.WorkspaceDocument(id, "AGENTS.md")
	require.Equal(t, "# v2\n", doc, "a conflicting write changes nothing")
	// last write wins when the client says so
	e.expect(200, "PUT", files+"/AGENTS.md", map[string]any{"content": "# v3\n", "replaces": sha("# v1\n"), "force": true})
	doc, _ = d.WorkspaceDocument(id, "AGENTS.md")
	require.Equal(t, "# v3\n", doc)
}

func TestWorkspaceRefusesBadInputBeforeTheGateway(t *testing.T) {
	e, d, id := servingBot(t)
	e.expect(200, "PUT", files+"/AGENTS.md", map[string]any{"content": "keep", "force": true})
	calls := d.WorkspaceCalls()
	for _, tc := range []struct {
		name, method, path string
		body               any
		reason             string
	}{
		{"other document", "PUT", files + "/TOOLS.md", map[string]any{"content": "x", "force": true}, contract.ReasonDocumentName},
		{"memory", "GET", files + "/MEMORY.md", nil, contract.ReasonDocumentName},
		{"path", "PUT", files + "/sub/AGENTS.md", map[string]any{"content": "x", "force": true}, contract.ReasonDocumentPath},
		{"escaped traversal", "GET", files + "/..%2F..%2Fetc%2Fpasswd", nil, contract.ReasonDocumentPath},
		{"oversized", "PUT", files + "/AGENTS.md", map[string]any{"content": strings.Repeat("a", contract.MaxDocumentBytes+1), "force": true}, contract.ReasonDocumentTooLarge},
		{"not utf-8", "PUT", files + "/AGENTS.md", "{\"content\":\"\xff\xfe\",\"force\":true}", contract.ReasonDocumentNotUTF8},
		{"nul", "PUT", files + "/AGENTS.md", map[string]any{"content": "a\x00b", "force": true}, contract.ReasonDocumentNotUTF8},
		{"no version", "PUT", files + "/AGENTS.md", map[string]any{"content": "x"}, contract.ReasonVersionRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := e.refuse(400, "INVALID_REQUEST", tc.method, tc.path, tc.body)
			require.Equal(t, tc.reason, rej["error"].(map[string]any)["details"].(map[string]any)["reason"])
		})
	}
	e.refuse(400, "INVALID_REQUEST", "PUT", files+"/AGENTS.md", map[string]any{"content": "x", "force": true, "path": "/x"})
	require.Equal(t, calls, d.WorkspaceCalls(), "no refused request reached a Gateway")
	doc, _ := d.WorkspaceDocument(id, "AGENTS.md")
	require.Equal(t, "keep", doc)
}

func TestWorkspaceUnavailableIsSaidNeverStale(t *testing.T) {
	e, d, id := servingBot(t)
	e.expect(200, "PUT", files+"/AGENTS.md", map[string]any{"content": "v1", "force": true})

	d.SetWorkspaceDown(id, true) // the node is disconnected
	for _, p := range []string{files, files + "/AGENTS.md"} {
		rej := e.refuse(503, "WORKSPACE_UNAVAILABLE", "GET", p, nil)
		require.NotContains(t, string(mustJSON(t, rej)), "v1", "no stale copy")
	}
	e.refuse(503, "WORKSPACE_UNAVAILABLE", "PUT", files+"/AGENTS.md", map[string]any{"content": "v2", "force": true})
	d.SetWorkspaceDown(id, false)

	// a stopped Agent has no Gateway: unavailable, and the edit survives
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/stop", nil)
	require.Eventually(t, func() bool { a, _ := e.b.M.Agent(id); return a.ActiveRevisionID == "" }, 10*time.Second, 5*time.Millisecond)
	rej := e.refuse(503, "WORKSPACE_UNAVAILABLE", "GET", files+"/AGENTS.md", nil)
	require.Equal(t, "NOT_SERVING", rej["error"].(map[string]any)["details"].(map[string]any)["reason"])

	// a redeploy serves the same document
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Eventually(t, func() bool { a, _ := e.b.M.Agent(id); return a.ActiveRevisionID != "" }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "v1", e.expect(200, "GET", files+"/AGENTS.md", nil)["content"])

	// a driver that cannot reach Gateways says so
	e.b.SetDriver(noGateway{memory.New(memory.DefaultCapabilities())})
	e.refuse(503, "WORKSPACE_UNAVAILABLE", "GET", files, nil)
	require.Equal(t, http.StatusUnauthorized, e.raw("GET", files, nil, "").status)
}

// noGateway hides the memory driver's GatewayCaller.
type noGateway struct{ *memory.Driver }

func (n noGateway) CallGateway() {}

func TestOverviewDerivesStates(t *testing.T) {
	e, d, _ := servingBot(t)
	overview := func() map[string]any {
		return e.expect(200, "GET", "/v1/namespaces/team/overview", nil)["agents"].([]any)[0].(map[string]any)
	}
	require.Eventually(t, func() bool { return overview()["state"] == "serving" }, 10*time.Second, 5*time.Millisecond,
		"the active revision is observed ready")
	a := overview()
	require.Equal(t, "bot", a["name"])
	require.Equal(t, float64(1), a["activeRevision"])
	require.Equal(t, "cfg", a["configuration"])

	// a redeploy whose runtime holds AUTHENTICATION_FAILED fails; the
	// Agent still serves revision 1 and shows the failure spelled out
	first := e.expect(200, "GET", "/v1/namespaces/team/agents/bot", nil)["activeRevisionId"].(string)
	d.SetHook(memory.OpPrepare, func(_ context.Context, rev string) error {
		if rev != first {
			d.Hold(rev, codes.AuthenticationFailed, nil)
		}
		return nil
	})
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Eventually(t, func() bool { return overview()["failureCode"] == "RUNTIME_AUTHENTICATION_FAILED" },
		10*time.Second, 5*time.Millisecond)
	a = overview()
	require.Equal(t, "AUTHENTICATION_FAILED", a["heldCode"])
	require.Equal(t, float64(2), a["latestRevision"])
	det := e.expect(200, "GET", "/v1/namespaces/team/agents/bot/overview", nil)
	revs := det["revisions"].([]any)
	require.Len(t, revs, 2)
	require.Equal(t, float64(2), revs[0].(map[string]any)["number"], "newest first")
	require.Equal(t, "AUTHENTICATION_FAILED", revs[0].(map[string]any)["heldCode"])
	require.Nil(t, revs[0].(map[string]any)["document"], "summaries carry no document")
	require.NotEmpty(t, det["audit"])
	require.NotEmpty(t, det["workHistory"])
}

func TestHeldDetailParsing(t *testing.T) {
	held := func(s string) [3]string { a, b, c := api.HeldOf(s); return [3]string{a, b, c} }
	require.Equal(t, [3]string{"AUTHENTICATION_FAILED", "", ""}, held("held AUTHENTICATION_FAILED"))
	require.Equal(t, [3]string{"MODEL_PROBE_FAILED", "PROCESS_EXIT", "exit-1"}, held("held MODEL_PROBE_FAILED cause PROCESS_EXIT:exit-1"))
	require.Equal(t, [3]string{}, held("some other detail"))
	require.Equal(t, [3]string{}, held("held lower"))
}

// refuse asserts a refused request with status and code. Unlike reject it
// does not compare state digests: the engine's health watcher writes in
// the background here; what a refused workspace request must not change
// is the workspace, which the tests check.
func (e *env) refuse(status int, code, method, path string, v any) map[string]any {
	e.t.Helper()
	r := e.do(method, path, v)
	require.Equal(e.t, status, r.status, "%s %s: %s", method, path, r.body)
	require.Equal(e.t, code, r.errCode(e.t), "%s %s: %s", method, path, r.body)
	return r.json(e.t)
}

// userToken creates user name bound to role in team and mints its token.
func (e *env) userToken(name, role string) string {
	e.t.Helper()
	e.expect(201, "POST", "/v1/users", map[string]any{"name": name})
	e.expect(201, "POST", "/v1/rolebindings", map[string]any{"role": role, "namespace": "team",
		"subject": map[string]any{"kind": "user", "name": name}})
	return e.expect(201, "POST", "/v1/tokens", map[string]any{"user": name})["token"].(string)
}

// TestWorkspaceWritesAreAudited: every write attempt of an identified
// caller appends exactly one audit record with the actor, the Agent, the
// document and the outcome — written (with the version), refused (with the
// code and reason) or denied — and the Agent's audit trail shows them.
func TestWorkspaceWritesAreAudited(t *testing.T) {
	e, d, id := servingBot(t)
	vera := e.userToken("vera", "viewer")
	writes := func() []state.AuditRecord {
		var out []state.AuditRecord
		for _, r := range e.b.M.Audit(0, 0) {
			if r.Action == state.AuditWorkspaceWrite {
				out = append(out, r)
			}
		}
		return out
	}
	last := func(n int) state.AuditRecord {
		t.Helper()
		w := writes()
		require.Len(t, w, n, "one record per write")
		return w[n-1]
	}

	e.expect(200, "PUT", files+"/AGENTS.md", map[string]any{"content": "# v1\n", "replaces": contract.VersionAbsent})
	rec := last(1)
	require.Equal(t, state.OutcomeSuccess, rec.Outcome)
	require.Equal(t, "bootstrap", rec.Actor)
	require.Equal(t, `Agent::"team/bot"`, rec.Resource)
	require.Equal(t, id, rec.AgentID)
	require.Equal(t, "AGENTS.md", rec.Details["document"])
	require.Equal(t, sha("# v1\n"), rec.Details["sha256"])
	a, _ := e.b.M.Agent(id)
	require.Equal(t, a.ActiveRevisionID, rec.Details["revision"])

	e.refuse(409, "RESOURCE_CONFLICT", "PUT", files+"/SOUL.md", map[string]any{"content": "x", "replaces": sha("old")})
	rec = last(2)
	require.Equal(t, state.OutcomeFailure, rec.Outcome)
	require.Equal(t, "SOUL.md", rec.Details["document"])
	require.Equal(t, "RESOURCE_CONFLICT", rec.Details["code"])
	require.Equal(t, "WORKSPACE_CONFLICT", rec.Details["reason"])

	e.refuse(400, "INVALID_REQUEST", "PUT", files+"/AGENTS.md", map[string]any{"content": "x"})
	rec = last(3)
	require.Equal(t, state.OutcomeFailure, rec.Outcome)
	require.Equal(t, contract.ReasonVersionRequired, rec.Details["reason"])

	d.SetWorkspaceDown(id, true)
	e.refuse(503, "WORKSPACE_UNAVAILABLE", "PUT", files+"/AGENTS.md", map[string]any{"content": "x", "force": true})
	d.SetWorkspaceDown(id, false)
	rec = last(4)
	require.Equal(t, "WORKSPACE_UNAVAILABLE", rec.Details["code"])

	// a viewer may not write: denied, recorded as a denied write of the
	// document, nothing written
	r := e.raw("PUT", files+"/AGENTS.md", strings.NewReader(`{"content":"mine","force":true}`), vera)
	require.Equal(t, http.StatusForbidden, r.status, string(r.body))
	rec = last(5)
	require.Equal(t, state.OutcomeDenied, rec.Outcome)
	require.Equal(t, "user:vera", rec.Actor)
	require.Equal(t, "AGENTS.md", rec.Details["document"])
	require.Equal(t, "UpdateAgent", rec.Details["action"])
	require.Equal(t, id, rec.AgentID)
	doc, _ := d.WorkspaceDocument(id, "AGENTS.md")
	require.Equal(t, "# v1\n", doc)

	// reads are not writes
	e.expect(200, "GET", files+"/AGENTS.md", nil)
	last(5)

	// the Agent's audit trail (the console's) shows them, newest first
	ov := e.expect(200, "GET", "/v1/namespaces/team/agents/bot/overview", nil)
	var trail []string
	for _, x := range ov["audit"].([]any) {
		rec := x.(map[string]any)
		if rec["action"] == state.AuditWorkspaceWrite {
			trail = append(trail, rec["outcome"].(string))
		}
	}
	require.Equal(t, []string{"denied", "failure", "failure", "failure", "success"}, trail)
}
