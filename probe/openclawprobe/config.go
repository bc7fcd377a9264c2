package openclawprobe

import (
	"encoding/json"
	"fmt"
	"strings"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/modelref"
)

// credentialEnv is the variable OpenClaw reads a built-in provider's key
// from (docs/design/seed-001.md: the selected provider's OPENAI_API_KEY or
// ANTHROPIC_API_KEY).
var credentialEnv = contract.ProviderKeyEnv

// openclawRuntime pins the OpenClaw harness for the probed model.
func openclawRuntime() map[string]any { return map[string]any{"id": "openclaw"} }

// probeConfig builds the probe's openclaw.json: the caller's provider entry
// (literal metadata, no apiKey), the primary model with no fallbacks, the
// OpenClaw runtime forced at provider, catalog-row and exact-model level,
// tools off, and every network-calling background feature off (update
// checks, mDNS, hosted model catalog refresh). logDir keeps OpenClaw's file
// log under the probe's temp dir instead of the fixed /tmp/openclaw.
func probeConfig(model string, settings map[string]any, logFile string) ([]byte, error) {
	ref, err := modelref.Parse(model)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	models := map[string]any{"catalogRefresh": map[string]any{"enabled": false}}
	if settings != nil {
		entry, err := literalCopy(settings)
		if err != nil {
			return nil, err
		}
		delete(entry, "apiKey")
		entry["agentRuntime"] = openclawRuntime()
		if rows, ok := entry["models"].([]any); ok {
			for _, r := range rows {
				if row, ok := r.(map[string]any); ok {
					row["agentRuntime"] = openclawRuntime()
				}
			}
		}
		models["providers"] = map[string]any{ref.Provider: entry}
	}
	cfg := map[string]any{
		"agents": map[string]any{"defaults": map[string]any{
			"model":  map[string]any{"primary": model, "fallbacks": []any{}},
			"models": map[string]any{model: map[string]any{"agentRuntime": openclawRuntime()}},
		}},
		"models":    models,
		"tools":     map[string]any{"profile": "minimal", "deny": []any{"*"}},
		"update":    map[string]any{"checkOnStart": false},
		"discovery": map[string]any{"mdns": map[string]any{"mode": "off"}},
		"logging":   map[string]any{"file": logFile},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// literalCopy deep-copies a provider entry and refuses anything that would
// make OpenClaw read more of the environment or a secret store than the one
// credential variable: ${VAR} substitutions and SecretRef objects.
func literalCopy(settings map[string]any) (map[string]any, error) {
	b, err := json.Marshal(settings)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProviderSettings, err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProviderSettings, err)
	}
	if path, bad := findReference(out, ""); bad {
		return nil, fmt.Errorf("%w: reference at %s", ErrProviderSettings, path)
	}
	return out, nil
}

func findReference(v any, path string) (string, bool) {
	switch t := v.(type) {
	case string:
		return path, strings.Contains(t, "${")
	case map[string]any:
		if _, hasSource := t["source"]; hasSource {
			if _, hasID := t["id"]; hasID {
				return path, true
			}
		}
		for k, c := range t {
			if k == "apiKey" && path == "" {
				continue // dropped anyway
			}
			if p, bad := findReference(c, path+"."+k); bad {
				return p, true
			}
		}
	case []any:
		for i, c := range t {
			if p, bad := findReference(c, fmt.Sprintf("%s[%d]", path, i)); bad {
				return p, true
			}
		}
	}
	return "", false
}
