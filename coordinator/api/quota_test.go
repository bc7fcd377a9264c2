package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// A Namespace quota is the cluster administrator's to set; a deploy that
// would pass it is refused 409 QUOTA_EXCEEDED naming the quota, creates no
// revision and no work, and leaves one audit record of the refusal. An
// Agent's own (smaller) limits count instead of the defaults; bad
// quantities are refused 400 and change nothing.
func TestQuotaRefusesDeploy(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.reject(400, "INVALID_REQUEST", "PUT", "/v1/namespaces/team/quota", map[string]any{"cpu": "lots"})
	e.reject(400, "INVALID_REQUEST", "PUT", "/v1/namespaces/team/quota", map[string]any{"agents": -1})
	ns := e.expect(200, "PUT", "/v1/namespaces/team/quota", map[string]any{"agents": 1, "memory": "4Gi"})
	require.Equal(t, map[string]any{"agents": float64(1), "memory": "4Gi"}, ns["quota"])
	got := e.expect(200, "GET", "/v1/namespaces/team", nil)
	require.Equal(t, ns["quota"], got["quota"])

	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot2", "configuration": "cfg",
		"harnessAuth": map[string]any{"method": "api_key", "credentialKind": "secret", "sourceRef": "secret://team/anthropic#key"}})

	refused := func(quota string) {
		t.Helper()
		m := e.b.M
		bot2, ok := m.AgentByName(mustNS(t, e).ID, "bot2")
		require.True(t, ok)
		seq := lastSeq(m)
		r := e.do("POST", "/v1/namespaces/team/agents/bot2/deploy", nil)
		require.Equal(t, 409, r.status, "%s", r.body)
		require.Equal(t, "QUOTA_EXCEEDED", r.errCode(t))
		body := r.json(t)["error"].(map[string]any)
		require.Contains(t, body["message"], "quota "+quota)
		require.Equal(t, quota, body["details"].(map[string]any)["quota"])
		require.Empty(t, m.Revisions(bot2.ID), "no revision")
		for _, w := range m.WorkItems(state.WorkFilter{}) {
			require.NotEqual(t, bot2.ID, w.AgentID, "no work")
		}
		au := m.Audit(seq, 0)
		require.Len(t, au, 1, "one record: the refusal")
		require.Equal(t, state.AuditDeploy, au[0].Action)
		require.Equal(t, state.OutcomeDenied, au[0].Outcome)
		require.Equal(t, "QUOTA_EXCEEDED", au[0].Details["code"])
		require.Equal(t, quota, au[0].Details["quota"])
		require.Equal(t, "bootstrap", au[0].Actor, "the actor of the refused request")
	}
	refused("agents")

	e.expect(200, "PUT", "/v1/namespaces/team/quota", map[string]any{"memory": "4Gi"})
	refused("memory") // bot's Gateway (3Gi limit) + bot2's (3Gi) > 4Gi

	e.reject(400, "INVALID_REQUEST", "PATCH", "/v1/namespaces/team/agents/bot2", map[string]any{"resources": map[string]any{
		"gateway": map[string]any{"memoryRequest": "2Gi", "memoryLimit": "1Gi"}}})
	e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot2", map[string]any{"resources": map[string]any{
		"gateway": map[string]any{"memoryRequest": "512Mi", "memoryLimit": "1Gi"}}})
	dep := e.expect(202, "POST", "/v1/namespaces/team/agents/bot2/deploy", nil)
	require.Equal(t, "1Gi", dep["resources"].(map[string]any)["gateway"].(map[string]any)["memoryLimit"], "frozen in the revision")

	e.expect(200, "PUT", "/v1/namespaces/team/quota", map[string]any{})
	got = e.expect(200, "GET", "/v1/namespaces/team", nil)
	require.NotContains(t, got, "quota", "an empty quota removes it")
}

func mustNS(t *testing.T, e *env) state.Namespace {
	t.Helper()
	ns, ok := e.b.M.NamespaceByName("team")
	require.True(t, ok)
	return ns
}

func lastSeq(m *state.Machine) int64 {
	au := m.Audit(0, 0)
	if len(au) == 0 {
		return 0
	}
	return au[len(au)-1].Seq
}
