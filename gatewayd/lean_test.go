package gatewayd

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/contract"
)

// TestRenderLean: what no part of the configuration asks for is switched
// off; whatever the admitted document says about a component wins.
func TestRenderLean(t *testing.T) {
	catalog := map[string][]string{"openai": {"openai"}, "anthropic": {"anthropic"}, "ollama": {"ollama", "ollama-cloud"}}
	in := RenderInput{Topology: contract.Embedded, Port: 1, Bind: "loopback", ProviderPlugins: catalog}
	for _, tc := range []struct {
		name      string
		admitted  string
		plugins   []string // OCE_PLUGINS
		controlUI any      // gateway.controlUi as rendered
		enabled   map[string]any
	}{
		{"nothing asked", `{"agents":{"defaults":{"model":"openai/gpt-x"}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"openai": nil, "anthropic": false, "ollama": false}},
		{"control ui enabled by the user", `{"gateway":{"controlUi":{"enabled":true}}}`, nil,
			map[string]any{"enabled": true}, map[string]any{"openai": nil, "anthropic": nil, "ollama": nil}},
		{"control ui configured without enabled", `{"gateway":{"controlUi":{"basePath":"/ui"}}}`, nil,
			map[string]any{"basePath": "/ui"}, map[string]any{}},
		{"control ui disabled by the user", `{"gateway":{"controlUi":{"enabled":false,"basePath":"/ui"}}}`, nil,
			map[string]any{"enabled": false, "basePath": "/ui"}, map[string]any{}},
		{"control ui wrong type kept", `{"gateway":{"controlUi":3}}`, nil, float64(3), map[string]any{}},
		{"no model: no provider plugin touched", `{}`, nil,
			map[string]any{"enabled": false}, map[string]any{"openai": nil, "anthropic": nil, "ollama": nil}},
		{"fallback names anthropic", `{"agents":{"defaults":{"model":{"primary":"openai/x","fallbacks":["anthropic/claude"]}}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"openai": nil, "anthropic": nil, "ollama": false}},
		{"second provider id of a plugin", `{"agents":{"defaults":{"model":"ollama-cloud/llama"}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"openai": false, "anthropic": false, "ollama": nil}},
		{"models.providers key", `{"agents":{"defaults":{"model":"openai/x"}},"models":{"providers":{"anthropic":{"baseUrl":"u"}}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"anthropic": nil, "ollama": false}},
		{"auth profile", `{"agents":{"defaults":{"model":"openai/x"}},"auth":{"profiles":{"anthropic:work":{"mode":"api_key"}}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"anthropic": nil, "ollama": false}},
		{"user enables a plugin", `{"agents":{"defaults":{"model":"openai/x"}},"plugins":{"entries":{"anthropic":{"enabled":true}}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"anthropic": true, "ollama": false}},
		{"user configures a plugin", `{"agents":{"defaults":{"model":"openai/x"}},"plugins":{"entries":{"ollama":{"config":{}}}}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"anthropic": false, "ollama": nil}},
		{"plugin in the allow list", `{"agents":{"defaults":{"model":"openai/x"}},"plugins":{"allow":["ollama","openai"]}}`, nil,
			map[string]any{"enabled": false}, map[string]any{"anthropic": false, "ollama": nil}},
		{"selected plugin wins", `{"agents":{"defaults":{"model":"openai/x"}}}`, []string{"anthropic"},
			map[string]any{"enabled": false}, map[string]any{"anthropic": true, "ollama": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := in
			in.Plugins = tc.plugins
			r, err := Render([]byte(tc.admitted), in)
			require.NoError(t, err)
			var cfg map[string]any
			require.NoError(t, json.Unmarshal(r.JSON, &cfg))
			gw := cfg["gateway"].(map[string]any)
			require.Equal(t, tc.controlUI, gw["controlUi"])
			entries := map[string]any{}
			if p, ok := cfg["plugins"].(map[string]any); ok {
				entries, _ = p["entries"].(map[string]any)
			}
			for id, want := range tc.enabled {
				e, _ := entries[id].(map[string]any)
				require.Equal(t, want, e["enabled"], "plugins.entries.%s.enabled", id)
			}
		})
	}
}

// TestStartupProviderPlugins reads the pinned runtime's own manifests.
func TestStartupProviderPlugins(t *testing.T) {
	require.Nil(t, startupProviderPlugins(""))
	require.Nil(t, startupProviderPlugins("/nonexistent/openclaw.mjs"))
	cmd, err := resolveOpenClaw(func(string) string { return "" })
	require.NoError(t, err)
	got := startupProviderPlugins(openClawMJS(cmd))
	require.Equal(t, []string{"openai"}, got["openai"])
	require.Equal(t, []string{"anthropic"}, got["anthropic"])
	require.NotContains(t, got, "memory-core")
	require.NotContains(t, got, "file-transfer")
	require.NotContains(t, got, "device-pair")
}
