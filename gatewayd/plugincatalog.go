package gatewayd

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// startupProviderPlugins reads the pinned runtime's bundled plugin
// manifests (dist/extensions/*/openclaw.plugin.json beside openclaw.mjs)
// and returns the model-provider plugins it enables and loads at every
// gateway start: plugin id → the provider ids it serves. Reading the
// runtime's own manifests keeps the list right across runtime bumps; an
// unreadable catalog yields nil (nothing is switched off).
func startupProviderPlugins(openclawMJS string) map[string][]string {
	if openclawMJS == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(filepath.Dir(openclawMJS), "dist", "extensions", "*", "openclaw.plugin.json"))
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var m struct {
			ID               string                   `json:"id"`
			EnabledByDefault bool                     `json:"enabledByDefault"`
			Activation       struct{ OnStartup bool } `json:"activation"`
			Providers        []string                 `json:"providers"`
			Channels         []string                 `json:"channels"`
			Kind             any                      `json:"kind"`
		}
		if json.Unmarshal(b, &m) != nil || m.ID == "" {
			continue
		}
		// a plain provider plugin: no channel, no slot kind (memory …)
		if m.EnabledByDefault && m.Activation.OnStartup && len(m.Providers) > 0 && len(m.Channels) == 0 && m.Kind == nil {
			out[m.ID] = m.Providers
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
