package admission

import (
	"strings"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/modelref"
)

// resolution is the Harness the native model policy selects.
type resolution struct {
	Harness   string // state.HarnessOpenClaw | state.HarnessCodex
	Primary   modelref.Ref
	Fallbacks []modelref.Ref
	HasModel  bool // false when no model candidate exists
}

type candidate struct {
	ref     modelref.Ref
	entry   *AgentEntry // nil for agents.defaults
	entryID string
}

func supportedRuntime(id string) bool {
	return id == state.HarnessOpenClaw || id == state.HarnessCodex
}

func providerOf(ref string) string {
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		return ref[:i]
	}
	return ref
}

func runtimeOf(p *RuntimePolicy, path string) (string, error) {
	if p == nil {
		return "", nil
	}
	if !supportedRuntime(p.ID) {
		return "", invalid(RuleRuntimeUnsupported, "the Harness runtime %s.agentRuntime.id %s is unsupported: use openclaw or codex", path, quote(p.ID)).with("path", path+".agentRuntime.id")
	}
	return p.ID, nil
}

// matchingSelectable reports whether every selectable catalog entry other
// than the selected model keeps its provider and carries an explicit runtime
// equal to the selected model's own entry's runtime.
func matchingSelectable(models map[string]ModelEntry, selected *modelref.Ref, path string) (bool, error) {
	if selected == nil {
		return false, nil
	}
	sel := selected.String()
	selRuntime := ""
	if e, ok := models[sel]; ok {
		var err error
		if selRuntime, err = runtimeOf(e.Runtime, keyPath(path, sel)); err != nil {
			return false, err
		}
	}
	for _, ref := range sortedKeys(models) {
		if ref == sel {
			continue
		}
		rt, err := runtimeOf(models[ref].Runtime, keyPath(path, ref))
		if err != nil {
			return false, err
		}
		if selRuntime == "" || providerOf(ref) != selected.Provider || rt != selRuntime {
			return false, nil
		}
	}
	return true, nil
}

// resolveHarness applies docs/design/seed-001.md's runtime policy resolution
// (docs/design/reference.md#s7-1, #s7-2) to a decoded document.
func resolveHarness(d Document) (resolution, error) {
	var candidates []candidate
	var defaultSel []modelref.Ref
	var fallbacks []modelref.Ref
	if d.Agents.Defaults.Model != nil {
		defaultSel = d.Agents.Defaults.Model.Refs()
		fallbacks = d.Agents.Defaults.Model.Fallbacks
		for _, r := range defaultSel {
			candidates = append(candidates, candidate{ref: r})
		}
	}
	for _, id := range d.Agents.EntriesSorted {
		entry := d.Agents.Entries[id]
		path := keyPath("agents.entries", id)
		sel := defaultSel
		if entry.Model != nil {
			sel = entry.Model.Refs()
		}
		if len(sel) == 0 {
			return resolution{}, invalid(RuleEntryModel, "the configured Agent runtime model of %s cannot be resolved: set agents.defaults.model or %s.model", path, path).with("path", path+".model")
		}
		if len(candidates) > 0 && sel[0] != candidates[0].ref {
			return resolution{}, invalid(RuleEntryPrimary, "configured Agent entries must match the primary model: %s.model differs", path).with("path", path+".model")
		}
		if entry.ModelsPresent {
			ok, err := matchingSelectable(entry.Models, &sel[0], path+".models")
			if err != nil {
				return resolution{}, err
			}
			if !ok {
				return resolution{}, invalid(RuleSelectableModels, "configured selectable models in %s.models must keep the primary provider and carry its explicit Harness runtime", path).with("path", path+".models")
			}
		}
		if len(candidates) == 0 && entry.Model != nil {
			fallbacks = entry.Model.Fallbacks
		}
		e := entry
		for _, r := range sel {
			candidates = append(candidates, candidate{ref: r, entry: &e, entryID: id})
		}
	}
	if d.Agents.Defaults.ModelsPresent {
		var first *modelref.Ref
		if len(candidates) > 0 {
			first = &candidates[0].ref
		}
		ok, err := matchingSelectable(d.Agents.Defaults.Models, first, "agents.defaults.models")
		if err != nil {
			return resolution{}, err
		}
		if !ok {
			return resolution{}, invalid(RuleSelectableModels, "configured selectable models in agents.defaults.models must keep the primary provider and carry its explicit Harness runtime").with("path", "agents.defaults.models")
		}
	}
	for _, pid := range sortedKeys(d.Providers) {
		p := d.Providers[pid]
		for i, m := range p.Models {
			if !matchesCandidate(pid, m.ID, candidates) {
				path := keyPath("models.providers", pid) + ".models[" + itoaStd(i) + "]"
				return resolution{}, invalid(RuleProviderModels, "a provider's models are limited to the primary and fallback models: %s.id is neither", path).with("path", path+".id")
			}
		}
	}

	res := resolution{Harness: state.HarnessOpenClaw}
	if len(candidates) > 0 {
		resolved := ""
		for _, c := range candidates {
			h, err := resolveCandidate(d, c)
			if err != nil {
				return resolution{}, err
			}
			if resolved != "" && h != resolved {
				return resolution{}, invalid(RuleHarnessesDiffer, "the configured Agent models select conflicting Harness runtimes (%s and %s): fallbacks and entries must resolve to the primary's Harness", resolved, h)
			}
			resolved = h
		}
		res = resolution{Harness: resolved, Primary: candidates[0].ref, Fallbacks: fallbacks, HasModel: true}
	}
	// Whole-agent runtime keys are legacy and ignored by OpenClaw's runtime
	// selection, so they never select a Harness; one that names a different
	// Harness than the model policy is an explicit conflict.
	pins := []struct {
		p    *RuntimePolicy
		path string
	}{{d.Agents.Defaults.Runtime, "agents.defaults"}}
	for _, id := range d.Agents.EntriesSorted {
		pins = append(pins, struct {
			p    *RuntimePolicy
			path string
		}{d.Agents.Entries[id].Runtime, keyPath("agents.entries", id)})
	}
	for _, pin := range pins {
		rt, err := runtimeOf(pin.p, pin.path)
		if err != nil {
			return resolution{}, err
		}
		if rt != "" && rt != res.Harness {
			return resolution{}, invalid(RuleWholeAgentPin, "the whole-agent runtime %s.agentRuntime names %s but the model policy selects %s: runtime policy belongs on providers or models", pin.path, rt, res.Harness).with("path", pin.path+".agentRuntime")
		}
	}
	return res, nil
}

func matchesCandidate(providerID, id string, candidates []candidate) bool {
	for _, c := range candidates {
		if c.ref.Provider == providerID && c.ref.MatchesCatalogID(id) {
			return true
		}
	}
	return false
}

// resolveCandidate resolves one model through the entry, default, provider
// model and provider policies.
func resolveCandidate(d Document, c candidate) (string, error) {
	ref := c.ref.String()
	provider, configured := d.Providers[c.ref.Provider]
	ppath := keyPath("models.providers", c.ref.Provider)
	type policy struct {
		p    *RuntimePolicy
		path string
	}
	var policies []policy
	if c.entry != nil {
		if e, ok := c.entry.Models[ref]; ok {
			policies = append(policies, policy{e.Runtime, keyPath(keyPath("agents.entries", c.entryID)+".models", ref)})
		}
	}
	if e, ok := d.Agents.Defaults.Models[ref]; ok {
		policies = append(policies, policy{e.Runtime, keyPath("agents.defaults.models", ref)})
	}
	if configured {
		var match *ProviderModel
		for i := range provider.Models {
			if c.ref.MatchesCatalogID(provider.Models[i].ID) {
				if match != nil {
					return "", invalid(RuleRuntimeConflict, "the provider model Harness policy of %s is ambiguous: %s lists it twice", quote(ref), ppath+".models")
				}
				match = &provider.Models[i]
			}
		}
		if match != nil {
			policies = append(policies, policy{match.Runtime, ppath + ".models[id=" + quote(match.ID) + "]"})
		}
		policies = append(policies, policy{provider.Runtime, ppath})
	}
	selected := ""
	for _, p := range policies {
		rt, err := runtimeOf(p.p, p.path)
		if err != nil {
			return "", err
		}
		if rt == "" {
			continue
		}
		if selected != "" && rt != selected {
			return "", invalid(RuleRuntimeConflict, "the model %s has conflicting Harness runtime policies (%s and %s)", quote(ref), selected, rt)
		}
		selected = rt
	}
	_, pluginRouted := d.Plugins[c.ref.Provider]
	if selected == "" {
		switch {
		case c.ref.Provider == "openai", c.ref.Provider == "codex":
			return "", invalid(RuleRuntimeRequired, "the model %s requires an explicit supported Harness runtime (agentRuntime.id openclaw or codex): provider %s is ambiguous", quote(ref), quote(c.ref.Provider))
		case configured:
			return "", invalid(RuleRuntimeRequired, "the model %s requires an explicit supported Harness runtime (agentRuntime.id openclaw or codex): provider %s is configured in models.providers", quote(ref), quote(c.ref.Provider))
		case pluginRouted:
			return "", invalid(RuleRuntimeRequired, "the model %s requires an explicit supported Harness runtime (agentRuntime.id openclaw or codex): provider %s is routed by a plugin", quote(ref), quote(c.ref.Provider))
		}
		return state.HarnessOpenClaw, nil
	}
	if selected == state.HarnessCodex && c.ref.Provider != "codex" {
		plugin, ok := d.Plugins["codex"]
		enabled := ok && plugin.Enabled != nil && *plugin.Enabled
		if c.ref.Provider != "openai" || !enabled || plugin.AppServerTransport != "websocket" {
			return "", invalid(RuleCodexProvider, "the Codex Harness requires the native codex model provider, or openai with plugins.entries.codex enabled and appServer.transport websocket: %s does not qualify", quote(ref))
		}
	}
	return selected, nil
}
