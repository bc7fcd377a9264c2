package admission

import (
	"encoding/json"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/modelref"
)

// DefaultHarnessVersions are the pinned runtime versions approved when
// Input.HarnessVersions is nil.
func DefaultHarnessVersions() map[string]string {
	return map[string]string{state.HarnessOpenClaw: "2026.9.6", state.HarnessCodex: "0.169.0"}
}

// Input is everything one deployment admission reads. Admit never mutates it.
type Input struct {
	Agent         state.Agent
	Configuration state.Configuration
	Installation  state.Installation
	// Auth lists the harnessAuth methods the selected Compute driver supports
	// per topology. nil means KubernetesAuthSupport(); a non-nil empty map
	// supports nothing.
	Auth AuthSupport
	// HarnessVersions maps a Harness id to its approved version. nil means
	// DefaultHarnessVersions(); a Harness missing from a non-nil map is not
	// approved (409).
	HarnessVersions map[string]string
	// LogLevel is the platform log level stamped into the document; "" means
	// DefaultLogLevel.
	LogLevel string
}

// Output is an admitted deployment: what the AgentRevision freezes.
type Output struct {
	Harness state.HarnessIdentity
	Mode    string
	// Document is the admitted native document: the stored configuration with
	// the platform logging stamp, as deterministic JSON (sorted keys).
	Document json.RawMessage
	// Rendered is the private gateway configuration: Document with the
	// custom-endpoint compile applied (identical to Document when it does
	// not apply). Never stored as the Configuration.
	Rendered  json.RawMessage
	Primary   modelref.Ref
	Fallbacks []modelref.Ref
}

// Admit resolves the Harness from the Configuration's native model policy,
// checks the Agent's execution mode and harnessAuth binding against the
// Installation and Compute driver, and returns the document to freeze. A
// refusal is a *Error (INVALID_REQUEST 400, NOT_FOUND 404 or
// RESOURCE_CONFLICT 409) and nothing else. Admit is pure: no I/O, no clock,
// and its Input is left unchanged.
func Admit(in Input) (Output, error) {
	if in.Agent.ConfigurationID != in.Configuration.ID || in.Configuration.ID == "" {
		return Output{}, notFound(RuleScope, "the Agent's Configuration was not found")
	}
	if in.Configuration.NamespaceID != in.Agent.NamespaceID {
		return Output{}, notFound(RuleScope, "the Agent's Configuration was not found in the Agent's Namespace")
	}
	level := in.LogLevel
	if level == "" {
		level = DefaultLogLevel
	}
	if !logLevels[level] {
		return Output{}, invalid(RuleLogLevel, "the platform log level %s is unsupported", quote(level))
	}
	tree, err := parseTree(in.Configuration.Document)
	if err != nil {
		return Output{}, err
	}
	d, err := decodeTree(tree)
	if err != nil {
		return Output{}, err
	}
	// Platform logging is stamped before validation (docs/design/seed-001.md). It touches
	// only logging and diagnostics, which d does not read.
	stampLogging(tree, level)
	if err := validateDocument(d); err != nil {
		return Output{}, err
	}
	res, err := resolveHarness(d)
	if err != nil {
		return Output{}, err
	}
	topo, err := checkTopology(res.Harness, in.Agent.ExecutionMode, in.Installation)
	if err != nil {
		return Output{}, err
	}
	support := in.Auth
	if support == nil {
		support = KubernetesAuthSupport()
	}
	if err := checkAuth(topo, in.Agent.HarnessAuth, in.Installation, support); err != nil {
		return Output{}, err
	}
	if err := checkAuthProvider(topo, res); err != nil {
		return Output{}, err
	}
	if err := checkCredentialConfig(d, res); err != nil {
		return Output{}, err
	}
	versions := in.HarnessVersions
	if versions == nil {
		versions = DefaultHarnessVersions()
	}
	version := versions[res.Harness]
	if version == "" {
		return Output{}, conflict(RuleHarnessVersion, "the %s Harness has no approved version in this Installation", res.Harness).with("harness", res.Harness)
	}
	doc, err := canonical(tree)
	if err != nil {
		return Output{}, err
	}
	// Rendered never aliases Document: callers may keep and change either.
	rendered := append(json.RawMessage(nil), doc...)
	if customEndpoint(d, res) {
		private := deepCopy(tree).(map[string]any)
		if err := compileCustomEndpoint(private); err != nil {
			return Output{}, err
		}
		if rendered, err = canonical(private); err != nil {
			return Output{}, err
		}
	}
	out := Output{
		Harness:  state.HarnessIdentity{ID: res.Harness, Version: version},
		Mode:     topo.Mode(),
		Document: doc,
		Rendered: rendered,
		Primary:  res.Primary,
	}
	if len(res.Fallbacks) > 0 {
		out.Fallbacks = append([]modelref.Ref(nil), res.Fallbacks...)
	}
	return out, nil
}
