package harnessd

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"oce.dev/oce/probe/codexprobe"
	"oce.dev/oce/shared/modelref"
)

// EndpointProvider is the model_providers key harnessd renders for a custom
// endpoint (or the test endpoint override).
const EndpointProvider = "oce-endpoint"

// Model is what harnessd needs from the admitted native configuration.
type Model struct {
	// Ref is the primary model reference (codex/… or openai/…).
	Ref modelref.Ref
	// BaseURL is the custom Responses endpoint; empty uses Codex's built-in
	// OpenAI provider.
	BaseURL string
}

// CodexModel is the model Codex is given: the part after the first slash.
func (m Model) CodexModel() string { return m.Ref.Model }

// Provider is the probe's custom provider, nil for the built-in one. The
// key reaches Codex from auth.json (requires_openai_auth), never from an
// environment variable.
func (m Model) Provider() *codexprobe.Provider {
	if m.BaseURL == "" {
		return nil
	}
	return &codexprobe.Provider{Name: EndpointProvider, BaseURL: m.BaseURL, RequiresOpenAIAuth: true}
}

// nativeDoc is the part of the OpenClaw native configuration harnessd reads.
type nativeDoc struct {
	Agents struct {
		Defaults struct {
			Model json.RawMessage `json:"model"`
		} `json:"defaults"`
	} `json:"agents"`
	Models struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
		} `json:"providers"`
	} `json:"models"`
}

// ParseNativeConfig reads the primary model and its endpoint from the
// admitted native configuration: the JSON document itself, or the path of
// a file holding it. Dedicated Codex accepts only the codex and openai
// providers (docs/design/seed-001.md); a provider with a baseUrl is a custom endpoint.
// override, when set, points a configuration without a custom endpoint at
// another Responses base URL (the offline fake provider).
func ParseNativeConfig(src, override string) (Model, error) {
	src = strings.TrimSpace(src)
	if src == "" {
		return Model{}, fmt.Errorf("%w: %s is not set", ErrConfig, EnvNativeConfig)
	}
	raw := []byte(src)
	if !strings.HasPrefix(src, "{") {
		b, err := os.ReadFile(src)
		if err != nil {
			return Model{}, fmt.Errorf("%w: native configuration unreadable", ErrConfig)
		}
		raw = b
	}
	var d nativeDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return Model{}, fmt.Errorf("%w: native configuration is not JSON", ErrConfig)
	}
	var primary string
	if err := json.Unmarshal(d.Agents.Defaults.Model, &primary); err != nil {
		var sel struct {
			Primary string `json:"primary"`
		}
		if json.Unmarshal(d.Agents.Defaults.Model, &sel) != nil || sel.Primary == "" {
			return Model{}, fmt.Errorf("%w: no agents.defaults.model", ErrConfig)
		}
		primary = sel.Primary
	}
	ref, err := modelref.Parse(primary)
	if err != nil {
		return Model{}, fmt.Errorf("%w: primary model: %w", ErrConfig, err)
	}
	if ref.Provider != "codex" && ref.Provider != "openai" {
		return Model{}, fmt.Errorf("%w: dedicated Codex accepts only the codex and openai providers", ErrConfig)
	}
	m := Model{Ref: ref}
	if p, ok := d.Models.Providers[ref.Provider]; ok {
		m.BaseURL = strings.TrimSpace(p.BaseURL)
	}
	if m.BaseURL == "" {
		m.BaseURL = strings.TrimSpace(override)
	}
	if m.BaseURL != "" && !validEndpoint(m.BaseURL) {
		return Model{}, fmt.Errorf("%w: provider baseUrl must be an http(s) URL without quotes or spaces", ErrConfig)
	}
	return m, nil
}

// validEndpoint accepts http(s) URLs that render as TOML basic strings
// without escaping.
func validEndpoint(u string) bool {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || len(u) > 2048 {
		return false
	}
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return len(u) > len("https://")
}
