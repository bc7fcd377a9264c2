package harnessd

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"oce.dev/oce/shared/atomicfile"
)

// ConfigFile is Codex's configuration under CODEX_HOME.
const ConfigFile = "config.toml"

// CodexSettings is what config.toml is rendered from.
type CodexSettings struct {
	Model Model
	// PluginsEnabled turns plugins, apps and remote plugins on: only when
	// plugins are selected and the login mode can use them.
	PluginsEnabled bool
	// WorkspaceID pins forced_chatgpt_workspace_id (service account).
	WorkspaceID string
	// OpenAIBaseURL points Codex's built-in openai provider at the offline
	// endpoint override: the gateway's codex plugin starts threads with
	// model provider "openai", whatever model_provider says.
	OpenAIBaseURL string
	// SQLiteHome moves Codex's SQLite state (thread index and history) to
	// the durable state directory, out of the ephemeral CODEX_HOME.
	SQLiteHome string
}

// tomlString renders s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// RenderCodexConfig renders the host-owned config.toml of the app-server
// (docs/design/seed-001.md, docs/design/reference.md#s1-5, docs/design/codex.md#s3): the provider from the admitted
// configuration (a custom endpoint through model_providers with
// wire_api = "responses" and the key from auth.json), analytics off,
// plugins/apps/remote_plugin off unless plugins are selected, no endless
// reconnects, no OTLP export, no logged prompts, no login shell. It carries
// no credential.
func RenderCodexConfig(s CodexSettings) (string, error) {
	model := s.Model.CodexModel()
	if model == "" || !utf8.ValidString(model) || !utf8.ValidString(s.WorkspaceID) || !utf8.ValidString(s.SQLiteHome) ||
		s.OpenAIBaseURL != "" && !validEndpoint(s.OpenAIBaseURL) {
		return "", fmt.Errorf("%w: model or workspace id not renderable", ErrConfig)
	}
	var b strings.Builder
	b.WriteString("# Rendered by harnessd at every start; edits are overwritten.\n")
	fmt.Fprintf(&b, "model = %s\n", tomlString(model))
	if s.Model.BaseURL != "" {
		fmt.Fprintf(&b, "model_provider = %s\n", tomlString(EndpointProvider))
	}
	if s.OpenAIBaseURL != "" {
		fmt.Fprintf(&b, "openai_base_url = %s\n", tomlString(s.OpenAIBaseURL))
	}
	b.WriteString("allow_login_shell = false\n")
	b.WriteString("cli_auth_credentials_store = \"file\"\n")
	b.WriteString("check_for_update_on_startup = false\n")
	if s.WorkspaceID != "" {
		fmt.Fprintf(&b, "forced_chatgpt_workspace_id = %s\n", tomlString(s.WorkspaceID))
	}
	if s.SQLiteHome != "" {
		fmt.Fprintf(&b, "sqlite_home = %s\n", tomlString(s.SQLiteHome))
	}
	b.WriteString("\n[features]\n")
	fmt.Fprintf(&b, "plugins = %t\napps = %t\nremote_plugin = %t\n", s.PluginsEnabled, s.PluginsEnabled, s.PluginsEnabled)
	b.WriteString("unbounded_connection_retries = false\n")
	b.WriteString("\n[analytics]\nenabled = false\n")
	b.WriteString("\n[otel]\nexporter = \"none\"\nlog_user_prompt = false\n")
	if s.Model.BaseURL != "" {
		fmt.Fprintf(&b, "\n[model_providers.%s]\n", EndpointProvider)
		fmt.Fprintf(&b, "name = %s\n", tomlString("OCE custom endpoint"))
		fmt.Fprintf(&b, "base_url = %s\n", tomlString(s.Model.BaseURL))
		b.WriteString("wire_api = \"responses\"\n")
		b.WriteString("requires_openai_auth = true\n")
		b.WriteString("supports_websockets = false\n")
	}
	return b.String(), nil
}

// writePrivate writes data to path with mode 0600 through a temporary file
// and a rename, so no reader sees a partial or wider-mode file.
func writePrivate(path string, data []byte) error { return atomicfile.Write(path, data, 0o600) }
