package harnessd

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/modelref"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/supervise"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustRef(t *testing.T, s string) modelref.Ref {
	r, err := modelref.Parse(s)
	require.NoError(t, err)
	return r
}

func TestRenderCodexConfigGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    CodexSettings
	}{
		{"builtin-openai", CodexSettings{Model: Model{Ref: mustRef(t, "openai/gpt-5.5")}}},
		{"custom-endpoint", CodexSettings{Model: Model{Ref: mustRef(t, "codex/vendor/org/model"), BaseURL: "https://models.example.internal/v1"}}},
		{"offline-openai-override", CodexSettings{Model: Model{Ref: mustRef(t, "openai/gpt-5.5"), BaseURL: "http://127.0.0.1:9/v1"}, OpenAIBaseURL: "http://127.0.0.1:9/v1"}},
		{"service-account-plugins", CodexSettings{Model: Model{Ref: mustRef(t, "codex/gpt-5.5")}, PluginsEnabled: true, WorkspaceID: `ws-"quoted"\id`}},
		{"durable-state", CodexSettings{Model: Model{Ref: mustRef(t, "codex/gpt-5.5")}, SQLiteHome: "/home/node/.codex-state"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderCodexConfig(tc.s)
			require.NoError(t, err)
			golden := filepath.Join("testdata", "config-"+tc.name+".toml")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), got)
			for _, must := range []string{"allow_login_shell = false", "unbounded_connection_retries = false",
				"[analytics]\nenabled = false", "exporter = \"none\"", "log_user_prompt = false"} {
				require.Contains(t, got, must)
			}
			require.Equal(t, tc.s.Model.BaseURL != "", strings.Contains(got, `wire_api = "responses"`))
			require.Equal(t, tc.s.OpenAIBaseURL != "", strings.Contains(got, "openai_base_url = "))
			require.Equal(t, tc.s.SQLiteHome != "", strings.Contains(got, "sqlite_home = "))
		})
	}
}

func TestWritePrivateMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), ConfigFile)
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	require.NoError(t, writePrivate(p, []byte("new")))
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, _ := os.ReadFile(p)
	require.Equal(t, "new", string(b))
}

func TestParseNativeConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "openclaw.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"agents":{"defaults":{"model":"openai/gpt-5.5"}}}`), 0o600))
	for _, tc := range []struct {
		name, src, override string
		ref, base           string
		err                 bool
	}{
		{"string model", `{"agents":{"defaults":{"model":"codex/gpt-5.5"}}}`, "", "codex/gpt-5.5", "", false},
		{"primary + custom endpoint", `{"agents":{"defaults":{"model":{"primary":"codex/vendor/org/model","fallbacks":["codex/x"]}}},"models":{"providers":{"codex":{"baseUrl":" https://m.example/v1 "}}}}`, "", "codex/vendor/org/model", "https://m.example/v1", false},
		{"file path", file, "", "openai/gpt-5.5", "", false},
		{"override applies without endpoint", `{"agents":{"defaults":{"model":"openai/gpt-5.5"}}}`, "http://127.0.0.1:9/v1", "openai/gpt-5.5", "http://127.0.0.1:9/v1", false},
		{"endpoint wins over override", `{"agents":{"defaults":{"model":"codex/m"}},"models":{"providers":{"codex":{"baseUrl":"https://a/v1"}}}}`, "http://127.0.0.1:9/v1", "codex/m", "https://a/v1", false},
		{"anthropic refused", `{"agents":{"defaults":{"model":"anthropic/claude"}}}`, "", "", "", true},
		{"no model", `{"agents":{}}`, "", "", "", true},
		{"empty", ``, "", "", "", true},
		{"not json", `{nope`, "", "", "", true},
		{"missing file", filepath.Join(dir, "absent.json"), "", "", "", true},
		{"quote in url", `{"agents":{"defaults":{"model":"codex/m"}},"models":{"providers":{"codex":{"baseUrl":"https://a/\"v1"}}}}`, "", "", "", true},
		{"ftp url", `{"agents":{"defaults":{"model":"codex/m"}},"models":{"providers":{"codex":{"baseUrl":"ftp://a/v1"}}}}`, "", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseNativeConfig(tc.src, tc.override)
			if tc.err {
				require.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.ref, m.Ref.String())
			require.Equal(t, tc.base, m.BaseURL)
			require.Equal(t, tc.base != "", m.Provider() != nil)
		})
	}
}

func FuzzParseNativeConfig(f *testing.F) {
	f.Add(`{"agents":{"defaults":{"model":"codex/gpt-5.5"}}}`)
	f.Add(`{"agents":{"defaults":{"model":{"primary":"codex/a/b"}}},"models":{"providers":{"codex":{"baseUrl":"https://x/v1"}}}}`)
	f.Add(`{"agents":{"defaults":{"model":"openai/\u0000"}}}`)
	f.Fuzz(func(t *testing.T, src string) {
		if !strings.HasPrefix(strings.TrimSpace(src), "{") {
			return // a path: not fuzzed
		}
		m, err := ParseNativeConfig(src, "")
		if err != nil {
			return
		}
		// Whatever parses must render a config.toml without error, and the
		// endpoint must never break out of its TOML string.
		out, err := RenderCodexConfig(CodexSettings{Model: m})
		if err != nil {
			return
		}
		if m.BaseURL != "" {
			require.Contains(t, out, "base_url = \""+m.BaseURL+"\"\n")
		}
	})
}

func TestClassifyLogin(t *testing.T) {
	for _, tc := range []struct {
		out      string
		timedOut bool
		code     codes.Code
		class    codes.FailureClass
	}{
		{"Error: unexpected status 401 Unauthorized", false, codes.AuthenticationFailed, codes.ClassAuth},
		{"server answered 403 Forbidden", false, codes.AuthenticationFailed, codes.ClassAuth},
		{"failed to decode agent identity JWT: invalid agent identity JWT format", false, codes.LoginFailed, codes.ClassUnknown},
		{"No API key provided via stdin.", false, codes.LoginFailed, codes.ClassUnknown},
		{"", true, codes.LoginFailed, codes.ClassTimeout},
		{"port 4010 busy", false, codes.LoginFailed, codes.ClassUnknown},
	} {
		code, class := ClassifyLogin([]byte(tc.out), tc.timedOut)
		require.Equal(t, tc.code, code, tc.out)
		require.Equal(t, tc.class, class, tc.out)
	}
}

// fakeRun scripts `codex login` results.
type fakeRun struct {
	results []supervise.RunResult
	errs    []error
	specs   []supervise.RunSpec
}

func (f *fakeRun) run(_ context.Context, rs supervise.RunSpec) (supervise.RunResult, error) {
	i := len(f.specs)
	f.specs = append(f.specs, rs)
	return f.results[i], f.errs[i]
}

func TestLoginAttempts(t *testing.T) {
	ok := supervise.RunResult{Status: supervise.ExitStatus{Exited: true}}
	fail401 := supervise.RunResult{Status: supervise.ExitStatus{Exited: true, Code: 1}, Stderr: []byte("Error: 401 Unauthorized")}
	failOther := supervise.RunResult{Status: supervise.ExitStatus{Exited: true, Code: 1}, Stderr: []byte("invalid credential JSON")}
	timeout := supervise.RunResult{TimedOut: true, Status: supervise.ExitStatus{Signal: 9}}
	for _, tc := range []struct {
		name    string
		mode    string
		results []supervise.RunResult
		errs    []error
		runs    int
		code    codes.Code
	}{
		{"api key ok", LoginAPIKey, []supervise.RunResult{ok}, []error{nil}, 1, ""},
		{"api key failure is not retried", LoginAPIKey, []supervise.RunResult{failOther}, []error{nil}, 1, codes.LoginFailed},
		{"api key timeout is not retried", LoginAPIKey, []supervise.RunResult{timeout}, []error{supervise.ErrTimeout}, 1, codes.LoginFailed},
		{"token 401", LoginCodexPAT, []supervise.RunResult{fail401}, []error{nil}, 1, codes.AuthenticationFailed},
		{"token other failure not retried", LoginCodexPAT, []supervise.RunResult{failOther}, []error{nil}, 1, codes.LoginFailed},
		{"token timeout retried then ok", LoginCodexPAT, []supervise.RunResult{timeout, timeout, ok}, []error{supervise.ErrTimeout, supervise.ErrTimeout, nil}, 3, ""},
		{"token three timeouts", LoginServiceAccount, []supervise.RunResult{timeout, timeout, timeout}, []error{supervise.ErrTimeout, supervise.ErrTimeout, supervise.ErrTimeout}, 3, codes.LoginFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{LoginMode: tc.mode, APIKey: "sk-test-key-1", AccessToken: "at-test-token", WorkspaceID: "ws-1", Codex: "/bin/codex", CodexHome: "/h"}
			f := &fakeRun{results: tc.results, errs: tc.errs}
			var logBuf strings.Builder
			err := login(context.Background(), f.run, cfg, []string{"PATH=/bin"}, logging.New(&logBuf, nil, "t"))
			require.Len(t, f.specs, tc.runs)
			if tc.code == "" {
				require.NoError(t, err)
			} else {
				require.Equal(t, tc.code, phase.CodeOf(err))
				require.Equal(t, PhaseCodexLogin, phase.CheckOf(err, ""))
			}
			for _, rs := range f.specs {
				joined := strings.Join(append(append([]string{}, rs.Args...), rs.Env...), " ")
				require.NotContains(t, joined, "sk-test-key-1")
				require.NotContains(t, joined, "at-test-token")
				require.Equal(t, LoginAttemptTimeout, rs.Timeout)
				if tc.mode == LoginAPIKey {
					require.Equal(t, "sk-test-key-1\n", string(rs.Stdin))
					require.Contains(t, rs.Args, "--with-api-key")
				} else {
					require.Equal(t, "at-test-token\n", string(rs.Stdin))
					require.Contains(t, rs.Args, "--with-access-token")
				}
				require.Equal(t, tc.mode == LoginServiceAccount, strings.Contains(joined, `forced_chatgpt_workspace_id="ws-1"`))
			}
			require.NotContains(t, logBuf.String(), "Unauthorized", "raw login output is never logged")
		})
	}
}

func env(m map[string]string) environ {
	return environ{get: func(k string) (string, bool) { v, ok := m[k]; return v, ok }}
}

func TestLoadConfigAndValidateLogin(t *testing.T) {
	secrets := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(secrets, SecretAPIKey), []byte("sk-from-file-123\n"), 0o400))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, SecretAppServerToken), []byte("tok-from-file"), 0o600))
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check string
		code  codes.Code
	}{
		{"api key from file", map[string]string{EnvLoginMode: "api_key", EnvSecretsDir: secrets}, "", ""},
		{"api key missing", map[string]string{EnvLoginMode: "api_key", EnvSecretsDir: t.TempDir(), EnvAppServerToken: "t0ken"}, PhaseCodexLogin, codes.LoginFailed},
		{"no mode", map[string]string{EnvSecretsDir: secrets}, PhaseCodexLogin, codes.LoginFailed},
		{"unknown mode", map[string]string{EnvLoginMode: "oauth2", EnvSecretsDir: secrets}, PhaseCodexLogin, codes.LoginFailed},
		{"pat without prefix", map[string]string{EnvLoginMode: "codex_pat", EnvAccessToken: "pat-123456", EnvSecretsDir: secrets}, PhaseCodexLogin, codes.LoginFailed},
		{"pat ok", map[string]string{EnvLoginMode: "codex_pat", EnvAccessToken: "at-123456", EnvSecretsDir: secrets}, "", ""},
		{"service account needs workspace", map[string]string{EnvLoginMode: "chatgpt_service_account", EnvAccessToken: "at-123456", EnvSecretsDir: secrets}, PhaseCodexLogin, codes.LoginFailed},
		{"service account ok", map[string]string{EnvLoginMode: "chatgpt_service_account", EnvAccessToken: "at-123456", EnvWorkspaceID: "ws", EnvSecretsDir: secrets}, "", ""},
		{"no app-server token", map[string]string{EnvLoginMode: "api_key", EnvAPIKey: "sk-abcdef", EnvSecretsDir: t.TempDir()}, PhaseNativeSpawn, codes.Unavailable},
		{"bad port", map[string]string{EnvLoginMode: "api_key", EnvSecretsDir: secrets, EnvAppServerPort: "99999"}, PhaseNativeSpawn, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(env(tc.env))
			if err == nil {
				err = cfg.validateLogin()
			}
			if tc.code == "" {
				require.NoError(t, err)
				require.NotEmpty(t, cfg.AppServerToken)
				return
			}
			require.Error(t, err)
			require.Equal(t, tc.code, phase.CodeOf(err))
			require.Equal(t, tc.check, phase.CheckOf(err, ""))
		})
	}
	cfg, err := loadConfig(env(map[string]string{EnvLoginMode: "api_key", EnvSecretsDir: secrets, EnvPlugins: " a, ,b ", EnvLogLevel: "LOUD"}))
	require.NoError(t, err)
	require.Equal(t, "sk-from-file-123", cfg.APIKey)
	require.Equal(t, []string{"a", "b"}, cfg.Plugins)
	require.Equal(t, "info", cfg.LogLevel)
	require.Equal(t, DefaultAppServerPort, cfg.AppServerPort)
	require.True(t, logging.DefaultRedactor().Contains("key sk-from-file-123 here"), "secrets are registered for scrubbing at once")
}

// LoadConfig unsets every credential variable; children built afterwards
// carry none, and harnessd's own contract variables stay out of them.
func TestCredentialEnvScrubbed(t *testing.T) {
	for _, k := range CredentialEnv {
		t.Setenv(k, "secret-value-"+k)
	}
	t.Setenv(EnvLoginMode, "api_key")
	t.Setenv(EnvSecretsDir, t.TempDir())
	t.Setenv("OCE_AGENT_ID", "agent-1")
	t.Setenv("SSL_CERT_FILE", "/etc/ssl/cert.pem")
	cfg, err := LoadConfig()
	require.NoError(t, err)
	require.Equal(t, "secret-value-OPENAI_API_KEY", cfg.APIKey)
	for _, k := range CredentialEnv {
		_, ok := os.LookupEnv(k)
		require.False(t, ok, k)
	}
	h := &harness{cfg: Config{CodexHome: "/h", LogLevel: "warn"}}
	app := strings.Join(h.appEnv(), "\n")
	login := strings.Join(h.loginEnv(), "\n")
	for _, e := range []string{app, login} {
		require.NotContains(t, e, "secret-value")
		require.NotContains(t, e, "OCE_AGENT_ID")
		require.NotContains(t, e, EnvLoginMode)
		require.Contains(t, e, "CODEX_HOME=/h")
	}
	require.Contains(t, app, "LOG_FORMAT=json")
	require.Contains(t, app, "RUST_LOG=warn,codex_otel=off")
	require.Contains(t, login, "SSL_CERT_FILE=/etc/ssl/cert.pem")
	args := strings.Join(appArgs("0.0.0.0", 18790, "/run/tok"), " ")
	require.Equal(t, `app-server --listen ws://0.0.0.0:18790 --ws-auth capability-token --ws-token-file /run/tok -c otel.exporter="none" -c otel.log_user_prompt=false -c allow_login_shell=false`, args)
}

// An offline override that cannot be a TOML basic string without escaping
// is refused, never rendered.
func TestRenderCodexConfigRejectsBadOpenAIBase(t *testing.T) {
	for _, u := range []string{"ftp://x/v1", "http://x/v1\" evil", "http://a b/v1"} {
		_, err := RenderCodexConfig(CodexSettings{Model: Model{Ref: mustRef(t, "openai/gpt-5.5")}, OpenAIBaseURL: u})
		require.ErrorIs(t, err, ErrConfig, u)
	}
}
