package admission

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/modelref"
)

// input builds an admissible-looking Input around doc.
func input(doc, mode, method string) Input {
	var auth *state.HarnessAuth
	if method != "" {
		auth = &state.HarnessAuth{Method: method, SourceRef: "secret://ns1/model#key"}
	}
	return Input{
		Agent: state.Agent{ID: "ag1", NamespaceID: "ns1", Name: "alpha", ExecutionMode: mode,
			ConfigurationID: "cfg1", HarnessAuth: auth, ComputeID: "k8s"},
		Configuration: state.Configuration{ID: "cfg1", NamespaceID: "ns1", Name: "base", Generation: 3,
			Document: json.RawMessage(doc)},
	}
}

// get walks a dotted path (keys may not contain dots) through a JSON document.
func get(t *testing.T, doc json.RawMessage, path string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(doc, &v))
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func ref(s string) modelref.Ref {
	r, err := modelref.Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

const (
	emb = state.ModeEmbedded
	ded = state.ModeDedicated
)

// Documents shared by several rows.
const (
	docAnthropic = `{"agents":{"defaults":{"model":"anthropic/claude-sonnet-4-6"}}}`
	docCodex     = `{"agents":{"defaults":{"model":"codex/gpt-5.5","models":{"codex/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}}}`
	docOpenAIOC  = `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"openclaw"}}}}}}`
	pluginWS     = `"plugins":{"entries":{"codex":{"enabled":true,"config":{"appServer":{"transport":"websocket"}}}}}`
)

var nativeInstall = state.Installation{NativeWorkerSupport: "pinned-runtime", SandboxDriver: "openshell"}

func TestAdmitRules(t *testing.T) {
	type row struct {
		name   string
		doc    string
		mode   string
		method string
		mutate func(*Input)
		code   codes.Code // "" = admitted
		rule   string
		check  func(t *testing.T, out Output)
	}
	harness := func(id string) func(*testing.T, Output) {
		return func(t *testing.T, out Output) { require.Equal(t, id, out.Harness.ID) }
	}
	rows := []row{
		// Model references.
		{name: "model-ref/split-at-first-slash", mode: ded, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"codex/vendor/org/model","models":{"codex/vendor/org/model":{"agentRuntime":{"id":"codex"}}}}}}`,
			check: func(t *testing.T, out Output) {
				require.Equal(t, modelref.Ref{Provider: "codex", Model: "vendor/org/model"}, out.Primary)
				require.Equal(t, state.HarnessCodex, out.Harness.ID)
			}},
		{name: "model-ref/missing-provider", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"claude-sonnet"}}}`, code: codes.InvalidRequest, rule: RuleModelRef},
		{name: "model-ref/object-without-primary", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":{"fallbacks":["anthropic/x"]}}}}`, code: codes.InvalidRequest, rule: RuleModelRef},
		{name: "catalog-id/without-provider-prefix", mode: ded, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"codex/vendor/org/model"}},"models":{"providers":{"codex":{"models":[{"id":"vendor/org/model","agentRuntime":{"id":"codex"}}]}}}}`,
			check: harness(state.HarnessCodex)},
		{name: "catalog-id/with-provider-prefix", mode: ded, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"codex/vendor/org/model"}},"models":{"providers":{"codex":{"models":[{"id":"codex/vendor/org/model","agentRuntime":{"id":"codex"}}]}}}}`,
			check: harness(state.HarnessCodex)},
		{name: "catalog-id/partial-id-does-not-match", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"codex/vendor/org/model"}},"models":{"providers":{"codex":{"agentRuntime":{"id":"codex"},"models":[{"id":"org/model"}]}}}}`,
			code: codes.InvalidRequest, rule: RuleProviderModels},

		// agentRuntime policy sources.
		{name: "runtime/from-entry-models", mode: ded, method: AuthAPIKey,
			doc:   `{"agents":{"entries":{"main":{"model":"codex/gpt-5.5","models":{"codex/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}}}}`,
			check: harness(state.HarnessCodex)},
		{name: "runtime/from-defaults-models", mode: ded, method: AuthAPIKey, doc: docCodex, check: harness(state.HarnessCodex)},
		{name: "runtime/from-provider-model-entry", mode: ded, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"codex/gpt-5.5"}},"models":{"providers":{"codex":{"models":[{"id":"gpt-5.5","agentRuntime":{"id":"codex"}}]}}}}`,
			check: harness(state.HarnessCodex)},
		{name: "runtime/from-provider-policy", mode: ded, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"codex/gpt-5.5"}},"models":{"providers":{"codex":{"agentRuntime":{"id":"codex"}}}}}`,
			check: harness(state.HarnessCodex)},
		{name: "runtime/agreeing-policies-admit", mode: emb, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"openclaw"}}}}},"models":{"providers":{"openai":{"agentRuntime":{"id":"openclaw"}}}}}`,
			check: harness(state.HarnessOpenClaw)},
		{name: "runtime/conflicting-policies", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"codex/gpt-5.5","models":{"codex/gpt-5.5":{"agentRuntime":{"id":"openclaw"}}}}},"models":{"providers":{"codex":{"agentRuntime":{"id":"codex"}}}}}`,
			code: codes.InvalidRequest, rule: RuleRuntimeConflict},
		{name: "runtime/conflict-entry-vs-defaults", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"openclaw"}}}},"entries":{"main":{"models":{"openai/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}}}}`,
			code: codes.InvalidRequest, rule: RuleRuntimeConflict},
		{name: "runtime/unknown-id", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"auto"}}}}}}`,
			code: codes.InvalidRequest, rule: RuleRuntimeUnsupported},
		{name: "runtime/not-an-object", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":"openclaw"}}}}}`,
			code: codes.InvalidRequest, rule: RuleRuntimeUnsupported},

		// Missing policy.
		{name: "default/no-model-candidate-resolves-openclaw", mode: ded, method: AuthAPIKey,
			doc: `{"gateway":{"mode":"local"}}`, code: codes.InvalidRequest, rule: RuleNativeWorkers}, // openclaw resolved, so dedicated asks for native workers
		{name: "default/no-model-candidate-cannot-probe", mode: emb, method: AuthAPIKey,
			doc: `{"gateway":{"mode":"local"}}`, code: codes.ResourceConflict, rule: RuleAuthProvider},
		{name: "default/builtin-provider-openclaw", mode: emb, method: AuthAPIKey, doc: docAnthropic, check: harness(state.HarnessOpenClaw)},
		{name: "default/openai-needs-policy", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"openai/gpt-5.5"}}}`, code: codes.InvalidRequest, rule: RuleRuntimeRequired},
		{name: "default/codex-needs-policy", mode: ded, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"codex/gpt-5.5"}}}`, code: codes.InvalidRequest, rule: RuleRuntimeRequired},
		{name: "default/configured-provider-needs-policy", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"anthropic/claude-sonnet-4-6"}},"models":{"providers":{"anthropic":{"baseUrl":"https://proxy.example/v1"}}}}`,
			code: codes.InvalidRequest, rule: RuleRuntimeRequired},
		{name: "default/plugin-routed-provider-needs-policy", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"anthropic/claude-sonnet-4-6"}},"plugins":{"entries":{"anthropic":{"enabled":true}}}}`,
			code: codes.InvalidRequest, rule: RuleRuntimeRequired},

		// Codex provider requirement.
		{name: "codex/native-codex-provider", mode: ded, method: AuthAPIKey, doc: ExampleDedicatedCodex, check: harness(state.HarnessCodex)},
		{name: "codex/openai-with-websocket-plugin", mode: ded, method: AuthAPIKey, doc: ExampleDedicatedCodexOpenAI, check: harness(state.HarnessCodex)},
		{name: "codex/openai-without-plugin", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}}}`,
			code: codes.InvalidRequest, rule: RuleCodexProvider},
		{name: "codex/openai-plugin-not-enabled", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}},"plugins":{"entries":{"codex":{"config":{"appServer":{"transport":"websocket"}}}}}}`,
			code: codes.InvalidRequest, rule: RuleCodexProvider},
		{name: "codex/openai-plugin-stdio-transport", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/gpt-5.5","models":{"openai/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}},"plugins":{"entries":{"codex":{"enabled":true,"config":{"appServer":{"transport":"stdio"}}}}}}`,
			code: codes.InvalidRequest, rule: RuleCodexProvider},
		{name: "codex/other-provider", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"anthropic/claude-sonnet-4-6","models":{"anthropic/claude-sonnet-4-6":{"agentRuntime":{"id":"codex"}}}}},` + pluginWS + `}`,
			code: codes.InvalidRequest, rule: RuleCodexProvider},

		// Fallbacks, catalogs, rosters.
		{name: "fallbacks/order-preserved", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":{"primary":"anthropic/a","fallbacks":["anthropic/c","anthropic/b/x","anthropic/a2"]}}}}`,
			check: func(t *testing.T, out Output) {
				require.Equal(t, []modelref.Ref{ref("anthropic/c"), ref("anthropic/b/x"), ref("anthropic/a2")}, out.Fallbacks)
				require.Equal(t, []any{"anthropic/c", "anthropic/b/x", "anthropic/a2"}, get(t, out.Document, "agents.defaults.model.fallbacks"))
			}},
		{name: "fallbacks/keep-primary-provider", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":{"primary":"anthropic/a","fallbacks":["openai/b"]}}}}`, code: codes.InvalidRequest, rule: RuleFallbackProvider},
		{name: "fallbacks/must-be-array", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":{"primary":"anthropic/a","fallbacks":"anthropic/b"}}}}`, code: codes.InvalidRequest, rule: RuleDocumentShape},
		{name: "fallbacks/same-harness", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":{"primary":"openai/a","fallbacks":["openai/b"]},"models":{"openai/a":{"agentRuntime":{"id":"codex"}},"openai/b":{"agentRuntime":{"id":"openclaw"}}}}},` + pluginWS + `}`,
			code: codes.InvalidRequest, rule: RuleSelectableModels},
		{name: "fallbacks/resolve-to-one-harness", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":{"primary":"openai/a","fallbacks":["openai/b"]}}},"models":{"providers":{"openai":{"models":[{"id":"a","agentRuntime":{"id":"codex"}},{"id":"b","agentRuntime":{"id":"openclaw"}}]}}},` + pluginWS + `}`,
			code: codes.InvalidRequest, rule: RuleHarnessesDiffer},
		{name: "provider-models/limited-to-primary-and-fallbacks", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"codex/gpt-5.5"}},"models":{"providers":{"codex":{"agentRuntime":{"id":"codex"},"models":[{"id":"gpt-5.5"},{"id":"gpt-4"}]}}}}`,
			code: codes.InvalidRequest, rule: RuleProviderModels},
		{name: "provider-models/other-provider-listed", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"anthropic/a"}},"models":{"providers":{"vllm":{"models":[{"id":"llama"}]}}}}`,
			code: codes.InvalidRequest, rule: RuleProviderModels},
		{name: "selectable-models/keep-provider", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"openai/a","models":{"openai/a":{"agentRuntime":{"id":"openclaw"}},"anthropic/b":{"agentRuntime":{"id":"openclaw"}}}}}}`,
			code: codes.InvalidRequest, rule: RuleSelectableModels},
		{name: "selectable-models/need-explicit-runtime", mode: emb, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"anthropic/a","models":{"anthropic/a":{},"anthropic/b":{}}}}}`,
			code: codes.InvalidRequest, rule: RuleSelectableModels},
		{name: "selectable-models/matching-runtime-admits", mode: emb, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"openai/a","models":{"openai/a":{"agentRuntime":{"id":"openclaw"}},"openai/*":{"agentRuntime":{"id":"openclaw"}}}}}}`,
			check: harness(state.HarnessOpenClaw)},
		{name: "agents-list/non-empty", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"list":[{"id":"main"}],"defaults":{"model":"anthropic/a"}}}`, code: codes.InvalidRequest, rule: RuleAgentsList},
		{name: "agents-list/empty-admits", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"list":[],"defaults":{"model":"anthropic/a"}}}`, check: harness(state.HarnessOpenClaw)},
		{name: "agents-roster/multiple-entries-need-explicit-ownership", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"},"entries":{"a":{},"b":{}}}}`, code: codes.InvalidRequest, rule: RuleRoster},
		{name: "entry-primary/entries-match-primary", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"},"entries":{"main":{"model":"anthropic/b"}}}}`, code: codes.InvalidRequest, rule: RuleEntryPrimary},
		{name: "whole-agent-pin/conflict", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a","agentRuntime":{"id":"codex"}}}}`, code: codes.InvalidRequest, rule: RuleWholeAgentPin},
		{name: "whole-agent-pin/never-selects", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"openai/a","agentRuntime":{"id":"openclaw"}}}}`, code: codes.InvalidRequest, rule: RuleRuntimeRequired},

		// (Harness, mode) pairs.
		{name: "pair/openclaw-embedded", mode: emb, method: AuthAPIKey, doc: docAnthropic,
			check: func(t *testing.T, out Output) {
				require.Equal(t, state.HarnessIdentity{ID: "openclaw", Version: "2026.9.6"}, out.Harness)
				require.Equal(t, emb, out.Mode)
			}},
		{name: "pair/codex-dedicated", mode: ded, method: AuthAPIKey, doc: docCodex,
			check: func(t *testing.T, out Output) {
				require.Equal(t, state.HarnessIdentity{ID: "codex", Version: "0.169.0"}, out.Harness)
				require.Equal(t, ded, out.Mode)
			}},
		{name: "pair/openclaw-dedicated-admits-with-support-and-driver", mode: ded, method: AuthAPIKey, doc: docOpenAIOC,
			mutate: func(in *Input) { in.Installation = nativeInstall }, check: harness(state.HarnessOpenClaw)},
		{name: "pair/openclaw-dedicated-without-native-support", mode: ded, method: AuthAPIKey, doc: docOpenAIOC,
			mutate: func(in *Input) { in.Installation.SandboxDriver = "openshell" }, code: codes.InvalidRequest, rule: RuleNativeWorkers},
		{name: "pair/openclaw-dedicated-without-sandbox-driver", mode: ded, method: AuthAPIKey, doc: docOpenAIOC,
			mutate: func(in *Input) { in.Installation.NativeWorkerSupport = "pinned-runtime" }, code: codes.ResourceConflict, rule: RuleSandboxDriver},
		{name: "pair/codex-embedded-mode-mismatch", mode: emb, method: AuthAPIKey, doc: docCodex, code: codes.ResourceConflict, rule: RuleModeMismatch},
		{name: "execution-mode/unknown", mode: "shared", method: AuthAPIKey, doc: docAnthropic, code: codes.InvalidRequest, rule: RuleExecutionMode},
		{name: "execution-mode/empty", mode: "", method: AuthAPIKey, doc: docAnthropic, code: codes.InvalidRequest, rule: RuleExecutionMode},

		// harnessAuth bindings.
		{name: "auth/missing-binding", mode: emb, doc: docAnthropic, code: codes.ResourceConflict, rule: RuleAuthMissing},
		{name: "auth/api-key-dedicated-openclaw", mode: ded, method: AuthAPIKey, doc: docOpenAIOC,
			mutate: func(in *Input) { in.Installation = nativeInstall }, check: harness(state.HarnessOpenClaw)},
		{name: "auth/api-key-dedicated-codex", mode: ded, method: AuthAPIKey, doc: docCodex, check: harness(state.HarnessCodex)},
		{name: "auth/api-key-rejects-service-account-source", mode: ded, method: AuthAPIKey, doc: docCodex,
			mutate: func(in *Input) { in.Agent.HarnessAuth.CredentialKind = KindServiceAccount }, code: codes.ResourceConflict, rule: RuleAuthSource},
		{name: "auth/codex-pat-dedicated-codex", mode: ded, method: AuthCodexPAT, doc: docCodex,
			mutate: func(in *Input) { in.Agent.HarnessAuth.CredentialKind = KindServiceAccount }, check: harness(state.HarnessCodex)},
		{name: "auth/codex-pat-embedded-openclaw", mode: emb, method: AuthCodexPAT, doc: docAnthropic, code: codes.ResourceConflict, rule: RuleAuthTopology},
		{name: "auth/codex-pat-dedicated-openclaw", mode: ded, method: AuthCodexPAT, doc: docOpenAIOC,
			mutate: func(in *Input) { in.Installation = nativeInstall }, code: codes.ResourceConflict, rule: RuleAuthTopology},
		{name: "auth/chatgpt-service-account-dedicated-codex", mode: ded, method: AuthChatGPTServiceAccount, doc: docCodex, check: harness(state.HarnessCodex)},
		{name: "auth/chatgpt-service-account-embedded", mode: emb, method: AuthChatGPTServiceAccount, doc: docAnthropic, code: codes.ResourceConflict, rule: RuleAuthTopology},
		{name: "auth/credential-source-requires-gateway", mode: ded, method: AuthCredentialSource, doc: docCodex,
			mutate: func(in *Input) { in.Installation.SandboxDriver = "openshell" }, code: codes.ResourceConflict, rule: RuleAuthGateway},
		{name: "auth/credential-source-dedicated-codex", mode: ded, method: AuthCredentialSource, doc: docCodex,
			mutate: func(in *Input) {
				in.Installation = state.Installation{SandboxDriver: "openshell", CredentialGateway: "cg"}
				in.Agent.HarnessAuth.CredentialKind = KindCredentialGateway
			}, check: harness(state.HarnessCodex)},
		{name: "auth/credential-source-dedicated-openclaw", mode: ded, method: AuthCredentialSource, doc: docOpenAIOC,
			mutate: func(in *Input) {
				in.Installation = state.Installation{NativeWorkerSupport: "pinned-runtime", SandboxDriver: "openshell", CredentialGateway: "cg"}
			}, check: harness(state.HarnessOpenClaw)},
		{name: "auth/credential-source-embedded", mode: emb, method: AuthCredentialSource, doc: docAnthropic,
			mutate: func(in *Input) { in.Installation.CredentialGateway = "cg" }, code: codes.ResourceConflict, rule: RuleAuthTopology},
		{name: "auth/gateway-rejects-secret-method", mode: ded, method: AuthAPIKey, doc: docCodex,
			mutate: func(in *Input) { in.Installation.CredentialGateway = "cg" }, code: codes.ResourceConflict, rule: RuleAuthGateway},
		{name: "auth/gateway-rejects-account-method", mode: ded, method: AuthChatGPTServiceAccount, doc: docCodex,
			mutate: func(in *Input) { in.Installation.CredentialGateway = "cg" }, code: codes.ResourceConflict, rule: RuleAuthGateway},
		{name: "auth/runtime-is-ssh-only", mode: emb, method: AuthRuntime, doc: docAnthropic, code: codes.ResourceConflict, rule: RuleAuthRuntime},
		{name: "auth/unknown-method", mode: emb, method: "password", doc: docAnthropic, code: codes.ResourceConflict, rule: RuleAuthTopology},
		{name: "auth/driver-does-not-support-method", mode: ded, method: AuthCodexPAT, doc: docCodex,
			mutate: func(in *Input) { in.Auth = AuthSupport{contract.DedicatedCodex: {AuthAPIKey}} }, code: codes.ResourceConflict, rule: RuleAuthDriver},
		{name: "auth/driver-supports-nothing", mode: emb, method: AuthAPIKey, doc: docAnthropic,
			mutate: func(in *Input) { in.Auth = AuthSupport{} }, code: codes.ResourceConflict, rule: RuleAuthDriver},
		{name: "auth/provider-dedicated-openclaw-openai-only", mode: ded, method: AuthAPIKey,
			doc:    `{"agents":{"defaults":{"model":"anthropic/a","models":{"anthropic/a":{"agentRuntime":{"id":"openclaw"}}}}}}`,
			mutate: func(in *Input) { in.Installation = nativeInstall }, code: codes.ResourceConflict, rule: RuleAuthProvider},
		{name: "auth/provider-embedded-openai-or-anthropic", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"google/gemini-3"}}}`, code: codes.ResourceConflict, rule: RuleAuthProvider},

		// Driver env guard and credential settings.
		{name: "env-guard/openai-key-in-env-vars", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"env":{"vars":{"OPENAI_API_KEY":"sk-x"}}}`, code: codes.InvalidRequest, rule: RuleEnvGuard},
		{name: "env-guard/anthropic-prefix-any-case", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"env":{"anthropic_base_url":"https://x"}}`, code: codes.InvalidRequest, rule: RuleEnvGuard},
		{name: "env-guard/codex-login-mode", mode: ded, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"codex/gpt-5.5","models":{"codex/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}},"env":{"vars":{"CODEX_LOGIN_MODE":"api_key"}}}`, code: codes.InvalidRequest, rule: RuleEnvGuard},
		{name: "env-guard/codex-access-token", mode: ded, method: AuthCodexPAT,
			doc: `{"agents":{"defaults":{"model":"codex/gpt-5.5","models":{"codex/gpt-5.5":{"agentRuntime":{"id":"codex"}}}}},"env":{"CODEX_ACCESS_TOKEN":"at-x"}}`, code: codes.InvalidRequest, rule: RuleEnvGuard},
		{name: "env-guard/other-codex-keys-allowed", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"env":{"vars":{"CODEX_HOME":"/x","CODEX_ACCESS_TOKENS":"n"}}}`, check: harness(state.HarnessOpenClaw)},
		{name: "config-auth-section/rejected", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"auth":{"profiles":{"anthropic:default":{"provider":"anthropic","mode":"api_key"}}}}`, code: codes.InvalidRequest, rule: RuleAuthSection},
		{name: "provider-credential/header", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"openai/a","models":{"openai/a":{"agentRuntime":{"id":"openclaw"}}}}},"models":{"providers":{"openai":{"headers":{"Authorization":"Bearer x"}}}}}`, code: codes.InvalidRequest, rule: RuleProviderCredential},
		{name: "provider-credential/api-key-env-reference-admits", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"openai/a"}},"models":{"providers":{"openai":{"apiKey":"${OPENAI_API_KEY}","agentRuntime":{"id":"openclaw"}}}}}`, check: harness(state.HarnessOpenClaw)},
		{name: "provider-credential/api-key-literal", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"openai/a"}},"models":{"providers":{"openai":{"apiKey":"sk-literal","agentRuntime":{"id":"openclaw"}}}}}`, code: codes.InvalidRequest, rule: RuleProviderCredential},
		{name: "provider-credential/api-key-on-codex", mode: ded, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"codex/a"}},"models":{"providers":{"codex":{"apiKey":"${OPENAI_API_KEY}","agentRuntime":{"id":"codex"}}}}}`, code: codes.InvalidRequest, rule: RuleProviderCredential},

		// Custom-endpoint compile.
		{name: "custom-endpoint/compile-rendered-only", mode: ded, method: AuthAPIKey, doc: ExampleCustomEndpoint,
			check: func(t *testing.T, out Output) {
				require.Equal(t, "codex/vendor/org/model", get(t, out.Document, "agents.defaults.model.primary"))
				require.Equal(t, []any{"codex/vendor/org/model-mini"}, get(t, out.Document, "agents.defaults.model.fallbacks"))
				require.Equal(t, "codex/openai-compatible/vendor/org/model", get(t, out.Rendered, "agents.defaults.model.primary"))
				require.Equal(t, []any{"codex/openai-compatible/vendor/org/model-mini"}, get(t, out.Rendered, "agents.defaults.model.fallbacks"))
				models := get(t, out.Rendered, "models.providers.codex.models").([]any)
				require.Equal(t, "openai-compatible/vendor/org/model", models[0].(map[string]any)["id"])
				require.Equal(t, "Org model", models[0].(map[string]any)["name"])
				require.Equal(t, "codex/openai-compatible/vendor/org/model-mini", models[1].(map[string]any)["id"])
				require.Equal(t, ref("codex/vendor/org/model"), out.Primary) // probe model unchanged
				require.Equal(t, get(t, out.Document, "logging"), get(t, out.Rendered, "logging"))
			}},
		{name: "custom-endpoint/compile-keeps-catalog-metadata", mode: ded, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"codex/v/m","models":{"codex/v/m":{"alias":"main","agentRuntime":{"id":"codex"}}}}},"models":{"providers":{"codex":{"baseUrl":"https://m.example/v1","agentRuntime":{"id":"codex"}}}}}`,
			check: func(t *testing.T, out Output) {
				models := get(t, out.Rendered, "agents.defaults.models").(map[string]any)
				require.Equal(t, map[string]any{"codex/openai-compatible/v/m": map[string]any{"alias": "main", "agentRuntime": map[string]any{"id": "codex"}}}, models)
				require.Contains(t, get(t, out.Document, "agents.defaults.models").(map[string]any), "codex/v/m")
			}},
		{name: "custom-endpoint/not-without-base-url", mode: ded, method: AuthAPIKey,
			doc:   `{"agents":{"defaults":{"model":"codex/vendor/org/model"}},"models":{"providers":{"codex":{"agentRuntime":{"id":"codex"}}}}}`,
			check: func(t *testing.T, out Output) { require.Equal(t, string(out.Document), string(out.Rendered)) }},
		{name: "custom-endpoint/reserved-prefix", mode: ded, method: AuthAPIKey,
			doc:  `{"agents":{"defaults":{"model":"codex/openai-compatible/m"}},"models":{"providers":{"codex":{"baseUrl":"https://m.example/v1","agentRuntime":{"id":"codex"}}}}}`,
			code: codes.InvalidRequest, rule: RuleCompileReserved},

		// Logging stamp.
		{name: "logging/platform-stamp", mode: emb, method: AuthAPIKey, doc: ExampleEmbeddedAnthropic,
			mutate: func(in *Input) { in.LogLevel = "warn" },
			check: func(t *testing.T, out Output) {
				require.Equal(t, "warn", get(t, out.Document, "logging.level"))
				require.Equal(t, "warn", get(t, out.Document, "logging.consoleLevel"))
				require.Equal(t, "json", get(t, out.Document, "logging.consoleStyle"))
				require.Nil(t, get(t, out.Document, "logging.redactSensitive"))
				require.NotContains(t, string(out.Document), "redactSensitive")
				require.Equal(t, false, get(t, out.Document, "diagnostics.otel.logs"))
				require.Equal(t, float64(4), get(t, out.Document, "agents.defaults.maxConcurrent"))
			}},
		{name: "logging/default-level-info", mode: emb, method: AuthAPIKey, doc: docAnthropic,
			check: func(t *testing.T, out Output) {
				require.Equal(t, "info", get(t, out.Document, "logging.level"))
				require.Equal(t, "info", get(t, out.Document, "logging.consoleLevel"))
			}},
		{name: "logging/otel-export-forced-off", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"diagnostics":{"otel":{"enabled":true,"logs":true,"traces":true}}}`,
			check: func(t *testing.T, out Output) {
				require.Equal(t, false, get(t, out.Document, "diagnostics.otel.logs"))
				require.Equal(t, true, get(t, out.Document, "diagnostics.otel.traces"))
			}},
		{name: "log-level/unsupported", mode: emb, method: AuthAPIKey, doc: docAnthropic,
			mutate: func(in *Input) { in.LogLevel = "verbose" }, code: codes.InvalidRequest, rule: RuleLogLevel},
		{name: "document-shape/logging-not-object", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"logging":"debug"}`, code: codes.InvalidRequest, rule: RuleDocumentShape},

		// Scope, syntax, settings, versions.
		{name: "configuration-scope/other-configuration", mode: emb, method: AuthAPIKey, doc: docAnthropic,
			mutate: func(in *Input) { in.Agent.ConfigurationID = "cfg2" }, code: codes.NotFound, rule: RuleScope},
		{name: "configuration-scope/other-namespace", mode: emb, method: AuthAPIKey, doc: docAnthropic,
			mutate: func(in *Input) { in.Configuration.NamespaceID = "ns2" }, code: codes.NotFound, rule: RuleScope},
		{name: "document-syntax/duplicate-key", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a","model":"openai/b"}}}`, code: codes.InvalidRequest, rule: RuleDocumentSyntax},
		{name: "document-syntax/trailing-value", mode: emb, method: AuthAPIKey, doc: docAnthropic + `{}`, code: codes.InvalidRequest, rule: RuleDocumentSyntax},
		{name: "document-syntax/not-an-object", mode: emb, method: AuthAPIKey, doc: `["agents"]`, code: codes.InvalidRequest, rule: RuleDocumentSyntax},
		{name: "document-syntax/empty", mode: emb, method: AuthAPIKey, doc: ``, code: codes.InvalidRequest, rule: RuleDocumentSyntax},
		{name: "document-shape/agents-not-object", mode: emb, method: AuthAPIKey, doc: `{"agents":[]}`, code: codes.InvalidRequest, rule: RuleDocumentShape},
		{name: "provider-settings/base-url-scheme", mode: emb, method: AuthAPIKey,
			doc: `{"agents":{"defaults":{"model":"anthropic/a"}},"models":{"providers":{"anthropic":{"baseUrl":"ftp://x","agentRuntime":{"id":"openclaw"}}}}}`, code: codes.InvalidRequest, rule: RuleProviderSettings},
		{name: "harness-version/not-approved", mode: ded, method: AuthAPIKey, doc: docCodex,
			mutate: func(in *Input) { in.HarnessVersions = map[string]string{"openclaw": "2026.9.6"} }, code: codes.ResourceConflict, rule: RuleHarnessVersion},
		{name: "harness-version/stamped-from-input", mode: ded, method: AuthAPIKey, doc: docCodex,
			mutate: func(in *Input) { in.HarnessVersions = map[string]string{"codex": "0.170.0"} },
			check:  func(t *testing.T, out Output) { require.Equal(t, "0.170.0", out.Harness.Version) }},
	}
	require.GreaterOrEqual(t, len(rows), 40)
	seen := map[string]bool{}
	for _, tc := range rows {
		require.False(t, seen[tc.name], "duplicate row %s", tc.name)
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			in := input(tc.doc, tc.mode, tc.method)
			if tc.mutate != nil {
				tc.mutate(&in)
			}
			out, err := Admit(in)
			if tc.code == "" {
				require.NoError(t, err)
				require.True(t, json.Valid(out.Document))
				require.True(t, json.Valid(out.Rendered))
				if tc.check != nil {
					tc.check(t, out)
				}
				return
			}
			require.Error(t, err)
			require.Equal(t, Output{}, out, "a refusal returns nothing else")
			var ae *Error
			require.True(t, errors.As(err, &ae), "error is *Error: %v", err)
			require.Equal(t, tc.code, ae.Code, ae.Message)
			require.Equal(t, tc.rule, ae.Rule(), ae.Message)
			want := map[codes.Code]int{codes.InvalidRequest: http.StatusBadRequest, codes.NotFound: http.StatusNotFound, codes.ResourceConflict: http.StatusConflict}[tc.code]
			require.Equal(t, want, ae.Status)
			require.NotEmpty(t, ae.Message)
			require.NotContains(t, ae.Message, "sk-", "messages never carry credential values")
		})
	}
}
