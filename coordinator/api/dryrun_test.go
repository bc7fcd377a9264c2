package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/compute/memory"
)

// dryRun sends method path?dryRun=server and asserts it changed nothing:
// no proposal reached the Backend and the state's digest is the same.
func (e *env) dryRun(method, path string, v any) resp {
	e.t.Helper()
	before, proposals := e.b.M.Digest(), e.b.Proposals()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	r := e.send(method, path+sep+"dryRun=server", v, map[string]string{api.IdempotencyKeyHeader: "dry-" + method + path})
	require.Equal(e.t, before, e.b.M.Digest(), "a dry run changed the state: %s", r.body)
	require.Equal(e.t, proposals, e.b.Proposals(), "a dry run proposed")
	return r
}

// A dry run of each create, update and deploy answers what the write would
// (status, body) and changes nothing: no entry, no audit record, no value
// in the credential store. Sending the same write for real then answers
// the same.
func TestDryRunAnswersLikeTheWrite(t *testing.T) {
	e := newEnv(t)
	e.seed()
	auth := map[string]any{"method": "api_key", "credentialKind": "secret", "sourceRef": "secret://team/anthropic#key"}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		field, want        string // a field of the answer and its value
	}{
		{"namespace", "POST", "/v1/namespaces", map[string]any{"name": "lab"}, 201, "name", "lab"},
		{"quota", "PUT", "/v1/namespaces/team/quota", map[string]any{"agents": 3}, 200, "name", "team"},
		{"configuration", "POST", "/v1/namespaces/team/configurations",
			map[string]any{"name": "cfg2", "document": json.RawMessage(admission.ExampleEmbeddedOpenAI)}, 201, "name", "cfg2"},
		{"configuration update", "PUT", "/v1/namespaces/team/configurations/cfg",
			map[string]any{"document": json.RawMessage(admission.ExampleEmbeddedOpenAI)}, 200, "generation", "2"},
		{"agent", "POST", "/v1/namespaces/team/agents",
			map[string]any{"name": "bot2", "configuration": "cfg", "harnessAuth": auth}, 201, "name", "bot2"},
		{"agent update", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"plugins": []string{"p1"}}, 200,
			"plugins", "[p1]"},
		{"deploy", "POST", "/v1/namespaces/team/agents/bot/deploy", nil, 202, "number", "1"},
		{"credential", "POST", "/v1/namespaces/team/credentials",
			map[string]any{"name": "openai", "values": map[string]string{"key": "test-openai-value"}}, 201, "name", "openai"},
		{"credential rotation", "POST", "/v1/namespaces/team/credentials/anthropic/rotate",
			map[string]any{"values": map[string]string{"key": "test-anthropic-value-2"}}, 200, "version", "2"},
		{"role binding", "POST", "/v1/rolebindings",
			map[string]any{"role": "viewer", "namespace": "team", "subject": map[string]any{"kind": "user", "name": "alice"}},
			201, "role", "viewer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := len(e.b.M.Audit(0, 0))
			dry := e.dryRun(tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, dry.status, "%s", dry.body)
			require.Equal(t, api.DryRunServer, dry.header.Get(api.DryRunHeader))
			require.Equal(t, tc.want, field(t, dry.json(t), tc.field))
			require.Len(t, e.b.M.Audit(0, 0), audit, "a dry run is not audited")
			switch tc.name {
			case "credential":
				_, _, stored := e.b.Driver().(*memory.Driver).Credential(mustNS(t, e).ID, "openai")
				require.False(t, stored, "a dry run stores no value")
			case "credential rotation":
				_, version, _ := e.b.Driver().(*memory.Driver).Credential(mustNS(t, e).ID, "anthropic")
				require.EqualValues(t, 1, version, "a dry run rotates no value")
			}

			real := e.do(tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, real.status, "%s", real.body)
			require.Empty(t, real.header.Get(api.DryRunHeader))
			require.Equal(t, tc.want, field(t, real.json(t), tc.field), "the real write answers alike")
		})
	}
	_, _, ok := e.b.Driver().(*memory.Driver).Credential(mustNS(t, e).ID, "openai")
	require.True(t, ok, "the real create stored the value")
}

// field renders one top-level field of an answer for comparison.
func field(t *testing.T, m map[string]any, k string) string {
	t.Helper()
	v, ok := m[k]
	require.True(t, ok, "answer has no %q: %v", k, m)
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = p.(string)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	t.Fatalf("field %q is %T", k, v)
	return ""
}

// A dry run refuses what the write would refuse, with the same status and
// code — the handler's checks, admission, quota and Restrictions — and, unlike the write, records no refusal.
func TestDryRunRefusesLikeTheWrite(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot2", "configuration": "cfg",
		"harnessAuth": map[string]any{"method": "api_key", "credentialKind": "secret", "sourceRef": "secret://team/anthropic#key"}})
	e.expect(200, "PUT", "/v1/namespaces/team/quota", map[string]any{"agents": 1})
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	e.expect(201, "PUT", "/v1/restrictions/no-plugins", map[string]any{"policy": `forbid (principal, action == Action::"UpdateAgent", resource in Namespace::"team")
when { resource.executionMode == "dedicated" };`})
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
		audited            bool // the write records its refusal
	}{
		{"taken name", "POST", "/v1/namespaces", map[string]any{"name": "team"}, 409, "RESOURCE_CONFLICT", false},
		{"bad name", "POST", "/v1/namespaces", map[string]any{"name": "No Way"}, 400, "INVALID_REQUEST", false},
		{"bad document", "POST", "/v1/namespaces/team/configurations",
			map[string]any{"name": "bad", "document": json.RawMessage(`{"agents":{"defaults":{"model":7}}}`)}, 400, "INVALID_REQUEST", false},
		{"bad mode", "PATCH", "/v1/namespaces/team/agents/bot2", map[string]any{"executionMode": "sideways"}, 400, "INVALID_REQUEST", false},
		{"unknown field", "POST", "/v1/namespaces/team/agents", map[string]any{"name": "x", "configuration": "cfg", "colour": "red"},
			400, "INVALID_REQUEST", false},
		{"missing configuration", "POST", "/v1/namespaces/team/agents", map[string]any{"name": "x", "configuration": "nope"},
			404, "NOT_FOUND", false},
		{"quota", "POST", "/v1/namespaces/team/agents/bot2/deploy", nil, 409, "QUOTA_EXCEEDED", true},
		{"restriction", "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"executionMode": "dedicated"}, 403, "FORBIDDEN", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := len(e.b.M.Audit(0, 0))
			dry := e.dryRun(tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, dry.status, "%s", dry.body)
			require.Equal(t, tc.code, dry.errCode(t))
			require.Len(t, e.b.M.Audit(0, 0), audit, "a dry run records no refusal")

			real := e.do(tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, real.status, "%s", real.body)
			require.Equal(t, tc.code, real.errCode(t))
			if tc.audited {
				require.Len(t, e.b.M.Audit(0, 0), audit+1, "the write records its refusal")
			}
		})
	}
}

// dryRun=server is refused, changing nothing, on the writes that act
// outside the log, and any other value of the parameter is refused
// everywhere.
func TestDryRunRefusedWhereUnsupported(t *testing.T) {
	e := newEnv(t)
	e.seed()
	for _, tc := range []struct{ method, path string }{
		{"DELETE", "/v1/namespaces/team/agents/bot"},
		{"POST", "/v1/namespaces/team/agents/bot/stop"},
		{"DELETE", "/v1/namespaces/team/credentials/anthropic"},
		{"DELETE", "/v1/namespaces/team/configurations/cfg"},
		{"POST", "/v1/namespaces/team/agents/bot/deploy?dryRun=client"},
		{"POST", "/v1/namespaces/team/agents/bot/deploy?dryRun=server&dryRun=server"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.dryRun(tc.method, tc.path, nil)
			require.Equal(t, 400, r.status, "%s", r.body)
			require.Equal(t, "INVALID_REQUEST", r.errCode(t))
			require.Contains(t, string(r.body), "dryRun")
		})
	}
	ns := mustNS(t, e)
	_, _, ok := e.b.Driver().(*memory.Driver).Credential(ns.ID, "anthropic")
	require.True(t, ok, "the refused withdrawal left the value")
}

// Every route a dry run names is a registered write.
func TestDryRunRoutesAreWrites(t *testing.T) {
	routes := map[string]bool{}
	for _, r := range api.Routes() {
		routes[r.Pattern] = true
	}
	for _, p := range api.DryRunRoutes() {
		require.True(t, routes[p], "%s is not a route", p)
		require.False(t, strings.HasPrefix(p, "GET "), p)
	}
}
