package admission

// Rule names carried in Error.Details["rule"]. Each names one admission rule
// (docs/design/seed-001.md, docs/design/reference.md#s3 and docs/design/reference.md#s7); tests are keyed by them.
const (
	RuleDocumentSyntax     = "document-syntax"       // not one well-formed, duplicate-free JSON object within limits
	RuleDocumentShape      = "document-shape"        // a setting oce reads has the wrong JSON type
	RuleModelRef           = "model-ref"             // a model reference is not provider/model
	RuleFallbackProvider   = "fallback-provider"     // a fallback leaves the primary's provider
	RuleAgentsList         = "agents-list"           // non-empty agents.list
	RuleRoster             = "agents-roster"         // other rosters the OpenClaw gateway rejects
	RuleProviderSettings   = "provider-settings"     // baseUrl/api the runtime cannot use
	RuleRuntimeUnsupported = "runtime-unsupported"   // agentRuntime.id outside {openclaw, codex}
	RuleRuntimeConflict    = "runtime-conflict"      // explicit policies disagree for one model
	RuleRuntimeRequired    = "runtime-required"      // openai, codex, configured or plugin-routed provider without policy
	RuleCodexProvider      = "codex-provider"        // codex runtime on a provider that cannot reach the Codex Harness
	RuleHarnessesDiffer    = "harnesses-differ"      // primary and fallbacks/entries resolve to different Harnesses
	RuleEntryPrimary       = "entry-primary"         // an agents.entries model differs from the primary
	RuleEntryModel         = "entry-model"           // an agents.entries entry resolves no model
	RuleSelectableModels   = "selectable-models"     // catalog entries not matching the primary's provider and runtime
	RuleProviderModels     = "provider-models"       // provider models beyond the primary and fallbacks
	RuleWholeAgentPin      = "whole-agent-pin"       // legacy whole-agent agentRuntime disagrees with the resolved Harness
	RuleExecutionMode      = "execution-mode"        // execution mode outside {embedded, dedicated}
	RuleNativeWorkers      = "native-worker-support" // dedicated OpenClaw without declared native-worker support
	RuleSandboxDriver      = "sandbox-driver"        // dedicated OpenClaw without a qualifying SandboxDriver
	RuleModeMismatch       = "mode-mismatch"         // Codex requested in embedded mode
	RuleHarnessVersion     = "harness-version"       // no approved version for the resolved Harness
	RuleAuthMissing        = "harness-auth-missing"
	RuleAuthTopology       = "harness-auth-topology"           // method not allowed for (harness, mode)
	RuleAuthSource         = "harness-auth-source"             // credential kind not allowed for the method
	RuleAuthGateway        = "harness-auth-credential-gateway" // Credential Gateway rules
	RuleAuthRuntime        = "harness-auth-runtime"            // runtime method (SSH only)
	RuleAuthDriver         = "harness-auth-driver"             // Compute driver does not support the method
	RuleAuthProvider       = "harness-auth-provider"           // binding's credential does not fit the model provider
	RuleEnvGuard           = "driver-env-guard"                // env keys that would bypass the binding
	RuleAuthSection        = "config-auth-section"             // native auth profiles beside the binding
	RuleProviderCredential = "provider-credential"             // credential headers or apiKey outside the binding
	RuleLiteralCredential  = "literal-credential"              // a literal secret anywhere in a Configuration
	RuleSchema             = "openclaw-schema"                 // the pinned OpenClaw's own configuration schema
	RuleLogLevel           = "log-level"
	RuleScope              = "configuration-scope" // Configuration not the Agent's, or in another Namespace
	RuleCompileReserved    = "custom-endpoint-reserved"
)
