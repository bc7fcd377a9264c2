package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
)

// itemNames lists the names of a list answer's items.
func itemNames(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	for _, it := range m["items"].([]any) {
		item := it.(map[string]any)
		name, _ := item["name"].(string)
		if name == "" { // a role binding: its subject
			name = item["subject"].(map[string]any)["name"].(string)
		}
		out = append(out, name)
	}
	return out
}

func TestLabels(t *testing.T) {
	e := newEnv(t)
	doc := json.RawMessage(admission.ExampleEmbeddedAnthropic)
	a := map[string]string{"team": "a"}
	b := map[string]string{"team": "b"}
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "team", "labels": a})
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "other", "labels": b})
	e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "bare"})
	e.expect(201, "POST", "/v1/namespaces/team/configurations", map[string]any{"name": "cfg", "document": doc, "labels": a})
	e.expect(201, "POST", "/v1/namespaces/team/configurations", map[string]any{"name": "cfg2", "document": doc})
	e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot", "configuration": "cfg",
		"labels": map[string]string{"team": "a", "tier": "gold"}})
	e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot2", "configuration": "cfg", "labels": b})
	rb := e.expect(201, "POST", "/v1/rolebindings", map[string]any{"role": "viewer", "namespace": "team",
		"subject": map[string]any{"kind": "user", "name": "vera"}, "labels": a})
	e.expect(201, "POST", "/v1/rolebindings", map[string]any{"role": "viewer", "namespace": "team",
		"subject": map[string]any{"kind": "user", "name": "walt"}})

	// GET returns them.
	require.Equal(t, map[string]any{"team": "a"}, e.expect(200, "GET", "/v1/namespaces/team", nil)["labels"])
	require.Equal(t, map[string]any{"team": "a", "tier": "gold"}, e.expect(200, "GET", "/v1/namespaces/team/agents/bot", nil)["labels"])
	require.Nil(t, e.expect(200, "GET", "/v1/namespaces/bare", nil)["labels"])

	t.Run("selector", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			want []string
		}{
			{"/v1/namespaces?labelSelector=team%3Da", []string{"team"}},
			{"/v1/namespaces?labelSelector=team", []string{"other", "team"}},
			{"/v1/namespaces?labelSelector=team!%3Da", []string{"bare", "other"}},
			{"/v1/namespaces", []string{"bare", "other", "team"}},
			{"/v1/namespaces/team/configurations?labelSelector=team%3Da", []string{"cfg"}},
			{"/v1/namespaces/team/agents?labelSelector=team%3Da", []string{"bot"}},
			{"/v1/namespaces/team/agents?labelSelector=team%3Da,tier%3Dgold", []string{"bot"}},
			{"/v1/namespaces/team/agents?labelSelector=team%3Da,tier%3Dsilver", nil},
			{"/v1/namespaces/team/agents?labelSelector=team", []string{"bot", "bot2"}},
			{"/v1/rolebindings?labelSelector=team%3Da", []string{"vera"}},
		} {
			require.ElementsMatch(t, tc.want, itemNames(t, e.expect(200, "GET", tc.path, nil)), tc.path)
		}
		for _, path := range []string{"/v1/namespaces?labelSelector=team%3Da%20b", "/v1/namespaces/team/agents?labelSelector=%3Da",
			"/v1/namespaces/team/configurations?labelSelector=,", "/v1/rolebindings?labelSelector=-x",
			"/v1/namespaces?labelSelector=a&labelSelector=b"} {
			m := e.reject(400, "INVALID_REQUEST", "GET", path, nil)
			require.Equal(t, "INVALID_LABEL_SELECTOR", m["error"].(map[string]any)["details"].(map[string]any)["reason"], path)
		}
	})

	t.Run("bad labels store nothing", func(t *testing.T) {
		bad := map[string]string{"team": "a b"}
		long := map[string]string{}
		for i := range 33 {
			long["k"+strings.Repeat("x", i)] = "v"
		}
		for _, tc := range []struct {
			method, path string
			body         map[string]any
		}{
			{"POST", "/v1/namespaces", map[string]any{"name": "new", "labels": bad}},
			{"POST", "/v1/namespaces", map[string]any{"name": "new", "labels": long}},
			{"POST", "/v1/namespaces/team/configurations", map[string]any{"name": "new", "document": doc, "labels": bad}},
			{"POST", "/v1/namespaces/team/agents", map[string]any{"name": "new", "configuration": "cfg",
				"labels": map[string]string{strings.Repeat("k", 64): "v"}}},
			{"POST", "/v1/rolebindings", map[string]any{"role": "viewer", "namespace": "team",
				"subject": map[string]any{"kind": "user", "name": "xena"}, "labels": map[string]string{"/k": "v"}}},
			{"PUT", "/v1/namespaces/team/labels", map[string]any{"labels": bad}},
			{"PUT", "/v1/namespaces/team/configurations/cfg/labels", map[string]any{"labels": bad}},
			{"PUT", "/v1/namespaces/team/agents/bot/labels", map[string]any{"labels": bad}},
			{"PUT", "/v1/rolebindings/" + rb["id"].(string) + "/labels", map[string]any{"labels": bad}},
		} {
			auditBefore := len(e.b.M.Audit(0, 0))
			m := e.reject(400, "INVALID_REQUEST", tc.method, tc.path, tc.body)
			require.Equal(t, "INVALID_LABELS", m["error"].(map[string]any)["details"].(map[string]any)["reason"], tc.path)
			require.Len(t, e.b.M.Audit(0, 0), auditBefore, tc.path)
		}
	})

	t.Run("PUT labels replaces", func(t *testing.T) {
		cfg := e.expect(200, "GET", "/v1/namespaces/team/configurations/cfg", nil)
		got := e.expect(200, "PUT", "/v1/namespaces/team/configurations/cfg/labels", map[string]any{"labels": map[string]string{"x": "y"}})
		require.Equal(t, map[string]any{"x": "y"}, got["labels"])
		require.Equal(t, cfg["generation"], got["generation"], "a label is no input: the generation stays")
		// A PUT of the document keeps the labels.
		got = e.expect(200, "PUT", "/v1/namespaces/team/configurations/cfg", map[string]any{"document": doc})
		require.Equal(t, map[string]any{"x": "y"}, got["labels"])
		// A PATCH of the Agent keeps its labels; PUT …/labels with none clears them.
		got = e.expect(200, "PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"plugins": []string{}})
		require.Equal(t, map[string]any{"team": "a", "tier": "gold"}, got["labels"])
		got = e.expect(200, "PUT", "/v1/namespaces/team/agents/bot/labels", map[string]any{"labels": map[string]string{}})
		require.Nil(t, got["labels"])
		got = e.expect(200, "PUT", "/v1/rolebindings/"+rb["id"].(string)+"/labels", map[string]any{"labels": b})
		require.Equal(t, map[string]any{"team": "b"}, got["labels"])
		got = e.expect(200, "PUT", "/v1/namespaces/bare/labels", map[string]any{"labels": a})
		require.Equal(t, map[string]any{"team": "a"}, got["labels"])
		// A dry run changes nothing.
		before := e.b.M.Digest()
		r := e.dryRun("PUT", "/v1/namespaces/bare/labels", map[string]any{"labels": b})
		require.Equal(t, 200, r.status, "%s", r.body)
		require.Equal(t, before, e.b.M.Digest())
	})
}
