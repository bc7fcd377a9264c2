package admission

import (
	"encoding/json"
	"strings"
)

// CompatibleProvider is the provider segment the private gateway
// configuration inserts for a custom Codex endpoint.
const CompatibleProvider = "openai-compatible"

// customEndpoint reports whether the custom-endpoint compile applies: the
// resolved Harness is Codex, the primary provider is codex, and
// models.providers.codex names its own endpoint (a non-blank baseUrl).
func customEndpoint(d Document, res resolution) bool {
	if res.Harness != "codex" || !res.HasModel || res.Primary.Provider != "codex" {
		return false
	}
	p, ok := d.Providers["codex"]
	return ok && p.CustomEndpoint()
}

// compileCustomEndpoint rewrites, in the private rendered tree, every codex
// model reference codex/<id> to codex/openai-compatible/<id> so OpenClaw
// selects the openai-compatible provider with model ID <id>: the primary,
// the fallbacks (order kept), the selectable catalog keys under
// agents.defaults and agents.entries (values, metadata and policies kept),
// and models.providers.codex.models[].id (a full reference gains the
// segment after codex/, a bare ID gains the openai-compatible/ prefix).
// A stored reference already inside codex/openai-compatible/ is refused:
// that namespace is the compile's output.
func compileCustomEndpoint(tree map[string]any) error {
	rewrite := func(ref, path string) (string, error) {
		model, ok := strings.CutPrefix(ref, "codex/")
		if !ok {
			return ref, nil
		}
		if strings.HasPrefix(model, CompatibleProvider+"/") {
			return "", invalid(RuleCompileReserved, "%s uses the reserved codex/%s/ prefix, which the custom-endpoint compile produces", path, CompatibleProvider).with("path", path)
		}
		return "codex/" + CompatibleProvider + "/" + model, nil
	}
	scope := func(m map[string]any, path string) error {
		switch sel := m["model"].(type) {
		case string:
			r, err := rewrite(sel, path+".model")
			if err != nil {
				return err
			}
			m["model"] = r
		case map[string]any:
			if p, ok := sel["primary"].(string); ok {
				r, err := rewrite(p, path+".model.primary")
				if err != nil {
					return err
				}
				sel["primary"] = r
			}
			if fbs, ok := sel["fallbacks"].([]any); ok {
				for i, fb := range fbs {
					if s, ok := fb.(string); ok {
						r, err := rewrite(s, path+".model.fallbacks")
						if err != nil {
							return err
						}
						fbs[i] = r
					}
				}
			}
		}
		if models, ok := m["models"].(map[string]any); ok {
			renamed := make(map[string]any, len(models))
			for k, v := range models {
				r, err := rewrite(k, keyPath(path+".models", k))
				if err != nil {
					return err
				}
				if _, dup := renamed[r]; dup {
					return invalid(RuleCompileReserved, "%s collides with another catalog entry after the custom-endpoint compile", keyPath(path+".models", k))
				}
				renamed[r] = v
			}
			for k := range models {
				delete(models, k)
			}
			for k, v := range renamed {
				models[k] = v
			}
		}
		return nil
	}
	agents, _ := tree["agents"].(map[string]any)
	if defaults, ok := agents["defaults"].(map[string]any); ok {
		if err := scope(defaults, "agents.defaults"); err != nil {
			return err
		}
	}
	if entries, ok := agents["entries"].(map[string]any); ok {
		for _, id := range sortedKeys(entries) {
			if e, ok := entries[id].(map[string]any); ok {
				if err := scope(e, keyPath("agents.entries", id)); err != nil {
					return err
				}
			}
		}
	}
	models, _ := tree["models"].(map[string]any)
	providers, _ := models["providers"].(map[string]any)
	codex, _ := providers["codex"].(map[string]any)
	list, _ := codex["models"].([]any)
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		id, _ := m["id"].(string)
		if strings.HasPrefix(id, "codex/") {
			r, err := rewrite(id, "models.providers.codex.models[].id")
			if err != nil {
				return err
			}
			m["id"] = r
			continue
		}
		if strings.HasPrefix(id, CompatibleProvider+"/") {
			return invalid(RuleCompileReserved, "models.providers.codex.models[].id uses the reserved %s/ prefix, which the custom-endpoint compile produces", CompatibleProvider)
		}
		m["id"] = CompatibleProvider + "/" + id
	}
	return nil
}

// GatewayDocument returns the private gateway configuration of an admitted
// document (a Revision's frozen Document): the document with the
// custom-endpoint compile applied when it applies, else the document
// itself. It is Admit's Output.Rendered recomputed from what the revision
// stores — pure and deterministic — so a Compute driver renders the
// Gateway's configuration from it, never from the uncompiled document. It
// fails only on a document that is not a JSON object or a reference the
// compile reserves.
func GatewayDocument(admitted []byte) (json.RawMessage, error) {
	tree, err := parseTree(admitted)
	if err != nil {
		return nil, err
	}
	d, err := decodeTree(tree)
	if err != nil {
		return nil, err
	}
	// A document whose Harness does not resolve was never admitted with the
	// compile (nor at all): it is rendered as it is.
	if res, err := resolveHarness(d); err != nil || !customEndpoint(d, res) {
		return canonical(tree)
	}
	if err := compileCustomEndpoint(tree); err != nil {
		return nil, err
	}
	return canonical(tree)
}
