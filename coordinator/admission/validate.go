package admission

import (
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strings"

	"oce.dev/oce/coordinator/admission/openclawschema"
)

// ValidateConfiguration checks what Configuration save checks: a strictly
// decodable document (DecodeDocument), an agents roster every deployment
// would accept (no non-empty agents.list, the OpenClaw gateway's roster
// rules) and model provider endpoints the runtime can use. Rules that depend
// on the topology stay at deployment (Admit). Every error is a 400 *Error.
//
// It also refuses literal credentials anywhere in the document (secrets
// enter only as references) and validates the document against the pinned
// OpenClaw's own JSON schema, the check the gateway applies at start: an
// unknown key is refused naming its path.
func ValidateConfiguration(doc []byte) error {
	d, err := DecodeDocument(doc)
	if err != nil {
		return err
	}
	if err := validateDocument(d); err != nil {
		return err
	}
	if p, why := literalCredential(d.tree); p != "" {
		return invalid(RuleLiteralCredential, "%s holds a literal credential (%s): secrets enter oce only as references (the Agent's harnessAuth binding, or ${ENV} / a secret reference the runtime resolves); the value was not stored", p, why).
			with("path", p).with("reason", why)
	}
	if err := openclawschema.Validate(schemaView(doc)); err != nil {
		var v *openclawschema.Violation
		if !errors.As(err, &v) {
			return err
		}
		e := invalid(RuleSchema, "%s: %s (the pinned OpenClaw's configuration schema)", v.Path, v.Message).with("path", v.Path)
		if v.Unknown {
			e = e.with("unknownKey", true)
		}
		return e
	}
	return nil
}

// WarmSchema compiles the pinned OpenClaw schema Configuration save
// validates against, ahead of the first save (openclawschema.Warm).
func WarmSchema() error { return openclawschema.Warm() }

func validateDocument(d Document) error {
	if err := validateRoster(d.Agents); err != nil {
		return err
	}
	return validateProviderSettings(d)
}

var agentIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_-]{0,63}$`)

// validateRoster refuses the agents rosters the pinned OpenClaw gateway
// rejects at startup (it would exit instead of serving).
func validateRoster(a Agents) error {
	explicit := a.OwnershipSet && a.Ownership == "explicit"
	if a.ListPresent && !(a.ListEmpty && len(a.Entries) == 0 && !explicit) {
		return invalid(RuleAgentsList, "the OpenClaw gateway rejects agents.list: remove it and configure each Agent under agents.entries, keyed by its Agent ID").with("path", "agents.list")
	}
	normalized := map[string]string{}
	for _, id := range a.EntriesSorted {
		path := keyPath("agents.entries", id)
		if !agentIDPattern.MatchString(id) {
			return invalid(RuleRoster, "the OpenClaw gateway rejects the Agent ID in %s: use up to 64 letters, digits, _ or -, not starting with -", path).with("path", path)
		}
		key := strings.ToLower(id)
		if strings.HasPrefix(id, "_") {
			key = strings.TrimRight(key, "-")
		}
		if first, dup := normalized[key]; dup {
			return invalid(RuleRoster, "the OpenClaw gateway normalizes agents.entries.%s and agents.entries.%s to the same Agent ID: rename one", first, id)
		}
		normalized[key] = id
		if a.Entries[id].HasDefault {
			return invalid(RuleRoster, "the OpenClaw gateway rejects %s.default: remove it", path).with("path", path+".default")
		}
	}
	if a.OwnershipSet && !explicit {
		return invalid(RuleRoster, `the OpenClaw gateway accepts only "explicit" for agents.ownership`).with("path", "agents.ownership")
	}
	if len(a.Entries) > 1 && !explicit {
		return invalid(RuleRoster, `the OpenClaw gateway needs agents.ownership "explicit" for more than one agents.entries entry`).with("path", "agents.ownership")
	}
	if explicit && len(a.Entries) == 0 {
		return invalid(RuleRoster, `the OpenClaw gateway needs at least one agents.entries entry when agents.ownership is "explicit"`).with("path", "agents.entries")
	}
	return nil
}

// runtimeModelAPIs are the model API adapter ids the pinned OpenClaw accepts.
var runtimeModelAPIs = map[string]bool{
	"openai-completions": true, "openai-responses": true, "openai-chatgpt-responses": true,
	"anthropic-messages": true, "google-generative-ai": true, "google-interactions": true,
	"google-vertex": true, "github-copilot": true, "bedrock-converse-stream": true,
	"ollama": true, "pi-messages": true, "azure-openai-responses": true,
}

// envReference matches ${VAR} and ${VAR:-fallback}, which the runtime
// resolves before validating; such values are left to it.
var envReference = regexp.MustCompile(`\$\{[A-Z_][A-Z0-9_]*(?::-[^${}]*)?\}`)

func validateProviderSettings(d Document) error {
	for _, id := range sortedKeys(d.Providers) {
		p := d.Providers[id]
		path := keyPath("models.providers", id)
		if err := validateEndpoint(p.BaseURL, p.API, path, true); err != nil {
			return err
		}
		for i, m := range p.Models {
			if err := validateEndpoint(m.BaseURL, m.API, path+".models["+itoaStd(i)+"]", false); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateEndpoint(baseURL, api *string, path string, provider bool) error {
	if baseURL != nil {
		b := *baseURL
		unset := provider && strings.TrimSpace(b) == ""
		if !unset && !envReference.MatchString(b) {
			u, err := url.Parse(b)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return invalid(RuleProviderSettings, "the model provider setting %s must be an http or https URL", path+".baseUrl").with("path", path+".baseUrl")
			}
		}
	}
	if api != nil && !envReference.MatchString(*api) && !runtimeModelAPIs[*api] {
		return invalid(RuleProviderSettings, "the model provider setting %s must name a model API the runtime supports", path+".api").with("path", path+".api")
	}
	return nil
}

// schemaView is the document the schema sees: without the retired
// logging.redactSensitive key, which the platform logging stamp removes
// from every admitted revision (docs/design/seed-001.md) before the runtime reads it, and
// without the legacy keys the runtime migrates before its own check.
func schemaView(doc []byte) []byte {
	var tree map[string]any
	if json.Unmarshal(doc, &tree) != nil {
		return doc
	}
	changed := false
	if lg, ok := tree["logging"].(map[string]any); ok {
		if _, ok := lg["redactSensitive"]; ok {
			delete(lg, "redactSensitive")
			changed = true
		}
	}
	// The runtime migrates a legacy agents.list into agents.entries before
	// its schema check; the roster rules above allow only an empty one.
	if ag, ok := tree["agents"].(map[string]any); ok {
		if l, ok := ag["list"].([]any); ok && len(l) == 0 {
			delete(ag, "list")
			changed = true
		}
	}
	if !changed {
		return doc
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return doc
	}
	return b
}
