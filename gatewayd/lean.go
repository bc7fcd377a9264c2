package gatewayd

import (
	"sort"
	"strings"
)

// Start only what an oce Agent needs (issue 23): components the gateway
// starts by default that no part of the Agent's configuration asks for are
// switched off in the rendered configuration. A component the admitted
// document mentions at all is left exactly as configured — a user's
// explicit setting always wins. docs/runtime-gatewayd.md ("Start only what
// the Agent needs") lists every switch and why.

// renderLean applies the switches.
func renderLean(cfg object, in RenderInput) {
	leanControlUI(cfg)
	leanProviderPlugins(cfg, in)
}

// leanControlUI turns off the gateway's own Control UI: oce's users reach
// an Agent through the coordinator (occ, the console), never through the
// gateway's browser UI, and the gateway otherwise prepares its UI assets
// right after it is ready (measured: seconds of CPU beside the first turn).
func leanControlUI(cfg object) {
	gw := cfg.obj("gateway")
	if _, asked := gw["controlUi"]; asked {
		return
	}
	gw["controlUi"] = map[string]any{"enabled": false}
}

// leanProviderPlugins disables the model-provider plugins the runtime loads
// at every start (in.ProviderPlugins: plugin id → its provider ids) whose
// providers the configuration never names. Only a configuration that names
// its primary model is trimmed; a provider counts as named when any key or
// string of the document is the provider id or starts with "<id>/" or
// "<id>:" (model refs, auth profiles, models.providers keys), and a plugin
// the plugins section mentions (entries, allow, deny, slots) is never
// touched.
func leanProviderPlugins(cfg object, in RenderInput) {
	if len(in.ProviderPlugins) == 0 || primaryModel(cfg) == "" {
		return
	}
	named := map[string]bool{}
	collectNames(map[string]any(cfg), named)
	plugins, _ := cfg["plugins"].(map[string]any)
	mentioned := map[string]bool{}
	collectNames(plugins, mentioned)
	ids := make([]string, 0, len(in.ProviderPlugins))
	for id := range in.ProviderPlugins {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if mentioned[id] || anyNamed(in.ProviderPlugins[id], named) {
			continue
		}
		cfg.obj("plugins", "entries", id)["enabled"] = false
	}
}

// collectNames adds every key and string of v, and each one's part before
// the first "/" or ":", to names.
func collectNames(v any, names map[string]bool) {
	add := func(s string) {
		names[s] = true
		if i := strings.IndexAny(s, "/:"); i > 0 {
			names[s[:i]] = true
		}
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			add(k)
			collectNames(e, names)
		}
	case []any:
		for _, e := range t {
			collectNames(e, names)
		}
	case string:
		add(t)
	}
}

func anyNamed(providers []string, named map[string]bool) bool {
	for _, p := range providers {
		if named[p] {
			return true
		}
	}
	return false
}
