package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

func TestAuth(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"no token", "/v1/namespaces", "", 401},
		{"wrong token", "/v1/namespaces", "nope", 401},
		{"prefix of token", "/v1/namespaces", testToken[:3], 401},
		{"good token", "/v1/namespaces", testToken, 200},
		{"metrics needs token", "/metrics", "", 401},
		{"metrics with token", "/metrics", testToken, 200},
		{"unknown route needs token", "/v1/nope", "", 401},
		{"livez is open", "/livez", "", 200},
		{"readyz is open", "/readyz", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.raw("GET", tc.path, nil, tc.token)
			require.Equal(t, tc.status, r.status, string(r.body))
			if tc.status == 401 {
				require.Equal(t, "UNAUTHORIZED", r.errCode(t))
				require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			}
		})
	}
	// A write without a token changes nothing.
	before := e.b.M.Digest()
	r := e.raw("POST", "/v1/namespaces", strings.NewReader(`{"name":"x"}`), "")
	require.Equal(t, 401, r.status)
	require.Equal(t, before, e.b.M.Digest())
}

func TestNamespaces(t *testing.T) {
	e := newEnv(t)
	ns := e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team"})
	id := ns["id"].(string)
	require.Len(t, id, 32)
	require.Equal(t, "team", ns["name"])

	require.Equal(t, id, e.expect(200, "GET", "/v1/namespaces/team", nil)["id"])
	require.Equal(t, "team", e.expect(200, "GET", "/v1/namespaces/"+id, nil)["name"])
	items := e.expect(200, "GET", "/v1/namespaces", nil)["items"].([]any)
	require.Len(t, items, 1)

	e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces", map[string]any{"name": "team"})
	e.reject(404, "NOT_FOUND", "GET", "/v1/namespaces/nope", nil)
	for _, bad := range []string{"", "Team", "-a", "a-", "a_b", strings.Repeat("a", 64), "a b"} {
		e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces", map[string]any{"name": bad})
	}
}

func TestStrictDecoding(t *testing.T) {
	e := newEnv(t)
	for name, body := range map[string]string{
		"unknown field":  `{"name":"a","extra":1}`,
		"trailing data":  `{"name":"a"}{"name":"b"}`,
		"trailing junk":  `{"name":"a"} x`,
		"not an object":  `["a"]`,
		"string":         `"a"`,
		"empty":          ``,
		"malformed":      `{"name":`,
		"wrong type":     `{"name":7}`,
		"null":           `null`,
		"case variation": `{"NAME":"a"}`,
		"duplicate key":  `{"name":"a","name":"b"}`,
	} {
		t.Run(name, func(t *testing.T) {
			e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces", body)
		})
	}
	// Keys match exactly: encoding/json's case-insensitive matching is off.
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces/x/agents", `{"name":"a","configuration":"c","harnessAuth":{"Method":"api_key"}}`)
	e.expect(201, "POST", "/v1/namespaces", `{"name":"ok"}`)
}

func TestBodySizeLimit(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxBodyBytes = 1024 })
	big := `{"name":"a","pad":"` + strings.Repeat("x", 2048) + `"}`
	r := e.reject(413, "INVALID_REQUEST", "POST", "/v1/namespaces", big)
	require.EqualValues(t, 1024, r["error"].(map[string]any)["details"].(map[string]any)["limit"])
	// Exactly at the limit is decoded (and then refused for its content).
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces", `{"name":"`+strings.Repeat("a", 1024-11)+`"}`)
}

func TestConfigurations(t *testing.T) {
	e := newEnv(t)
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team"})
	doc := json.RawMessage(admission.ExampleEmbeddedAnthropic)
	cfg := e.expect(201, "POST", "/v1/namespaces/team/configurations", map[string]any{"name": "cfg", "document": doc})
	require.EqualValues(t, 1, cfg["generation"])
	id := cfg["id"].(string)

	up := e.expect(200, "PUT", "/v1/namespaces/team/configurations/cfg",
		map[string]any{"document": json.RawMessage(admission.ExampleEmbeddedOpenAI)})
	require.EqualValues(t, 2, up["generation"])
	require.Equal(t, id, up["id"])
	got := e.expect(200, "GET", "/v1/namespaces/team/configurations/"+id, nil)
	require.EqualValues(t, 2, got["generation"])
	require.Contains(t, string(mustJSON(t, got["document"])), "gpt-5.5")
	require.Len(t, e.expect(200, "GET", "/v1/namespaces/team/configurations", nil)["items"], 1)

	e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/configurations", map[string]any{"name": "cfg", "document": doc})
	e.reject(404, "NOT_FOUND", "POST", "/v1/namespaces/none/configurations", map[string]any{"name": "c2", "document": doc})
	e.reject(404, "NOT_FOUND", "PUT", "/v1/namespaces/team/configurations/none", map[string]any{"document": doc})
	e.reject(404, "NOT_FOUND", "GET", "/v1/namespaces/team/configurations/none", nil)
	for name, d := range map[string]string{
		"missing":      ``,
		"array":        `[1]`,
		"null":         `null`,
		"agents.list":  `{"agents":{"list":[{"id":"a"}]}}`,
		"bad provider": `{"agents":{"defaults":{"model":{"primary":"noslash"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			body := `{"name":"c3"}`
			if d != "" {
				body = `{"name":"c3","document":` + d + `}`
			}
			e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces/team/configurations", body)
		})
	}
	e.reject(400, "INVALID_REQUEST", "PUT", "/v1/namespaces/team/configurations/cfg", `{"document":{"agents":{"list":[{"id":"a"}]}}}`)
	e.reject(400, "INVALID_REQUEST", "PUT", "/v1/namespaces/team/configurations/cfg", `{"name":"x","document":{}}`)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestAgents(t *testing.T) {
	e := newEnv(t)
	_, cfg, agent := e.seed()
	id := agent["id"].(string)
	require.Equal(t, "embedded", agent["executionMode"], "executionMode defaults to embedded")
	require.Equal(t, cfg["id"], agent["configurationId"])
	require.Equal(t, cfg["name"], agent["configuration"], "the create answer names the Configuration")
	require.Equal(t, "team", agent["namespace"])
	require.NotContains(t, agent, "activeRevisionId")
	require.NotContains(t, agent, "activeRevision")

	// Id or name in both path segments.
	ns := e.expect(200, "GET", "/v1/namespaces/team", nil)
	require.Equal(t, "bot", e.expect(200, "GET", "/v1/namespaces/"+ns["id"].(string)+"/agents/"+id, nil)["name"])
	require.Equal(t, id, e.expect(200, "GET", "/v1/namespaces/team/agents/bot", nil)["id"])
	require.Len(t, e.expect(200, "GET", "/v1/namespaces/team/agents", nil)["items"], 1)

	// PATCH without executionMode preserves it; with it, changes it.
	e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"executionMode": "dedicated"})
	got := e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"plugins": []string{"@openclaw/codex"}})
	require.Equal(t, "dedicated", got["executionMode"])
	require.Equal(t, []any{"@openclaw/codex"}, got["plugins"])
	got = e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"executionMode": "embedded", "plugins": []string{}})
	require.Equal(t, "embedded", got["executionMode"])
	require.NotContains(t, got, "plugins")

	e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot", "configuration": "cfg"})
	e.reject(404, "NOT_FOUND", "POST", "/v1/namespaces/team/agents", map[string]any{"name": "b2", "configuration": "none"})
	e.reject(404, "NOT_FOUND", "GET", "/v1/namespaces/team/agents/none", nil)
	e.reject(404, "NOT_FOUND", "PATCH", "/v1/namespaces/team/agents/none", map[string]any{})
	e.reject(404, "NOT_FOUND", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"configuration": "none"})
	for name, body := range map[string]map[string]any{
		"no configuration": {"name": "b2"},
		"bad name":         {"name": "B2", "configuration": "cfg"},
		"bad mode":         {"name": "b2", "configuration": "cfg", "executionMode": "remote"},
		"bad method":       {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "password", "sourceRef": "credential:a#b"}},
		"bad kind":         {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "api_key", "credentialKind": "file", "sourceRef": "credential:a#b"}},
		"ref not a ref":    {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "api_key", "sourceRef": "secret://a#b"}},
		"ref bare name":    {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "api_key", "sourceRef": "model"}},
		"missing ref":      {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "api_key"}},
		"ref with space":   {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "api_key", "sourceRef": "sk live"}},
		"runtime with ref": {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "runtime", "sourceRef": "x"}},
		"auth extra field": {"name": "b2", "configuration": "cfg", "harnessAuth": map[string]any{"method": "api_key", "sourceRef": "x", "secret": "y"}},
		"bad plugin":       {"name": "b2", "configuration": "cfg", "plugins": []string{"a b"}},
		"dup plugin":       {"name": "b2", "configuration": "cfg", "plugins": []string{"a", "a"}},
		"bad compute":      {"name": "b2", "configuration": "cfg", "computeId": "Not_A_Label"},
	} {
		t.Run(name, func(t *testing.T) {
			e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces/team/agents", body)
		})
	}
	e.reject(400, "INVALID_REQUEST", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"executionMode": "remote"})
	e.reject(400, "INVALID_REQUEST", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"name": "renamed"})
}

func TestDeployStopDelete(t *testing.T) {
	e := newEnv(t)
	_, _, agent := e.seed()
	id := agent["id"].(string)

	dep := e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.EqualValues(t, 1, dep["number"])
	require.Equal(t, "pending", dep["status"])
	require.Equal(t, "openclaw", dep["harness"].(map[string]any)["id"])
	require.Equal(t, "2026.9.6", dep["harness"].(map[string]any)["version"])
	require.Equal(t, "embedded", dep["mode"])
	require.Equal(t, "api_key", dep["harnessAuth"].(map[string]any)["method"])
	workID := dep["workId"].(string)
	require.NotEmpty(t, workID)

	dep2 := e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", `{"logLevel":"debug"}`)
	require.EqualValues(t, 2, dep2["number"])
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces/team/agents/bot/deploy", `{"logLevel":"loud"}`)
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces/team/agents/bot/deploy", `{"force":true}`)

	revs := e.expect(200, "GET", "/v1/namespaces/team/agents/bot/revisions", nil)["items"].([]any)
	require.Len(t, revs, 2)
	require.Equal(t, dep["id"], e.expect(200, "GET", "/v1/namespaces/team/agents/bot/revisions/1", nil)["id"])
	require.EqualValues(t, 1, e.expect(200, "GET", "/v1/namespaces/team/agents/bot/revisions/"+dep["id"].(string), nil)["number"])
	e.reject(404, "NOT_FOUND", "GET", "/v1/namespaces/team/agents/bot/revisions/9", nil)

	work := e.expect(200, "GET", "/v1/namespaces/team/agents/bot/work", nil)["items"].([]any)
	require.Len(t, work, 2)
	w0 := work[0].(map[string]any)
	require.Equal(t, "activate", w0["kind"])
	require.Equal(t, "queued", w0["phase"])
	require.Equal(t, []any{"team", "bot", float64(1)}, []any{w0["namespace"], w0["agent"], w0["revision"]},
		"work names its Namespace, Agent and revision alongside the ids")
	require.Equal(t, workID, e.expect(200, "GET", "/v1/work/"+workID, nil)["id"])
	e.reject(404, "NOT_FOUND", "GET", "/v1/work/none", nil)
	require.Len(t, e.expect(200, "GET", "/v1/work?state=queued&kind=activate&agent="+id, nil)["items"], 2)
	require.Len(t, e.expect(200, "GET", "/v1/work?state=failed", nil)["items"], 0)
	e.reject(400, "INVALID_REQUEST", "GET", "/v1/work?state=bogus", nil)
	e.reject(400, "INVALID_REQUEST", "GET", "/v1/work?kind=bogus", nil)
	e.reject(400, "INVALID_REQUEST", "GET", "/v1/work?owner=x", nil)

	audit := e.expect(200, "GET", "/v1/audit", nil)["items"].([]any)
	require.Len(t, audit, 6, "namespace, credential source, configuration and agent creation, two deploys")
	require.Equal(t, state.AuditNamespaceCreate, audit[0].(map[string]any)["action"])
	require.Equal(t, state.AuditCredentialCreate, audit[1].(map[string]any)["action"])
	require.Equal(t, state.AuditDeploy, audit[4].(map[string]any)["action"])
	require.Equal(t, `Agent::"team/bot"`, audit[4].(map[string]any)["resource"])
	require.Equal(t, []any{"team", "bot", float64(1)}, []any{audit[4].(map[string]any)["namespace"],
		audit[4].(map[string]any)["agent"], audit[4].(map[string]any)["revision"]}, "audit records name what they point at")
	require.Equal(t, "success", audit[4].(map[string]any)["outcome"])
	require.Len(t, e.expect(200, "GET", "/v1/audit?after=5&limit=5", nil)["items"], 1)
	require.Len(t, e.expect(200, "GET", "/v1/audit?action="+state.AuditDeploy, nil)["items"], 2)
	require.Len(t, e.expect(200, "GET", "/v1/audit?namespace=team&actor=bootstrap", nil)["items"], 6)
	require.Len(t, e.expect(200, "GET", "/v1/audit?actor=someone", nil)["items"], 0)
	require.Len(t, e.expect(200, "GET", "/v1/audit?until=2000-01-01T00:00:00Z", nil)["items"], 0)
	seqs := func(path string) []float64 {
		var out []float64
		for _, it := range e.expect(200, "GET", path, nil)["items"].([]any) {
			out = append(out, it.(map[string]any)["seq"].(float64))
		}
		return out
	}
	require.Equal(t, []float64{1, 2}, seqs("/v1/audit?limit=2"), "oldest first by default: after= pages forward")
	require.Equal(t, []float64{6, 5}, seqs("/v1/audit?order=newest&limit=2"), "the newest records, newest first")
	require.Equal(t, []float64{4, 3}, seqs("/v1/audit?order=newest&limit=2&before=5"), "before= pages back")
	require.Equal(t, []float64{2, 1}, seqs("/v1/audit?order=newest&before=3"))
	require.Equal(t, []float64{6, 5}, seqs("/v1/audit?order=newest&after=4"))
	require.Equal(t, []float64{3, 4}, seqs("/v1/audit?order=oldest&after=2&before=5"))
	require.Equal(t, []float64{1}, seqs("/v1/audit?order=newest&limit=1&action="+state.AuditNamespaceCreate), "filters apply before the limit")
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=1001", "since=1", "before=-1", "before=x", "order=bogus"} {
		e.reject(400, "INVALID_REQUEST", "GET", "/v1/audit?"+q, nil)
	}

	stop := e.expect(202, "POST", "/v1/namespaces/team/agents/bot/stop", nil)
	require.Equal(t, "stop", stop["kind"])
	require.Equal(t, "queued", stop["state"])
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/namespaces/team/agents/bot/stop", `{"now":true}`)

	del := e.expect(202, "DELETE", "/v1/namespaces/team/agents/bot", nil)
	require.Equal(t, "delete", del["kind"])
	require.Equal(t, true, e.expect(200, "GET", "/v1/namespaces/team/agents/bot", nil)["deleting"])
	e.reject(409, "RESOURCE_CONFLICT", "DELETE", "/v1/namespaces/team/agents/bot", nil)
	e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/agents/bot/stop", nil)
	e.reject(409, "RESOURCE_CONFLICT", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"executionMode": "embedded"})
	e.reject(404, "NOT_FOUND", "POST", "/v1/namespaces/team/agents/none/deploy", nil)
}

func TestDeployAdmissionRefusals(t *testing.T) {
	e := newEnv(t)
	e.seed()
	// No harnessAuth: 409 naming the rule.
	e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "noauth", "configuration": "cfg"})
	r := e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/agents/noauth/deploy", nil)
	require.NotEmpty(t, r["error"].(map[string]any)["details"].(map[string]any)["rule"])
	// Dedicated OpenClaw without a SandboxDriver.
	e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"executionMode": "dedicated"})
	rr := e.do("POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Contains(t, []int{400, 409}, rr.status, string(rr.body))
	require.Empty(t, e.expect(200, "GET", "/v1/namespaces/team/agents/bot/revisions", nil)["items"])
}

func TestInstallation(t *testing.T) {
	e := newEnv(t)
	inst := e.expect(200, "GET", "/v1/installation", nil)
	caps := inst["capabilities"].(map[string]any)
	require.Equal(t, []any{"embedded"}, caps["openclaw"].(map[string]any)["executionModes"])
	require.NotContains(t, caps, "nativeWorkers")
	require.NotContains(t, inst, "sandboxDriverUnavailable")
	runtimes := func(caps map[string]any) []string {
		var out []string
		for _, r := range caps["runtimes"].([]any) {
			m := r.(map[string]any)
			out = append(out, fmt.Sprint(m["harness"], "/", m["mode"]))
		}
		return out
	}
	require.Equal(t, []string{"openclaw/embedded", "codex/dedicated"}, runtimes(caps), "dedicated Codex runs too")
	codex := caps["runtimes"].([]any)[1].(map[string]any)
	require.Contains(t, codex["harnessAuth"], "codex_pat", "with the methods the driver delivers for it")

	setInstallation(t, e.b, state.Installation{SandboxDriver: "openshell", NativeWorkerSupport: "pinned-runtime"})
	caps = e.expect(200, "GET", "/v1/installation", nil)["capabilities"].(map[string]any)
	require.Equal(t, []any{"embedded", "dedicated"}, caps["openclaw"].(map[string]any)["executionModes"])
	require.Equal(t, "pinned-runtime", caps["nativeWorkers"].(map[string]any)["support"])
	require.Equal(t, []string{"openclaw/embedded", "codex/dedicated", "openclaw/dedicated"}, runtimes(caps))

	// A driver without dedicated Codex does not list it.
	dc := memory.DefaultCapabilities()
	delete(dc.Topologies, contract.DedicatedCodex)
	e.b.SetDriver(limitedDriver{Driver: memory.New(dc), sandboxUp: true})
	caps = e.expect(200, "GET", "/v1/installation", nil)["capabilities"].(map[string]any)
	require.Equal(t, []string{"openclaw/embedded", "openclaw/dedicated"}, runtimes(caps))
}

func TestCluster(t *testing.T) {
	e := newEnv(t)
	e.seed()
	info := e.expect(200, "GET", "/v1/cluster", nil)
	require.Equal(t, "Leader", info["state"])
	require.Equal(t, e.b.M.Digest(), info["digest"])

	j := e.expect(200, "POST", "/v1/cluster/join", map[string]any{"id": "node-2", "raftAddr": "127.0.0.1:7411", "httpAddr": "127.0.0.1:7410"})
	require.Len(t, j["members"], 2)
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/cluster/join", map[string]any{"id": "node-2", "raftAddr": "127.0.0.1:7411", "httpAddr": "127.0.0.1:7410"})
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/cluster/join", map[string]any{"id": "node-3"})
	e.expect(200, "POST", "/v1/cluster/transfer", map[string]any{"id": "node-2"})
	e.expect(200, "POST", "/v1/cluster/transfer", nil)
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/cluster/transfer", map[string]any{"id": "node-9"})
	require.Len(t, e.expect(200, "POST", "/v1/cluster/remove", map[string]any{"id": "node-2"})["members"], 1)
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/cluster/remove", map[string]any{"id": "node-2"})
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/cluster/remove", map[string]any{})

	// Snapshot round trip: save, change, restore, same digest as saved.
	snap := e.raw("GET", "/v1/cluster/snapshot", nil, testToken)
	require.Equal(t, 200, snap.status)
	saved := e.b.M.Digest()
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "later"})
	require.NotEqual(t, saved, e.b.M.Digest())
	e.expect(200, "POST", "/v1/cluster/restore", string(snap.body))
	// The restored state plus the restore's own audit record.
	_, ok := e.b.M.NamespaceByName("later")
	require.False(t, ok)
	au := e.b.M.Audit(0, 0)
	require.Equal(t, "oce.cluster.restore", au[len(au)-1].Action)
	require.Equal(t, "oce.cluster.join", au[len(au)-5].Action)
	_ = saved
	e.reject(400, "INVALID_REQUEST", "POST", "/v1/cluster/restore", "not a snapshot")
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	require.Equal(t, "NOT_FOUND", e.do("GET", "/v1/nothing", nil).errCode(t))
	require.Equal(t, "NOT_FOUND", e.do("PUT", "/v1/namespaces", nil).errCode(t))
}

func TestFollowerRedirect(t *testing.T) {
	leader := newEnv(t)
	follower := newEnv(t)
	follower.b.SetFollower(leader.srv.URL)

	r := follower.reject(421, "NOT_LEADER", "POST", "/v1/namespaces", map[string]any{"name": "team"})
	require.Equal(t, leader.srv.URL, r["error"].(map[string]any)["details"].(map[string]any)["leader"])
	// Reads are served locally on a follower.
	follower.expect(200, "GET", "/v1/namespaces", nil)
	follower.expect(200, "GET", "/readyz", nil)

	nobody := newEnv(t)
	nobody.b.SetFollower("")
	nobody.reject(503, "NOT_LEADER", "POST", "/v1/namespaces", map[string]any{"name": "team"})
	require.Equal(t, 503, nobody.raw("GET", "/readyz", nil, "").status)
}

func TestFollowerForward(t *testing.T) {
	leader := newEnv(t)
	follower := newEnv(t, func(c *api.Config) { c.ForwardWrites = true })
	follower.b.SetFollower(leader.srv.URL)
	followerDigest := follower.b.M.Digest()

	ns := follower.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team"})
	got, ok := leader.b.M.Namespace(ns["id"].(string))
	require.True(t, ok, "the write reached the leader")
	require.Equal(t, "team", got.Name)
	require.Equal(t, followerDigest, follower.b.M.Digest(), "the follower applied nothing itself")

	// Errors come back from the leader unchanged; the token is forwarded.
	follower.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces", map[string]any{"name": "team"})
	require.Equal(t, 401, follower.raw("POST", "/v1/namespaces", strings.NewReader(`{"name":"x"}`), "").status)

	// A follower that points at an unreachable leader answers NOT_LEADER.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	follower.b.SetFollower(dead.URL)
	follower.reject(503, "NOT_LEADER", "POST", "/v1/namespaces", map[string]any{"name": "other"})
}

func TestLostLeadershipDuringPropose(t *testing.T) {
	e := newEnv(t)
	e.b.ProposeHook = func(string) error { return &apitest.NotLeaderError{Leader: "127.0.0.1:7410"} }
	r := e.reject(421, "NOT_LEADER", "POST", "/v1/namespaces", map[string]any{"name": "team"})
	require.Equal(t, "127.0.0.1:7410", r["error"].(map[string]any)["details"].(map[string]any)["leader"])
	e.b.ProposeHook = func(string) error { return errors.New("disk on fire") }
	e.reject(500, "INTERNAL", "POST", "/v1/namespaces", map[string]any{"name": "team"})
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	r := e.raw("GET", "/metrics", nil, testToken)
	require.Equal(t, 200, r.status)
	body := string(r.body)
	for _, want := range []string{
		`oce_work_items{state="queued"} 1`,
		`oce_work_items{state="failed"} 0`,
		`oce_activations_total 0`,
		`oce_coordinator_apply_seconds_count{outcome="ok",type="AdmitRevision"} 1`,
		`oce_api_requests_total{code="2xx",route="POST /v1/namespaces/{ns}/agents/{agent}/deploy"} 1`,
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "raft_leader", "the store's oce_raft_leader is the one leader gauge (coordinator/server)")
}

// limitedDriver is a compute driver with chosen capabilities and sandbox health.
type limitedDriver struct {
	*memory.Driver
	sandboxUp bool
}

func (d limitedDriver) SandboxDriverAvailable() bool { return d.sandboxUp }

func TestInstallationFollowsDriver(t *testing.T) {
	e := newEnv(t)
	caps := memory.DefaultCapabilities()
	delete(caps.Topologies, contract.Embedded)
	e.b.SetDriver(limitedDriver{Driver: memory.New(caps), sandboxUp: false})
	setInstallation(t, e.b, state.Installation{SandboxDriver: "openshell", NativeWorkerSupport: "pinned-runtime"})
	inst := e.expect(200, "GET", "/v1/installation", nil)
	require.Equal(t, []any{"dedicated"}, inst["capabilities"].(map[string]any)["openclaw"].(map[string]any)["executionModes"])
	require.Equal(t, true, inst["sandboxDriverUnavailable"])
	require.Equal(t, "memory", inst["compute"].(map[string]any)["driver"])

	// The embedded Agent cannot deploy on a driver without embedded OpenClaw.
	e.seed()
	e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
}

func TestDeployComputeSelection(t *testing.T) {
	e := newEnv(t)
	e.seed()
	dep := e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Equal(t, memory.Name, dep["computeId"], "an empty computeId selects the installation's driver")
	e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"computeId": "kubernetes"})
	r := e.reject(409, "RESOURCE_CONFLICT", "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Equal(t, "kubernetes", r["error"].(map[string]any)["details"].(map[string]any)["computeId"])
}

type actorKey struct{}

func TestActorAndOutcomeUnknown(t *testing.T) {
	var seen []string
	e := newEnv(t, func(c *api.Config) {
		c.WithActor = func(ctx context.Context, a string) context.Context { return context.WithValue(ctx, actorKey{}, a) }
	})
	e.b.ProposeHook = func(string) error { return nil }
	e.b.ContextHook = func(ctx context.Context) { s, _ := ctx.Value(actorKey{}).(string); seen = append(seen, s) }
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team"})
	require.Equal(t, []string{"bootstrap"}, seen, "the bootstrap token's actor")

	e.b.ProposeHook = func(string) error { return errors.New("store: not the leader; outcome unknown") }
	r := e.reject(503, "OUTCOME_UNKNOWN", "POST", "/v1/namespaces", map[string]any{"name": "other"})
	d := r["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, true, d["outcomeUnknown"])
	require.NotContains(t, d, "leader", "clients must not replay an unknown outcome")
}

// lagging is a backend whose local state has not caught up yet.
type lagging struct{ *apitest.Backend }

func (lagging) Ready(context.Context) error {
	return errors.New("applied index 3 behind commit index 9")
}

func TestReadyzNeedsAppliedState(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Config{Token: testToken}, lagging{apitest.New()}))
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/readyz")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 503, res.StatusCode)
	var eb struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&eb))
	require.Equal(t, "NOT_READY", eb.Error.Code)
	require.Contains(t, eb.Error.Message, "behind")
}
