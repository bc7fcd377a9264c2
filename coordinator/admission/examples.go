package admission

import "oce.dev/oce/shared/contract"

// Realistic native configuration documents that admit under the Kubernetes
// Compute driver (KubernetesAuthSupport) with harnessAuth api_key. API and
// end-to-end tests use them as fixtures.
const (
	// ExampleEmbeddedAnthropic: embedded OpenClaw on the built-in anthropic
	// provider, which needs no runtime policy. It also carries the retired
	// logging.redactSensitive key that admission removes.
	ExampleEmbeddedAnthropic = `{
  "agents": {
    "defaults": {
      "model": {"primary": "anthropic/claude-sonnet-4-6", "fallbacks": ["anthropic/claude-haiku-4-5"]},
      "maxConcurrent": 4
    }
  },
  "gateway": {"mode": "local"},
  "logging": {"level": "debug", "redactSensitive": "tools"}
}`

	// ExampleEmbeddedOpenAI: embedded OpenClaw on openai, which is ambiguous
	// and therefore carries an explicit openclaw runtime policy.
	ExampleEmbeddedOpenAI = `{
  "agents": {
    "defaults": {
      "model": {"primary": "openai/gpt-5.5", "fallbacks": ["openai/gpt-5.5-mini"]},
      "models": {
        "openai/gpt-5.5": {"alias": "main", "agentRuntime": {"id": "openclaw"}},
        "openai/gpt-5.5-mini": {"agentRuntime": {"id": "openclaw"}}
      }
    }
  },
  "gateway": {"mode": "local"}
}`

	// ExampleDedicatedCodex: dedicated Codex on the native codex provider; the
	// gateway reaches the Codex app-server through the codex plugin over
	// WebSocket.
	ExampleDedicatedCodex = `{
  "agents": {
    "defaults": {
      "model": "codex/gpt-5.5",
      "models": {"codex/gpt-5.5": {"agentRuntime": {"id": "codex"}}}
    }
  },
  "plugins": {"entries": {"codex": {"enabled": true, "config": {"appServer": {"transport": "websocket"}}}}},
  "gateway": {"mode": "local"}
}`

	// ExampleDedicatedCodexOpenAI: dedicated Codex on the openai provider,
	// allowed because the codex plugin is enabled with websocket transport.
	ExampleDedicatedCodexOpenAI = `{
  "agents": {
    "defaults": {
      "model": "openai/gpt-5.5",
      "models": {"openai/gpt-5.5": {"agentRuntime": {"id": "codex"}}}
    }
  },
  "plugins": {"entries": {"codex": {"enabled": true, "config": {"appServer": {"transport": "websocket"}}}}},
  "gateway": {"mode": "local"}
}`

	// ExampleCustomEndpoint: dedicated Codex on a custom OpenAI-compatible
	// endpoint configured as models.providers.codex. The stored document keeps
	// codex/vendor/org/model; Output.Rendered carries
	// codex/openai-compatible/vendor/org/model.
	ExampleCustomEndpoint = `{
  "agents": {
    "defaults": {
      "model": {"primary": "codex/vendor/org/model", "fallbacks": ["codex/vendor/org/model-mini"]}
    }
  },
  "models": {
    "providers": {
      "codex": {
        "baseUrl": "https://models.example.internal/v1",
        "api": "openai-responses",
        "agentRuntime": {"id": "codex"},
        "models": [
          {"id": "vendor/org/model", "name": "Org model", "contextWindow": 200000},
          {"id": "codex/vendor/org/model-mini", "name": "Org model mini"}
        ]
      }
    }
  },
  "plugins": {"entries": {"codex": {"enabled": true, "config": {"appServer": {"transport": "websocket"}}}}},
  "gateway": {"mode": "local"}
}`

	// ExampleDedicatedOpenClaw: dedicated native OpenClaw on openai; admits
	// only with Installation.NativeWorkerSupport and a SandboxDriver.
	ExampleDedicatedOpenClaw = `{
  "agents": {
    "defaults": {
      "model": "openai/gpt-5.5",
      "models": {"openai/gpt-5.5": {"agentRuntime": {"id": "openclaw"}}}
    }
  },
  "gateway": {"mode": "local"}
}`
)

// Example names one example document and the topology it admits to.
type Example struct {
	Name     string
	Document string
	Topology contract.Topology
}

// Examples lists every Example* document with its topology.
func Examples() []Example {
	return []Example{
		{"embedded-anthropic", ExampleEmbeddedAnthropic, contract.Embedded},
		{"embedded-openai", ExampleEmbeddedOpenAI, contract.Embedded},
		{"dedicated-codex", ExampleDedicatedCodex, contract.DedicatedCodex},
		{"dedicated-codex-openai", ExampleDedicatedCodexOpenAI, contract.DedicatedCodex},
		{"custom-endpoint", ExampleCustomEndpoint, contract.DedicatedCodex},
		{"dedicated-openclaw", ExampleDedicatedOpenClaw, contract.DedicatedOpenClaw},
	}
}
