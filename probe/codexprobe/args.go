package codexprobe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Prompt is the probe's only model input.
const Prompt = "Reply only READY. Do not use tools."

// DisabledFeatures are switched off with --disable for every probe: the
// features `codex features list` (0.169.0) shows enabled that call the
// network outside the model provider (plugin sync, apps, updates, browser
// and computer use, model discovery, OAuth refresh, dependency installs,
// endless reconnects), and the tools that could run or fetch anything
// (shell, exec, image generation and viewing, multi-agent, goals, hooks,
// skills; shell_snapshot, which otherwise runs `bash -lc` sourcing
// ~/.bashrc at startup). Measured: with these off, `codex exec` against a custom provider
// declares at most request_user_input and connects only to the provider.
// code_mode_host stays on: disabling it makes exec emit an error item.
var DisabledFeatures = []string{
	"plugins", "apps", "remote_plugin", "unbounded_connection_retries",
	"plugin_sharing", "api_key_model_discovery", "api_key_cyber_access_programs",
	"in_app_updates", "in_app_browser", "in_app_chat", "in_app_voice", "in_app_dictation",
	"in_app_local_automation", "browser_use", "browser_use_external", "browser_use_full_cdp_access",
	"computer_use", "image_generation", "skill_mcp_dependency_install", "tool_suggest",
	"mcp_oauth_refresh_coordination", "daemon_auto_start", "workspace_dependencies",
	"shell_tool", "unified_exec", "shell_snapshot", "multi_agent", "hooks", "skill_search", "view_image", "goals",
}

// Provider is a custom Codex model provider (`model_providers.<Name>`).
// The zero value is not usable; a nil *Provider selects Codex's built-in one.
type Provider struct {
	// Name is the model_providers key ([a-z0-9_-]+).
	Name string
	// BaseURL is the Responses base, e.g. http://127.0.0.1:PORT/v1 (Codex POSTs {BaseURL}/responses).
	BaseURL string
	// RequiresOpenAIAuth makes Codex send the key LoginWithAPIKey stored in
	// CODEX_HOME/auth.json (preferred: no child environment carries the key).
	RequiresOpenAIAuth bool
	// EnvKey names the environment variable Codex reads the key from
	// (env_key mode). The probe child then necessarily carries the key in
	// its environment; prefer RequiresOpenAIAuth.
	EnvKey string
	// SupportsWebsockets lets Codex use Responses over WebSocket.
	SupportsWebsockets bool
}

var providerName = func(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

var envName = func(s string) bool {
	if s == "" || len(s) > 128 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// tomlSafe reports whether s is printable ASCII without quotes or
// backslashes, so strconv.Quote renders it as the same TOML basic string.
func tomlSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return s != "" && len(s) <= 2048
}

// validURL accepts http(s) URLs that need no escaping inside TOML strings.
func validURL(u string) bool {
	return tomlSafe(u) && (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) &&
		len(u) > len("https://")
}

// validate checks the provider is expressible without quoting surprises.
func (p *Provider) validate() error {
	if p == nil {
		return nil
	}
	switch {
	case !providerName(p.Name):
		return fmt.Errorf("%w: provider name %q", ErrConfig, p.Name)
	case !validURL(p.BaseURL):
		return fmt.Errorf("%w: provider base URL", ErrConfig)
	case p.RequiresOpenAIAuth == (p.EnvKey != ""):
		return fmt.Errorf("%w: exactly one of RequiresOpenAIAuth and EnvKey", ErrConfig)
	case p.EnvKey != "" && !envName(p.EnvKey):
		return fmt.Errorf("%w: env key name %q", ErrConfig, p.EnvKey)
	}
	return nil
}

// toml renders the provider as an inline TOML table for `-c`.
func (p *Provider) toml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{name=%s,base_url=%s,wire_api=\"responses\"", strconv.Quote(p.Name), strconv.Quote(p.BaseURL))
	if p.EnvKey != "" {
		fmt.Fprintf(&b, ",env_key=%s", strconv.Quote(p.EnvKey))
	} else {
		b.WriteString(",requires_openai_auth=true")
	}
	fmt.Fprintf(&b, ",request_max_retries=0,stream_max_retries=0,supports_websockets=%t}", p.SupportsWebsockets)
	return b.String()
}

// args builds the hardened `codex … exec` argv (docs/design/seed-001.md; docs/design/reference.md#s2-2).
// It never contains a credential.
func args(cfg *Config, model, workdir string) []string {
	a := make([]string, 0, 2*len(DisabledFeatures)+40)
	for _, f := range DisabledFeatures {
		a = append(a, "--disable", f)
	}
	a = append(a,
		"-c", "analytics.enabled=false",
		"-c", `web_search="disabled"`,
		"-c", "project_doc_max_bytes=0",
		"-c", "check_for_update_on_startup=false",
		"-c", "cli_auth_credentials_store=file",
	)
	if cfg.WorkspaceID != "" {
		a = append(a, "-c", "forced_chatgpt_workspace_id="+strconv.Quote(cfg.WorkspaceID))
	}
	if cfg.OpenAIBaseURL != "" {
		a = append(a, "-c", "openai_base_url="+strconv.Quote(cfg.OpenAIBaseURL))
	}
	if p := cfg.Provider; p != nil {
		a = append(a, "-c", "model_provider="+strconv.Quote(p.Name),
			"-c", "model_providers."+p.Name+"="+p.toml())
	}
	a = append(a, "-a", "never", "exec", "--ephemeral", "--ignore-user-config", "--ignore-rules",
		"--skip-git-repo-check", "--json", "--sandbox", "read-only", "--cd", workdir, "--model", model,
		"--", Prompt)
	return a
}

// defaultPath is the child's PATH when the supervisor has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// env builds the probe child's minimal environment: PATH, HOME, CODEX_HOME,
// RUST_LOG=error, the TLS trust variables only when set, and in env_key
// mode the provider's key variable.
func env(cfg *Config) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	e := []string{"PATH=" + path, "HOME=" + cfg.Home, "CODEX_HOME=" + cfg.CodexHome, "RUST_LOG=error"}
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			e = append(e, k+"="+v)
		}
	}
	if p := cfg.Provider; p != nil && p.EnvKey != "" && cfg.EnvKeyValue != "" {
		e = append(e, p.EnvKey+"="+cfg.EnvKeyValue)
	}
	return e
}
