package harnessd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/secretfile"
	"oce.dev/oce/shared/status"
)

// Login modes (CODEX_LOGIN_MODE, docs/design/reference.md#s3).
const (
	LoginAPIKey         = contract.LoginAPIKey
	LoginCodexPAT       = contract.LoginCodexPAT
	LoginServiceAccount = contract.LoginServiceAccount
)

// AccessTokenPrefix starts every Codex access token (codex_pat, service account).
const AccessTokenPrefix = "at-"

// Environment variables harnessd reads (shared/contract, docs/RUNTIME-CONTRACT.md).
const (
	EnvLoginMode        = contract.EnvCodexLoginMode
	EnvAPIKey           = contract.EnvOpenAIAPIKey
	EnvAccessToken      = contract.EnvCodexAccessToken
	EnvWorkspaceID      = contract.EnvCodexWorkspaceID
	EnvCodexHome        = contract.EnvCodexHome
	EnvCodexState       = contract.EnvCodexStateDir
	EnvWorkspace        = contract.EnvWorkspaceDir
	EnvNativeConfig     = contract.EnvNativeConfig
	EnvAppServerPort    = contract.EnvAppServerPort
	EnvAppServerBind    = contract.EnvAppServerBind
	EnvAppServerToken   = contract.EnvAppServerToken
	EnvPodUID           = contract.EnvPodUID
	EnvPlugins          = contract.EnvPlugins
	EnvStatusAddr       = contract.EnvStatusAddr
	EnvLogLevel         = contract.EnvLogLevel
	EnvSecretsDir       = contract.EnvSecretsDir
	EnvRevisionID       = contract.EnvRevisionID
	EnvNodehostBin      = contract.EnvNodehostBin
	EnvNodehostState    = contract.EnvNodehostStateDir
	EnvNodehostEnroll   = contract.EnvNodehostEnrollment
	EnvNodehostIdentity = contract.EnvNodehostIdentity
	EnvNodehostGateway  = contract.EnvNodehostGatewayURL
	EnvCodexBin         = contract.EnvCodexBin
	EnvProviderOverride = contract.EnvProviderBaseURLOpenAI
)

// Secret file names in OCE_SECRETS_DIR.
const (
	SecretAPIKey          = contract.SecretOpenAIAPIKey
	SecretAccessToken     = contract.SecretCodexAccessToken
	SecretAppServerToken  = contract.SecretAppServerToken
	SecretPluginStatusKey = contract.SecretPluginStatusKey
)

// Defaults (in-container paths, docs/design/reference.md#s1-5).
const (
	DefaultCodexHome     = contract.PathCodexHome
	DefaultWorkspace     = contract.PathWorkspace
	DefaultAppServerPort = contract.AppServerPort
	DefaultAppServerBind = contract.AppServerBindAll
	DefaultSecretsDir    = contract.PathSecretsDir
)

// CredentialEnv names every variable that can carry a credential; all are
// removed from harnessd's environment as soon as the configuration is read,
// before any child is spawned (docs/design/reference.md#s3).
var CredentialEnv = []string{
	EnvAPIKey, EnvAccessToken, EnvAppServerToken, contract.EnvCodexAPIKey, contract.EnvAnthropicAPIKey,
	contract.EnvGatewayPassword, contract.EnvPluginStatusKey,
}

// ErrConfig reports a configuration harnessd cannot start with.
var ErrConfig = errors.New("harnessd: bad configuration")

// Config is harnessd's input, read from the environment and secret files.
type Config struct {
	LoginMode   string
	APIKey      string // api_key mode
	AccessToken string // codex_pat / service account
	WorkspaceID string // service account

	CodexHome     string // ephemeral: login state, emptied at every start
	CodexStateDir string // durable thread history ("" keeps it in CODEX_HOME)
	Workspace     string
	Codex         string // codex binary

	Model Model // from OCE_NATIVE_CONFIG

	AppServerBind  string
	AppServerPort  int
	AppServerToken string

	StatusAddr      string
	RevisionID      string
	PodUID          string
	PluginStatusKey []byte
	Plugins         []string
	LogLevel        string

	NodehostBin        string
	NodehostStateDir   string
	NodehostEnrollment string
	// NodehostIdentity is the node identity the coordinator provisioned
	// (contract.EnvNodehostIdentity), handed to nodehost like the
	// enrollment file.
	NodehostIdentity   string
	NodehostGatewayURL string

	TmpDir string
}

// environ abstracts the process environment for tests.
type environ struct {
	get func(string) (string, bool)
}

func (e environ) str(k, def string) string {
	if v, ok := e.get(k); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

// secret reads a credential from its environment variable, else from its
// file in the secrets directory (the shared rule of package secretfile:
// owner-only, or group-readable as kubelet delivers it). Whatever is found is
// registered with the log redactor at once.
func secret(e environ, dir, envName, file string) (string, error) {
	v, ok := e.get(envName)
	if !ok || strings.TrimSpace(v) == "" {
		fv, err := secretfile.Read(filepath.Join(dir, file))
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "", nil
		case err != nil:
			return "", fmt.Errorf("%w: secret %s unreadable: %w", ErrConfig, file, err)
		}
		v = fv
	}
	v = strings.TrimSpace(v)
	logging.Scrub(v)
	return v, nil
}

// LoadConfig reads the configuration from the process environment and the
// secrets directory, then removes every credential variable from the
// process environment. Errors are *phase.CodedError with LOGIN_FAILED (login
// environment) or UNAVAILABLE (everything else), checked before any process
// starts.
func LoadConfig() (Config, error) {
	cfg, err := loadConfig(environ{get: os.LookupEnv})
	for _, k := range CredentialEnv {
		_ = os.Unsetenv(k)
	}
	return cfg, err
}

func loadConfig(e environ) (Config, error) {
	cfg := Config{
		LoginMode:          e.str(EnvLoginMode, ""),
		WorkspaceID:        e.str(EnvWorkspaceID, ""),
		CodexHome:          e.str(EnvCodexHome, DefaultCodexHome),
		CodexStateDir:      e.str(EnvCodexState, ""),
		Workspace:          e.str(EnvWorkspace, DefaultWorkspace),
		Codex:              e.str(EnvCodexBin, "codex"),
		AppServerBind:      e.str(EnvAppServerBind, DefaultAppServerBind),
		StatusAddr:         e.str(EnvStatusAddr, status.DefaultAddr),
		RevisionID:         e.str(EnvRevisionID, ""),
		PodUID:             e.str(EnvPodUID, ""),
		LogLevel:           e.str(EnvLogLevel, "info"),
		NodehostBin:        e.str(EnvNodehostBin, "nodehost"),
		NodehostStateDir:   e.str(EnvNodehostState, ""),
		NodehostEnrollment: e.str(EnvNodehostEnroll, ""),
		NodehostIdentity:   e.str(EnvNodehostIdentity, ""),
		NodehostGatewayURL: e.str(EnvNodehostGateway, ""),
		TmpDir:             e.str(contract.EnvTmpDir, os.TempDir()),
	}
	dir := e.str(EnvSecretsDir, DefaultSecretsDir)
	var err error
	// Read every secret first, so each is scrubbed from logs whatever fails next.
	if cfg.APIKey, err = secret(e, dir, EnvAPIKey, SecretAPIKey); err != nil {
		return cfg, phase.FailCheck(PhaseCodexLogin, codes.LoginFailed, err)
	}
	if cfg.AccessToken, err = secret(e, dir, EnvAccessToken, SecretAccessToken); err != nil {
		return cfg, phase.FailCheck(PhaseCodexLogin, codes.LoginFailed, err)
	}
	if cfg.AppServerToken, err = secret(e, dir, EnvAppServerToken, SecretAppServerToken); err != nil {
		return cfg, phase.FailCheck(PhaseNativeSpawn, codes.Unavailable, err)
	}
	key, err := secret(e, dir, contract.EnvPluginStatusKey, SecretPluginStatusKey)
	if err != nil {
		return cfg, phase.FailCheck(PhasePluginInstall, codes.Unavailable, err)
	}
	cfg.PluginStatusKey = []byte(key)

	switch lvl := strings.ToLower(cfg.LogLevel); lvl {
	case "debug", "info", "warn", "error":
		cfg.LogLevel = lvl
	default:
		cfg.LogLevel = "info"
	}
	if v := e.str(EnvPlugins, ""); v != "" {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				cfg.Plugins = append(cfg.Plugins, p)
			}
		}
	}
	cfg.AppServerPort = DefaultAppServerPort
	if v := e.str(EnvAppServerPort, ""); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > 65535 {
			return cfg, phase.FailCheck(PhaseNativeSpawn, codes.Unavailable, fmt.Errorf("%w: %s must be a port", ErrConfig, EnvAppServerPort))
		}
		cfg.AppServerPort = n
	}
	return cfg, nil
}

// validateLogin is the first startup step: the login mode and the
// credential it needs, checked before anything is spawned.
func (cfg *Config) validateLogin() error {
	fail := func(format string, a ...any) error {
		return phase.FailCheck(PhaseCodexLogin, codes.LoginFailed, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...))
	}
	switch cfg.LoginMode {
	case LoginAPIKey:
		if cfg.APIKey == "" {
			return fail("api_key login needs %s", EnvAPIKey)
		}
	case LoginCodexPAT, LoginServiceAccount:
		if cfg.AccessToken == "" {
			return fail("%s login needs %s", cfg.LoginMode, EnvAccessToken)
		}
		if !strings.HasPrefix(cfg.AccessToken, AccessTokenPrefix) {
			return fail("%s must start with %q", EnvAccessToken, AccessTokenPrefix)
		}
		if cfg.LoginMode == LoginServiceAccount && cfg.WorkspaceID == "" {
			return fail("chatgpt_service_account login needs %s", EnvWorkspaceID)
		}
	case "":
		return fail("%s is not set", EnvLoginMode)
	default:
		return fail("unknown %s (want api_key, codex_pat or chatgpt_service_account)", EnvLoginMode)
	}
	if cfg.AppServerToken == "" {
		return phase.FailCheck(PhaseNativeSpawn, codes.Unavailable, fmt.Errorf("%w: no app-server token", ErrConfig))
	}
	return nil
}
