package admission

import (
	"regexp"
	"slices"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/modelref"
)

// harnessAuth methods (docs/design/seed-001.md, docs/design/reference.md#s7-4).
const (
	AuthAPIKey                = "api_key"
	AuthCodexPAT              = "codex_pat"
	AuthChatGPTServiceAccount = "chatgpt_service_account"
	AuthOAuth                 = "oauth"
	AuthCredentialSource      = "credential_source"
	AuthRuntime               = "runtime"
)

// Credential kinds of a harnessAuth binding.
const (
	KindSecret            = "secret"
	KindServiceAccount    = "service_account"
	KindCredentialGateway = "credential_gateway"
)

// AuthSupport lists, per topology, the harnessAuth methods the selected
// Compute driver supports.
type AuthSupport map[contract.Topology][]string

// KubernetesAuthSupport is what the Kubernetes Compute driver supports: the
// binding table of docs/design/seed-001.md. It never supports runtime (SSH only).
func KubernetesAuthSupport() AuthSupport {
	return AuthSupport{
		contract.Embedded:          {AuthAPIKey},
		contract.DedicatedOpenClaw: {AuthAPIKey, AuthCredentialSource},
		contract.DedicatedCodex:    {AuthAPIKey, AuthCodexPAT, AuthChatGPTServiceAccount, AuthOAuth, AuthCredentialSource},
	}
}

// methodTopologies is the seed's table: which topologies each method may run.
var methodTopologies = map[string][]contract.Topology{
	AuthAPIKey:                {contract.Embedded, contract.DedicatedOpenClaw, contract.DedicatedCodex},
	AuthCodexPAT:              {contract.DedicatedCodex},
	AuthChatGPTServiceAccount: {contract.DedicatedCodex},
	AuthOAuth:                 {contract.DedicatedCodex},
	AuthCredentialSource:      {contract.DedicatedOpenClaw, contract.DedicatedCodex},
}

// methodKinds lists the credential kinds each method accepts ("" = unstated).
var methodKinds = map[string][]string{
	AuthAPIKey:                {"", KindSecret},
	AuthCodexPAT:              {"", KindSecret, KindServiceAccount},
	AuthChatGPTServiceAccount: {"", KindServiceAccount},
	AuthOAuth:                 {""},
	AuthCredentialSource:      {"", KindCredentialGateway},
}

// checkAuth enforces the harnessAuth binding rules; every refusal is 409.
func checkAuth(t contract.Topology, auth *state.HarnessAuth, inst state.Installation, support AuthSupport) error {
	if auth == nil || auth.Method == "" {
		return conflict(RuleAuthMissing, "the Agent has no harnessAuth binding: it is the sole model-auth selector and deployment requires one")
	}
	m := auth.Method
	if m == AuthRuntime {
		return conflict(RuleAuthRuntime, "harnessAuth method runtime is accepted only by SSH Compute for embedded OpenClaw; this Compute driver rejects it")
	}
	allowed, known := methodTopologies[m]
	if !known {
		return conflict(RuleAuthTopology, "harnessAuth method %s is not supported", quote(m)).with("method", m)
	}
	if !slices.Contains(allowed, t) {
		return conflict(RuleAuthTopology, "harnessAuth method %s is incompatible with %s %s", m, t.Mode(), t.Harness()).with("method", m)
	}
	if !slices.Contains(methodKinds[m], auth.CredentialKind) {
		return conflict(RuleAuthSource, "harnessAuth method %s does not accept credential kind %s", m, quote(auth.CredentialKind)).with("method", m)
	}
	switch m {
	case AuthCredentialSource:
		if inst.CredentialGateway == "" {
			return conflict(RuleAuthGateway, "harnessAuth method credential_source requires a selected Credential Gateway; none is selected").with("missingDriver", "CredentialGateway")
		}
		if inst.SandboxDriver == "" {
			return conflict(RuleAuthGateway, "harnessAuth method credential_source requires the Credential Gateway's paired Sandbox; no SandboxDriver is selected").with("missingDriver", "SandboxDriver")
		}
	default:
		if inst.CredentialGateway != "" {
			return conflict(RuleAuthGateway, "while a Credential Gateway is selected, deployment rejects the Secret-backed and account harnessAuth method %s: use credential_source", m).with("method", m)
		}
		if m == AuthOAuth && inst.SandboxDriver != "" {
			return conflict(RuleAuthGateway, "harnessAuth method oauth requires the Compute-owned dedicated Codex Harness, not a SandboxDriver-provisioned one").with("method", m)
		}
	}
	if !slices.Contains(support[t], m) {
		return conflict(RuleAuthDriver, "the selected Compute driver does not support harnessAuth method %s for %s %s", m, t.Mode(), t.Harness()).with("method", m)
	}
	return nil
}

// checkAuthProvider checks that the binding's credential can serve the
// model provider: embedded OpenClaw projects OPENAI_API_KEY or
// ANTHROPIC_API_KEY by provider, dedicated OpenClaw only OPENAI_API_KEY,
// dedicated Codex serves openai and codex. Both startup checks call the
// primary model, so one must exist.
func checkAuthProvider(t contract.Topology, res resolution) error {
	if !res.HasModel {
		return conflict(RuleAuthProvider, "harness authentication requires a compatible model provider, and the configuration selects no model: set agents.defaults.model (the startup checks call the primary model)")
	}
	var ok []string
	switch t {
	case contract.Embedded:
		ok = []string{"openai", "anthropic"}
	case contract.DedicatedOpenClaw:
		ok = []string{"openai"}
	case contract.DedicatedCodex:
		ok = []string{"openai", "codex"}
	}
	for _, r := range append([]modelref.Ref{res.Primary}, res.Fallbacks...) {
		if !slices.Contains(ok, r.Provider) {
			return conflict(RuleAuthProvider, "harness authentication for %s %s requires a model provider in %v; the configuration selects %s", t.Mode(), t.Harness(), ok, quote(r.Provider)).with("provider", r.Provider)
		}
	}
	return nil
}

// credentialEnv matches configuration env keys that would bypass the
// binding (docs/design/reference.md#s3).
var credentialEnv = regexp.MustCompile(`(?i)^(?:OPENAI_|ANTHROPIC_|CODEX_(?:ACCESS_TOKEN|CHATGPT_WORKSPACE_ID|LOGIN_MODE)$)`)

var credentialHeader = regexp.MustCompile(`(?i)^(?:authorization|api-key|x-api-key)$`)

// providerCredentialEnv is the environment variable the binding projects for
// a provider the OpenClaw Harness calls.
var providerCredentialEnv = contract.ProviderKeyEnv

// checkCredentialConfig is the driver guard: model credentials must come from
// the harnessAuth binding, never from the native configuration. 400.
func checkCredentialConfig(d Document, res resolution) error {
	if len(d.AuthKeys) > 0 {
		return invalid(RuleAuthSection, "model credentials must use the harnessAuth binding: remove the auth section (%s)", quote(d.AuthKeys[0])).with("path", "auth")
	}
	for _, k := range d.EnvKeys {
		if credentialEnv.MatchString(k) {
			return invalid(RuleEnvGuard, "model credentials must use the harnessAuth binding: the configuration env key %s is reserved (OPENAI_*, ANTHROPIC_*, CODEX_ACCESS_TOKEN, CODEX_CHATGPT_WORKSPACE_ID, CODEX_LOGIN_MODE)", quote(k)).with("key", k)
		}
	}
	if !res.HasModel {
		return nil
	}
	pid := res.Primary.Provider
	p, ok := d.Providers[pid]
	if !ok {
		return nil
	}
	path := keyPath("models.providers", pid)
	headers := slices.Clone(p.HeaderNames)
	for _, m := range p.Models {
		headers = append(headers, m.HeaderNames...)
	}
	for _, h := range headers {
		if credentialHeader.MatchString(h) {
			return invalid(RuleProviderCredential, "model credentials must use the harnessAuth binding: %s carries the credential header %s", path, quote(h)).with("path", path)
		}
	}
	if !p.HasAPIKey {
		return nil
	}
	env := providerCredentialEnv[pid]
	if res.Harness != state.HarnessOpenClaw || env == "" {
		return invalid(RuleProviderCredential, "model credentials must use the harnessAuth binding: remove %s.apiKey", path).with("path", path+".apiKey")
	}
	if s, ok := p.APIKey.(string); ok && s == "${"+env+"}" {
		return nil
	}
	if ref, ok := p.APIKey.(map[string]any); ok && len(ref) == 3 && ref["source"] == "env" && ref["id"] == env {
		if name, ok := ref["provider"].(string); ok && d.Secrets[name] == "env" {
			return nil
		}
	}
	return invalid(RuleProviderCredential, "model credentials must use the harnessAuth binding: %s.apiKey may only reference the projected %s", path, env).with("path", path+".apiKey")
}
