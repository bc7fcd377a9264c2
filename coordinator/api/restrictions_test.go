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
	for _, ns := range codexAndClaw(e) {
		for _, src := range []string{"openai", "anthropic"} {
			e.expect(201, "POST", "/v1/namespaces/"+ns+"/credentials", map[string]any{"name": src, "values": map[string]string{"key": "v"}})
		}
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/agents", map[string]any{"name": "coder", "configuration": "codex",
			"executionMode": "dedicated", "harnessAuth": map[string]any{"method": "api_key", "sourceRef": "secret://" + ns + "/openai#key"}})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/agents", map[string]any{"name": "chat", "configuration": "claw",
			"harnessAuth": map[string]any{"method": "api_key", "sourceRef": "secret://" + ns + "/anthropic#key"}})
	}
	policy := `// no dedicated Codex in team
forbid (principal, action == Action::"DeployAgent", resource in Namespace::"team")
when { context.harness == "codex" && context.mode == "dedicated" };`
	e.expect(201, "PUT", "/v1/restrictions/no-team-codex", map[string]any{"policy": policy})

	// what the caller may do says so before the deploy is tried, with the
	// same decision (the admitted facts), and records nothing
	n := len(e.b.M.Audit(0, 0))
	deploy := func(ns, agent string) map[string]any {
		acc := e.expect(200, "GET", "/v1/namespaces/"+ns+"/agents/"+agent+"/access", nil)
		return acc["actions"].(map[string]any)["DeployAgent"].(map[string]any)
	}
	require.Equal(t, false, deploy("team", "coder")["allowed"])
	require.Equal(t, []any{"restriction:no-team-codex:0"}, deploy("team", "coder")["reasons"])
	require.Equal(t, true, deploy("team", "chat")["allowed"])
	require.Equal(t, true, deploy("lab", "coder")["allowed"])
	require.Len(t, e.b.M.Audit(0, 0), n, "asking is not an attempt")

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
	require.Equal(t, true, deploy("team", "coder")["allowed"])
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

// codexAndClaw creates Namespaces team and lab, each with Configurations
// codex (dedicated Codex) and claw (embedded OpenClaw), and returns their
// names.
func codexAndClaw(e *env) []string {
	e.t.Helper()
	nss := []string{"team", "lab"}
	for _, ns := range nss {
		e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": ns})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/configurations",
			map[string]any{"name": "codex", "document": json.RawMessage(admission.ExampleDedicatedCodex)})
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/configurations",
			map[string]any{"name": "claw", "document": json.RawMessage(admission.ExampleEmbeddedAnthropic)})
	}
	return nss
}

func agentID(t *testing.T, e *env, ns, name string) string {
	t.Helper()
	return e.expect(200, "GET", "/v1/namespaces/"+ns+"/agents/"+name, nil)["id"].(string)
}

// TestRestrictionOnUpdateReadsBothAgents: an update is decided on the Agent
// as it is and as the update would make it, so a Restriction on an
// attribute cannot be bypassed by creating an Agent without it and
// updating the attribute in; every denial leaves the Agent as it was and
// appends one denied record.
func TestRestrictionOnUpdateReadsBothAgents(t *testing.T) {
	e := newEnv(t)
	for _, ns := range codexAndClaw(e) {
		for _, src := range []string{"openai", "anthropic"} {
			e.expect(201, "POST", "/v1/namespaces/"+ns+"/credentials", map[string]any{"name": src, "values": map[string]string{"key": "v"}})
		}
		e.expect(201, "POST", "/v1/namespaces/"+ns+"/agents", map[string]any{"name": "chat", "configuration": "claw"})
	}
	// created before the Restriction
	e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "old", "configuration": "codex",
		"executionMode": "dedicated"})
	policy := `forbid (principal, action in [Action::"CreateAgent", Action::"UpdateAgent"], resource in Namespace::"team")
when { resource.executionMode == "dedicated" || resource.configuration == "codex" };`
	e.expect(201, "PUT", "/v1/restrictions/no-team-dedicated", map[string]any{"policy": policy})
	r := e.do("POST", "/v1/namespaces/team/agents", map[string]any{"name": "coder", "configuration": "codex",
		"executionMode": "dedicated"})
	require.Equal(t, 403, r.status, string(r.body))

	for _, tc := range []struct {
		name, ns, agent string
		patch           map[string]any
		status          int
	}{
		{"into dedicated mode", "team", "chat", map[string]any{"executionMode": "dedicated"}, 403},
		{"onto the restricted configuration", "team", "chat", map[string]any{"configuration": "codex"}, 403},
		{"both at once", "team", "chat", map[string]any{"executionMode": "dedicated", "configuration": "codex"}, 403},
		{"out of dedicated mode: the Agent as it is is restricted", "team", "old", map[string]any{"executionMode": "embedded"}, 403},
		{"what the Restriction does not name", "team", "chat", map[string]any{"plugins": []string{"x"}}, 200},
		{"another namespace", "lab", "chat", map[string]any{"executionMode": "dedicated", "configuration": "codex"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/namespaces/" + tc.ns + "/agents/" + tc.agent
			before := e.expect(200, "GET", path, nil)
			if tc.status == 200 {
				e.expect(200, "PATCH", path, tc.patch)
				return
			}
			n := len(e.b.M.Audit(0, 0))
			r := e.do("PATCH", path, tc.patch)
			require.Equal(t, 403, r.status, string(r.body))
			det := r.json(t)["error"].(map[string]any)["details"].(map[string]any)
			require.Equal(t, "UpdateAgent", det["action"])
			require.Contains(t, det["policies"], "restriction:no-team-dedicated:0")
			require.Equal(t, before, e.expect(200, "GET", path, nil), "the Agent is as it was")
			au := e.b.M.Audit(0, 0)
			require.Len(t, au, n+1, "one denied record")
			require.Equal(t, state.OutcomeDenied, au[n].Outcome)
			require.Equal(t, state.AuditAgentUpdate, au[n].Action)
			require.Equal(t, `Agent::"team/`+tc.agent+`"`, au[n].Resource)
			require.NotEmpty(t, au[n].AgentID, "the denial is on the Agent's audit trail")
		})
	}
}
