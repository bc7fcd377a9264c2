package admission

import (
	"sort"
	"strconv"
	"strings"

	"oce.dev/oce/shared/modelref"
)

// Document is the strictly decoded subset of a native OpenClaw configuration
// that admission reads. Every other setting is carried through verbatim;
// the settings below must have the JSON types OpenClaw gives them.
type Document struct {
	Agents    Agents
	Providers map[string]Provider // models.providers, by provider id
	Plugins   map[string]Plugin   // plugins.entries, by plugin id
	EnvKeys   []string            // keys of env and env.vars, sorted
	AuthKeys  []string            // keys of the top-level auth section, sorted
	Secrets   map[string]string   // secrets.providers.<name>.source, when a string

	tree map[string]any
}

// Agents is the agents section.
type Agents struct {
	ListPresent   bool // agents.list is set, whatever its value
	ListEmpty     bool // agents.list is an empty array
	OwnershipSet  bool
	Ownership     string // agents.ownership when it is a string
	Defaults      AgentScope
	Entries       map[string]AgentEntry // agents.entries, by Agent id
	EntriesSorted []string              // Agent ids in sorted order
}

// AgentScope is what agents.defaults and each agents.entries.<id> share.
type AgentScope struct {
	Model         *Selection            // model: "provider/model" or {primary, fallbacks}
	ModelsPresent bool                  // models is set
	Models        map[string]ModelEntry // models: selectable catalog, by reference
	Runtime       *RuntimePolicy        // legacy whole-agent agentRuntime
}

// AgentEntry is one agents.entries.<id>.
type AgentEntry struct {
	AgentScope
	HasDefault bool // the entry carries a default key
}

// Selection is a primary model and its ordered fallbacks.
type Selection struct {
	Primary   modelref.Ref
	Fallbacks []modelref.Ref
}

// Refs returns the primary followed by the fallbacks, in order.
func (s Selection) Refs() []modelref.Ref {
	return append([]modelref.Ref{s.Primary}, s.Fallbacks...)
}

// ModelEntry is one selectable catalog entry (agents.*.models[ref]).
type ModelEntry struct {
	Runtime *RuntimePolicy
}

// RuntimePolicy is an agentRuntime object; ID is not yet checked against
// the supported set.
type RuntimePolicy struct {
	ID string
}

// Provider is one models.providers.<id>.
type Provider struct {
	BaseURL       *string
	API           *string
	HeaderNames   []string // keys of headers, sorted
	HasAPIKey     bool
	APIKey        any // the apiKey setting as written (a string or a SecretRef object)
	ModelsPresent bool
	Models        []ProviderModel
	Runtime       *RuntimePolicy
}

// CustomEndpoint reports whether the provider names its own endpoint (a
// non-blank baseUrl).
func (p Provider) CustomEndpoint() bool {
	return p.BaseURL != nil && strings.TrimSpace(*p.BaseURL) != ""
}

// ProviderModel is one models.providers.<id>.models[] entry.
type ProviderModel struct {
	ID          string
	BaseURL     *string
	API         *string
	HeaderNames []string
	Runtime     *RuntimePolicy
}

// Plugin is one plugins.entries.<id>.
type Plugin struct {
	Enabled            *bool
	AppServerTransport string // config.appServer.transport
}

// DecodeDocument strictly decodes a native configuration document: one
// duplicate-free JSON object within MaxDocumentBytes and MaxDocumentDepth
// whose admission-relevant settings have their native types. Model
// references must be provider/model and fallbacks must keep the primary's
// provider. Every error is a 400 *Error; it never panics.
func DecodeDocument(b []byte) (Document, error) {
	tree, err := parseTree(b)
	if err != nil {
		return Document{}, err
	}
	return decodeTree(tree)
}

func decodeTree(tree map[string]any) (Document, error) {
	d := Document{tree: tree, Providers: map[string]Provider{}, Plugins: map[string]Plugin{}, Secrets: map[string]string{}}
	if err := d.decodeAgents(); err != nil {
		return Document{}, err
	}
	if err := d.decodeProviders(); err != nil {
		return Document{}, err
	}
	if err := d.decodePlugins(); err != nil {
		return Document{}, err
	}
	if err := d.decodeEnvAuth(); err != nil {
		return Document{}, err
	}
	// Sections the logging stamp writes into must be objects.
	if _, _, err := object(tree, "logging", "logging"); err != nil {
		return Document{}, err
	}
	diagnostics, _, err := object(tree, "diagnostics", "diagnostics")
	if err != nil {
		return Document{}, err
	}
	if _, _, err := object(diagnostics, "otel", "diagnostics.otel"); err != nil {
		return Document{}, err
	}
	return d, nil
}

func (d *Document) decodeAgents() error {
	agents, _, err := object(d.tree, "agents", "agents")
	if err != nil {
		return err
	}
	d.Agents.Entries = map[string]AgentEntry{}
	if agents == nil {
		return nil
	}
	if list, ok := agents["list"]; ok {
		d.Agents.ListPresent = true
		arr, isArr := list.([]any)
		d.Agents.ListEmpty = isArr && len(arr) == 0
	}
	if own, ok := agents["ownership"]; ok {
		d.Agents.OwnershipSet = true
		d.Agents.Ownership, _ = own.(string)
	}
	defaults, _, err := object(agents, "defaults", "agents.defaults")
	if err != nil {
		return err
	}
	if d.Agents.Defaults, err = decodeScope(defaults, "agents.defaults"); err != nil {
		return err
	}
	entries, _, err := object(agents, "entries", "agents.entries")
	if err != nil {
		return err
	}
	for id, v := range entries {
		path := keyPath("agents.entries", id)
		e, ok := v.(map[string]any)
		if !ok {
			return errShape(path, "an object")
		}
		scope, err := decodeScope(e, path)
		if err != nil {
			return err
		}
		_, hasDefault := e["default"]
		d.Agents.Entries[id] = AgentEntry{AgentScope: scope, HasDefault: hasDefault}
		d.Agents.EntriesSorted = append(d.Agents.EntriesSorted, id)
	}
	sort.Strings(d.Agents.EntriesSorted)
	return nil
}

func decodeScope(m map[string]any, path string) (AgentScope, error) {
	var s AgentScope
	if m == nil {
		return s, nil
	}
	if v, ok := m["model"]; ok {
		sel, err := decodeSelection(v, path+".model")
		if err != nil {
			return s, err
		}
		s.Model = &sel
	}
	models, present, err := object(m, "models", path+".models")
	if err != nil {
		return s, err
	}
	s.ModelsPresent = present
	if present {
		s.Models = make(map[string]ModelEntry, len(models))
		for ref, v := range models {
			ep := keyPath(path+".models", ref)
			e, ok := v.(map[string]any)
			if !ok {
				return s, errShape(ep, "an object")
			}
			rp, err := decodeRuntime(e, ep)
			if err != nil {
				return s, err
			}
			s.Models[ref] = ModelEntry{Runtime: rp}
		}
	}
	if s.Runtime, err = decodeRuntime(m, path); err != nil {
		return s, err
	}
	return s, nil
}

func decodeSelection(v any, path string) (Selection, error) {
	var primary any
	var fallbacks []any
	switch t := v.(type) {
	case string:
		primary = t
	case map[string]any:
		primary = t["primary"]
		if fb, ok := t["fallbacks"]; ok {
			arr, isArr := fb.([]any)
			if !isArr {
				return Selection{}, errShape(path+".fallbacks", "an array of model references")
			}
			fallbacks = arr
		}
	default:
		return Selection{}, errShape(path, `"provider/model" or {primary, fallbacks}`)
	}
	parse := func(x any, p string) (modelref.Ref, error) {
		s, ok := x.(string)
		if !ok {
			return modelref.Ref{}, invalid(RuleModelRef, "the configured Agent model %s must identify its provider and model as provider/model", p).with("path", p)
		}
		r, err := modelref.Parse(s)
		if err != nil {
			return modelref.Ref{}, invalid(RuleModelRef, "the configured Agent model %s must identify its provider and model as provider/model", p).with("path", p)
		}
		return r, nil
	}
	primaryPath := path
	if _, isObj := v.(map[string]any); isObj {
		primaryPath = path + ".primary"
	}
	var sel Selection
	var err error
	if sel.Primary, err = parse(primary, primaryPath); err != nil {
		return Selection{}, err
	}
	for i, fb := range fallbacks {
		p := path + ".fallbacks[" + strconv.Itoa(i) + "]"
		r, err := parse(fb, p)
		if err != nil {
			return Selection{}, err
		}
		if r.Provider != sel.Primary.Provider {
			return Selection{}, invalid(RuleFallbackProvider, "configured model fallbacks must retain the primary provider: %s leaves provider %s", p, quote(sel.Primary.Provider)).with("path", p)
		}
		sel.Fallbacks = append(sel.Fallbacks, r)
	}
	return sel, nil
}

func decodeRuntime(m map[string]any, path string) (*RuntimePolicy, error) {
	v, ok := m["agentRuntime"]
	if !ok {
		return nil, nil
	}
	p := path + ".agentRuntime"
	o, isObj := v.(map[string]any)
	if !isObj {
		return nil, invalid(RuleRuntimeUnsupported, "the Harness runtime %s must be an object with a supported id (openclaw or codex)", p).with("path", p)
	}
	id, isStr := o["id"].(string)
	if !isStr {
		return nil, invalid(RuleRuntimeUnsupported, "the Harness runtime %s must be an object with a supported id (openclaw or codex)", p).with("path", p)
	}
	return &RuntimePolicy{ID: id}, nil
}

func (d *Document) decodeProviders() error {
	models, _, err := object(d.tree, "models", "models")
	if err != nil || models == nil {
		return err
	}
	providers, _, err := object(models, "providers", "models.providers")
	if err != nil {
		return err
	}
	for id, v := range providers {
		path := keyPath("models.providers", id)
		pm, ok := v.(map[string]any)
		if !ok {
			return errShape(path, "an object")
		}
		var p Provider
		if p.BaseURL, p.API, p.HeaderNames, err = decodeEndpoint(pm, path); err != nil {
			return err
		}
		if p.Runtime, err = decodeRuntime(pm, path); err != nil {
			return err
		}
		p.APIKey, p.HasAPIKey = pm["apiKey"]
		if mv, ok := pm["models"]; ok {
			p.ModelsPresent = true
			arr, isArr := mv.([]any)
			if !isArr {
				return errShape(path+".models", "a native model array")
			}
			for i, e := range arr {
				ep := path + ".models[" + strconv.Itoa(i) + "]"
				em, ok := e.(map[string]any)
				if !ok {
					return errShape(ep, "an object")
				}
				var m ProviderModel
				if m.ID, ok = em["id"].(string); !ok || m.ID == "" {
					return errShape(ep+".id", "a non-empty string")
				}
				if m.BaseURL, m.API, m.HeaderNames, err = decodeEndpoint(em, ep); err != nil {
					return err
				}
				if m.Runtime, err = decodeRuntime(em, ep); err != nil {
					return err
				}
				p.Models = append(p.Models, m)
			}
		}
		d.Providers[id] = p
	}
	return nil
}

func decodeEndpoint(m map[string]any, path string) (baseURL, api *string, headers []string, err error) {
	if v, ok := m["baseUrl"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return nil, nil, nil, invalid(RuleProviderSettings, "the model provider setting %s must be an http or https URL", path+".baseUrl").with("path", path+".baseUrl")
		}
		baseURL = &s
	}
	if v, ok := m["api"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return nil, nil, nil, invalid(RuleProviderSettings, "the model provider setting %s must name a model API the runtime supports", path+".api").with("path", path+".api")
		}
		api = &s
	}
	h, _, err := object(m, "headers", path+".headers")
	if err != nil {
		return nil, nil, nil, err
	}
	for k := range h {
		headers = append(headers, k)
	}
	sort.Strings(headers)
	return baseURL, api, headers, nil
}

func (d *Document) decodePlugins() error {
	plugins, _, err := object(d.tree, "plugins", "plugins")
	if err != nil || plugins == nil {
		return err
	}
	entries, _, err := object(plugins, "entries", "plugins.entries")
	if err != nil {
		return err
	}
	for id, v := range entries {
		path := keyPath("plugins.entries", id)
		pm, ok := v.(map[string]any)
		if !ok {
			return errShape(path, "an object")
		}
		var p Plugin
		if ev, ok := pm["enabled"]; ok {
			b, isBool := ev.(bool)
			if !isBool {
				return errShape(path+".enabled", "a boolean")
			}
			p.Enabled = &b
		}
		cfg, _, err := object(pm, "config", path+".config")
		if err != nil {
			return err
		}
		if cfg != nil {
			app, _, err := object(cfg, "appServer", path+".config.appServer")
			if err != nil {
				return err
			}
			if tv, ok := app["transport"]; ok {
				s, isStr := tv.(string)
				if !isStr {
					return errShape(path+".config.appServer.transport", "a string")
				}
				p.AppServerTransport = s
			}
		}
		d.Plugins[id] = p
	}
	return nil
}

func (d *Document) decodeEnvAuth() error {
	env, _, err := object(d.tree, "env", "env")
	if err != nil {
		return err
	}
	for k := range env {
		d.EnvKeys = append(d.EnvKeys, k)
	}
	vars, _, err := object(env, "vars", "env.vars")
	if err != nil {
		return err
	}
	for k := range vars {
		d.EnvKeys = append(d.EnvKeys, k)
	}
	sort.Strings(d.EnvKeys)
	auth, _, err := object(d.tree, "auth", "auth")
	if err != nil {
		return err
	}
	for k := range auth {
		d.AuthKeys = append(d.AuthKeys, k)
	}
	sort.Strings(d.AuthKeys)
	secrets, _, err := object(d.tree, "secrets", "secrets")
	if err != nil {
		return err
	}
	sp, _, err := object(secrets, "providers", "secrets.providers")
	if err != nil {
		return err
	}
	for name, v := range sp {
		if o, ok := v.(map[string]any); ok {
			if s, ok := o["source"].(string); ok {
				d.Secrets[name] = s
			}
		}
	}
	return nil
}

// keyPath renders base.key, or base["key"] when key is not a plain name.
func keyPath(base, key string) string {
	plain := key != ""
	for _, c := range key {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return base + "." + key
	}
	return base + "[" + quote(key) + "]"
}
