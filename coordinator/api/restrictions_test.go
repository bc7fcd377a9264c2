package api_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/state"
)

// TestRestrictionBlocksOnlyWhatItNames: a forbid policy on dedicated Codex
// in namespace team blocks exactly that deploy — not an embedded deploy in
// team, not dedicated Codex elsewhere, not other actions on the same Agent —
// and answers 403 naming the policy, with a denied audit record.
func TestRestrictionBlocksOnlyWhatItNames(t *testing.T) {
	e := newEnv(t)
	for _, ns := range []string{"team", "lab"} {
		e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": ns})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/configurations",
			map[string]any{"name": "codex", "document": json.RawMessage(admission.ExampleDedicatedCodex)})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/configurations",
			map[string]any{"name": "claw", "document": json.RawMessage(admission.ExampleEmbeddedAnthropic)})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/agents", map[string]any{"name": "coder", "configuration": "codex",
			"executionMode": "dedicated", "harnessAuth": map[string]any{"method": "api_key", "sourceRef": "secret://" + ns + "/openai#key"}})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/agents", map[string]any{"name": "chat", "configuration": "claw",
			"harnessAuth": map[string]any{"method": "api_key", "sourceRef": "secret://" + ns + "/anthropic#key"}})
	}
	policy := `// no dedicated Codex in team
forbid (principal, action == Action::"DeployAgent", resource in Namespace::"team")
when { context.harness == "codex" && context.mode == "dedicated" };`
	e.expect(201, "PUT", "/v1/restrictions/no-team-codex", map[string]any{"policy": policy})

	r := e.do("POST", "/v1/namespaces/team/agents/coder/deploy", nil)
	require.Equal(t, 403, r.status, string(r.body))
	det := r.json(t)["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, "DeployAgent", det["action"])
	require.Equal(t, `Agent::"team/coder"`, det["resource"])
	require.Contains(t, det["policies"], "restriction:no-team-codex:0")
	au := e.b.M.Audit(0, 0)
	last := au[len(au)-1]
	require.Equal(t, state.OutcomeDenied, last.Outcome)
	require.Equal(t, state.AuditDeploy, last.Action)
	require.Equal(t, "bootstrap", last.Actor, "even cluster-admin is restricted")
	require.Empty(t, e.b.M.Revisions(agentID(t, e, "team", "coder")), "nothing admitted")

	e.expect(202, "POST", "/v1/namespaces/team/agents/chat/deploy", nil)
	e.expect(202, "POST", "/v1/namespaces/lab/agents/coder/deploy", nil)
	e.expect(202, "POST", "/v1/namespaces/team/agents/coder/stop", nil)
	e.expect(200, "PATCH", "/v1/namespaces/team/agents/coder", map[string]any{"plugins": []string{"x"}})

	// Removing the Restriction lifts it.
	e.expect(200, "DELETE", "/v1/restrictions/no-team-codex", nil)
	e.expect(202, "POST", "/v1/namespaces/team/agents/coder/deploy", nil)
}

func TestRestrictionValidation(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		policy string
		line   float64
	}{
		{"permit (principal, action, resource);", 1},
		{"forbid (principal, action, resource)\nwhen { context.nope == 1 ", 2},
		{"forbid (principal, action == Action::\"DeployAgent\", resource)\n\nwhen { context.harnes == \"codex\" };", 3},
		{"\nforbid (principal, action == Action::\"Teleport\", resource);", 2},
	} {
		r := e.reject(400, "INVALID_REQUEST", "PUT", "/v1/restrictions/bad", map[string]any{"policy": tc.policy})
		det := r["error"].(map[string]any)["details"].(map[string]any)
		require.Equal(t, "INVALID_POLICY", det["reason"])
		require.Equal(t, tc.line, det["line"], tc.policy)
	}
	ok := `forbid (principal, action == Action::"DeployAgent", resource) when { context.customEndpoint };`
	e.expect(201, "PUT", "/v1/restrictions/no-custom-endpoints", map[string]any{"policy": ok})
	e.expect(200, "PUT", "/v1/restrictions/no-custom-endpoints", map[string]any{"policy": ok})
	require.Len(t, e.expect(200, "GET", "/v1/restrictions", nil)["items"], 1)
}

func agentID(t *testing.T, e *env, ns, name string) string {
	t.Helper()
	return e.expect(200, "GET", "/v1/namespaces/"+ns+"/agents/"+name, nil)["id"].(string)
}
