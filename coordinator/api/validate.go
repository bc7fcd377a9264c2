package api

import (
	"bytes"
	"encoding/json"
	"regexp"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Limits of user-supplied fields.
const (
	maxNameLen      = 63
	maxSourceRefLen = 512
	maxPlugins      = 64
	maxPluginLen    = 128
	maxComputeIDLen = 63
)

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	pluginName = regexp.MustCompile(`^[A-Za-z0-9@][A-Za-z0-9@/._-]*$`)
)

// validName checks a DNS-label-like resource name.
func validName(kind, name string) error {
	if name == "" {
		return invalid("%s name is required", kind)
	}
	if len(name) > maxNameLen || !dnsLabel.MatchString(name) {
		return invalid("%s name %q must be a DNS label: lower-case letters, digits and '-', at most %d characters, starting and ending with a letter or digit", kind, truncate(name, maxNameLen+1), maxNameLen)
	}
	return nil
}

// Harness auth methods and credential kinds the API accepts (docs/design/reference.md#s7-4).
var (
	authMethods = map[string]bool{"api_key": true, "codex_pat": true, "chatgpt_service_account": true,
		"oauth": true, "credential_source": true, "runtime": true}
	// sourceRequired: methods backed by a Secret or an account need a reference.
	sourceRequired  = map[string]bool{"api_key": true, "codex_pat": true, "chatgpt_service_account": true}
	credentialKinds = map[string]bool{"secret": true, "service_account": true, "credential_gateway": true}
)

// validHarnessAuth checks the shape of a binding; whether it fits the
// Agent's harness and mode is admission's decision at deploy.
func validHarnessAuth(a *wire.HarnessAuth) error {
	if a == nil {
		return nil
	}
	if !authMethods[a.Method] {
		return invalid("harnessAuth.method %q is not one of api_key, codex_pat, chatgpt_service_account, oauth, credential_source, runtime", a.Method)
	}
	if a.CredentialKind != "" && !credentialKinds[a.CredentialKind] {
		return invalid("harnessAuth.credentialKind %q is not one of secret, service_account, credential_gateway", a.CredentialKind)
	}
	if a.Method == "runtime" {
		if a.SourceRef != "" || a.CredentialKind != "" {
			return invalid("harnessAuth method runtime takes no sourceRef or credentialKind")
		}
		return nil
	}
	if a.SourceRef == "" {
		if sourceRequired[a.Method] {
			return invalid("harnessAuth.sourceRef is required for method %s", a.Method)
		}
		return nil
	}
	if len(a.SourceRef) > maxSourceRefLen {
		return invalid("harnessAuth.sourceRef exceeds %d bytes", maxSourceRefLen)
	}
	// One reference syntax (coordinator/credref), checked when the Agent
	// is created or updated, not first at deploy.
	if _, err := credref.Parse(a.SourceRef); err != nil {
		e := invalid("harnessAuth.sourceRef: %v", err)
		e.Details = map[string]any{"reason": string(codes.CredentialReferenceInvalid)}
		return e
	}
	return nil
}

func validMode(mode string) error {
	if mode != state.ModeEmbedded && mode != state.ModeDedicated {
		return invalid("executionMode %q is not one of embedded, dedicated", mode)
	}
	return nil
}

// validResources checks an Agent's requests and limits (compute's rules).
func validResources(r *wire.AgentResources) error {
	if err := compute.ValidateResources(stateResources(r)); err != nil {
		return invalid("resources: %v", err)
	}
	return nil
}

func validPlugins(p []string) error {
	if len(p) > maxPlugins {
		return invalid("at most %d plugins", maxPlugins)
	}
	seen := map[string]bool{}
	for _, name := range p {
		if len(name) > maxPluginLen || !pluginName.MatchString(name) {
			return invalid("plugin %q is not a valid plugin name", name)
		}
		if seen[name] {
			return invalid("plugin %q is listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

func validComputeID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > maxComputeIDLen || !dnsLabel.MatchString(id) {
		return invalid("computeId %q must be a DNS label", id)
	}
	return nil
}

// validDocument requires a JSON object; admission checks its content.
func validDocument(doc json.RawMessage) error {
	t := bytes.TrimSpace(doc)
	if len(t) == 0 || string(t) == "null" {
		return invalid("document is required")
	}
	if t[0] != '{' || !json.Valid(t) {
		return invalid("document must be a JSON object")
	}
	return nil
}
