package gatewayd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"oce.dev/oce/shared/status"
)

// Topology is the admitted execution topology of the Gateway container.
type Topology string

// Topologies (RUNTIME-CONTRACT: OCE_TOPOLOGY).
const (
	Embedded          Topology = "embedded"
	DedicatedCodex    Topology = "dedicated-codex"
	DedicatedOpenClaw Topology = "dedicated-openclaw"
)

// Dedicated reports a Gateway whose Harness runs elsewhere.
func (t Topology) Dedicated() bool { return t == DedicatedCodex || t == DedicatedOpenClaw }

// Defaults of the runtime contract.
const (
	DefaultPort             = 18789
	DefaultBind             = "lan"
	DefaultSecretsDir       = "/var/run/oce/secrets"
	DefaultAdmittedConfig   = "/etc/openclaw/openclaw.json"
	DefaultConfigDir        = "/home/node/.openclaw/config"
	DefaultStateDir         = "/home/node/.openclaw"
	DefaultWorkspaceDir     = "/home/node/workspace"
	DefaultNodeWorkspaceDir = "/home/node/workspace"
	DefaultAssetsSource     = "/app/skills"
	DefaultAssetsDir        = "/home/node/openclaw-runtime-assets/bundled-skills"
	// RenderedConfigName is the file gatewayd renders in the config dir.
	RenderedConfigName = "openclaw.json"
)

// Seed and reference deadlines (REFERENCE §1.3, §1.4, §5). Tests inject
// shorter ones through Policy.
const (
	MaxRespawns        = 5
	RespawnWindow      = 10 * time.Minute
	AttemptsPerRespawn = 3
	RespawnReadyWithin = 180 * time.Second
	RespawnReadyPoll   = 500 * time.Millisecond
	RespawnBackoffBase = time.Second
	OldProcessGrace    = 10 * time.Second
	PeerStatusPoll     = 2 * time.Second
	PeerPluginPoll     = 250 * time.Millisecond
	PeerWaitLogEvery   = 30 * time.Second
	// SetupRouteTimeout bounds one setup-code or node-list request to the
	// local gateway.
	SetupRouteTimeout = 30 * time.Second
	// DoctorStopBudget is what a forwarded SIGTERM gives doctor before SIGKILL.
	DoctorStopBudget = 10 * time.Second
	// AgentDatabaseSchemaVersion is OPENCLAW_AGENT_DATABASE_SCHEMA_VERSION of
	// the pinned runtime: a database below it (and above 0) needs doctor.
	AgentDatabaseSchemaVersion = 24
)

// Policy holds every deadline of the supervisor; DefaultPolicy carries the
// seed's numbers.
type Policy struct {
	MaxRespawns        int
	RespawnWindow      time.Duration
	AttemptsPerRespawn int
	ReadyWithin        time.Duration // each attempt must reach /readyz 200 within this
	ReadyPoll          time.Duration
	BackoffBase        time.Duration // backoff before attempt n is BackoffBase·2^(n−1)
	OldProcessGrace    time.Duration
	StopBudget         time.Duration // SIGTERM → SIGKILL of the gateway group
	PeerPoll           time.Duration
	PeerPluginPoll     time.Duration
	PeerWaitLogEvery   time.Duration
}

// DefaultPolicy returns the seed's policy.
func DefaultPolicy() Policy {
	return Policy{
		MaxRespawns: MaxRespawns, RespawnWindow: RespawnWindow, AttemptsPerRespawn: AttemptsPerRespawn,
		ReadyWithin: RespawnReadyWithin, ReadyPoll: RespawnReadyPoll, BackoffBase: RespawnBackoffBase,
		OldProcessGrace: OldProcessGrace, StopBudget: superviseStopBudget, PeerPoll: PeerStatusPoll,
		PeerPluginPoll: PeerPluginPoll, PeerWaitLogEvery: PeerWaitLogEvery,
	}
}

// Override applies "name=duration,…" overrides (respawnWindow, readyWithin,
// readyPoll, backoffBase, oldProcessGrace, stopBudget, peerPoll,
// peerPluginPoll, peerWaitLogEvery; maxRespawns and attempts take integers):
// OCE_GATEWAYD_POLICY, for tests and drills only.
func (p *Policy) Override(spec string) error {
	durs := map[string]*time.Duration{"respawnWindow": &p.RespawnWindow, "readyWithin": &p.ReadyWithin,
		"readyPoll": &p.ReadyPoll, "backoffBase": &p.BackoffBase, "oldProcessGrace": &p.OldProcessGrace,
		"stopBudget": &p.StopBudget, "peerPoll": &p.PeerPoll, "peerPluginPoll": &p.PeerPluginPoll,
		"peerWaitLogEvery": &p.PeerWaitLogEvery}
	ints := map[string]*int{"maxRespawns": &p.MaxRespawns, "attempts": &p.AttemptsPerRespawn}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return fmt.Errorf("%w: OCE_GATEWAYD_POLICY entry", ErrBadEnv)
		}
		if d, ok := durs[k]; ok {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				return fmt.Errorf("%w: OCE_GATEWAYD_POLICY %s", ErrBadEnv, k)
			}
			*d = x
			continue
		}
		if n, ok := ints[k]; ok {
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 {
				return fmt.Errorf("%w: OCE_GATEWAYD_POLICY %s", ErrBadEnv, k)
			}
			*n = x
			continue
		}
		return fmt.Errorf("%w: OCE_GATEWAYD_POLICY unknown %s", ErrBadEnv, k)
	}
	return nil
}

// Config is everything gatewayd needs; LoadConfig fills it from the runtime
// contract's environment and secret files.
type Config struct {
	Topology                         Topology
	NamespaceID, AgentID, RevisionID string
	StatusAddr                       string
	LogLevel                         slog.Level
	AdmittedConfig                   string // read-only admitted native configuration
	ConfigDir                        string // where the rendered config goes
	StateDir                         string
	WorkspaceDir                     string // embedded only
	NodeWorkspaceDir                 string // the workspace root on the enrolled node
	Port                             int
	Bind                             string
	PublicURL                        string
	Password                         string // gateway password (secret)
	ModelKey                         string // embedded only (secret)
	OpenAIBase, AnthropicBase        string // offline overrides of the default endpoints
	PeerStatusURL                    string
	PluginStatusKey                  []byte // secret
	AppServerURL                     string
	AppServerToken                   string // secret
	Plugins                          []string
	WorkspaceNodeID                  string
	StatusToken                      string // bearer of the coordinator routes (secret)
	OpenClawCommand                  []string
	AssetsSource, AssetsDir          string
	// NPMCache is the npm cache the codex plugin is installed from, offline
	// (dedicated Codex); empty installs nothing.
	NPMCache string
	// ChildEnv is the environment the gateway and doctor start from (secrets
	// already removed); nil means this process's environment without secrets.
	ChildEnv []string
	// ProbeCap and CgroupRoot are passed to the OpenClaw probe (tests).
	ProbeCap   time.Duration
	CgroupRoot string
	Policy     Policy
}

// Errors of a bad environment.
var (
	ErrBadTopology = errors.New("gatewayd: OCE_TOPOLOGY must be embedded, dedicated-codex or dedicated-openclaw")
	ErrBadEnv      = errors.New("gatewayd: bad environment")
	ErrNoPassword  = errors.New("gatewayd: no gateway password (secret gateway-password or OPENCLAW_GATEWAY_PASSWORD)")
)

// secretEnv are the variables that may carry secrets: they are read, then
// removed from this process's environment before anything is spawned.
var secretEnv = []string{"OPENCLAW_GATEWAY_PASSWORD", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
	"APP_SERVER_TOKEN", "CODEX_ACCESS_TOKEN", "OCE_APP_SERVER_TOKEN", "OCE_PLUGIN_STATUS_KEY"}

// LoadConfig reads the runtime contract from the environment and the secret
// files, then unsets the secret variables so no later child inherits them.
func LoadConfig() (Config, error) {
	get := os.Getenv
	c := Config{
		Topology:         Topology(get("OCE_TOPOLOGY")),
		NamespaceID:      get("OCE_NAMESPACE_ID"),
		AgentID:          get("OCE_AGENT_ID"),
		RevisionID:       get("OCE_REVISION_ID"),
		StatusAddr:       or(get("OCE_STATUS_ADDR"), status.DefaultAddr),
		AdmittedConfig:   or(get("OPENCLAW_CONFIG_PATH"), DefaultAdmittedConfig),
		ConfigDir:        or(get("OCE_GATEWAY_CONFIG_DIR"), DefaultConfigDir),
		StateDir:         or(get("OPENCLAW_STATE_DIR"), DefaultStateDir),
		WorkspaceDir:     or(get("OCE_WORKSPACE_DIR"), DefaultWorkspaceDir),
		NodeWorkspaceDir: or(get("OCE_NODE_WORKSPACE_DIR"), DefaultNodeWorkspaceDir),
		Bind:             or(get("OCE_GATEWAY_BIND"), DefaultBind),
		PublicURL:        get("OCE_GATEWAY_PUBLIC_URL"),
		OpenAIBase:       get("OCE_MODEL_PROVIDER_BASE_URL_OPENAI"),
		AnthropicBase:    get("OCE_MODEL_PROVIDER_BASE_URL_ANTHROPIC"),
		PeerStatusURL:    get("OCE_PEER_STATUS_URL"),
		AppServerURL:     get("OCE_APP_SERVER_URL"),
		WorkspaceNodeID:  get("OCE_WORKSPACE_NODE_ID"),
		AssetsSource:     or(get("OCE_RUNTIME_ASSETS_SOURCE"), DefaultAssetsSource),
		AssetsDir:        or(get("OCE_RUNTIME_ASSETS_DIR"), DefaultAssetsDir),
		NPMCache:         get("OCE_NPM_CACHE"),
		Policy:           DefaultPolicy(),
	}
	if err := c.LogLevel.UnmarshalText([]byte(or(get("OCE_LOG_LEVEL"), "info"))); err != nil {
		return c, fmt.Errorf("%w: OCE_LOG_LEVEL: %v", ErrBadEnv, err)
	}
	port, err := strconv.Atoi(or(get("OPENCLAW_GATEWAY_PORT"), strconv.Itoa(DefaultPort)))
	if err != nil || port < 1 || port > 65535 {
		return c, fmt.Errorf("%w: OPENCLAW_GATEWAY_PORT", ErrBadEnv)
	}
	c.Port = port
	if p := get("OCE_PLUGINS"); p != "" {
		for _, id := range strings.Split(p, ",") {
			if id = strings.TrimSpace(id); id != "" {
				c.Plugins = append(c.Plugins, id)
			}
		}
	}
	if pol := get("OCE_GATEWAYD_POLICY"); pol != "" {
		if err := c.Policy.Override(pol); err != nil {
			return c, err
		}
	}
	if bin := get("OCE_OPENCLAW_BIN"); bin != "" {
		c.OpenClawCommand = strings.Fields(bin)
	}
	dir := or(get("OCE_SECRETS_DIR"), DefaultSecretsDir)
	if c.Password, err = readSecret(dir, "gateway-password", "OPENCLAW_GATEWAY_PASSWORD"); err != nil {
		return c, err
	}
	if c.Topology == Embedded {
		if c.ModelKey, err = readSecret(dir, "model-api-key", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"); err != nil {
			return c, err
		}
	}
	key, err := readSecret(dir, "plugin-status-key", "OCE_PLUGIN_STATUS_KEY")
	if err != nil {
		return c, err
	}
	c.PluginStatusKey = []byte(key)
	if c.Topology == DedicatedCodex {
		if c.AppServerToken, err = readSecret(dir, "app-server-token", "APP_SERVER_TOKEN", "OCE_APP_SERVER_TOKEN"); err != nil {
			return c, err
		}
	}
	if f := get("OCE_STATUS_TOKEN_FILE"); f != "" {
		if c.StatusToken, err = readSecretFile(f); err != nil {
			return c, err
		}
	}
	for _, k := range secretEnv {
		_ = os.Unsetenv(k)
	}
	return c, c.Validate()
}

// Validate checks a Config before anything runs.
func (c *Config) Validate() error {
	switch c.Topology {
	case Embedded, DedicatedCodex, DedicatedOpenClaw:
	default:
		return ErrBadTopology
	}
	if c.Password == "" {
		return ErrNoPassword
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("%w: port", ErrBadEnv)
	}
	switch c.Bind {
	case "loopback", "lan", "auto", "tailnet", "custom":
	default:
		return fmt.Errorf("%w: OCE_GATEWAY_BIND", ErrBadEnv)
	}
	for _, u := range []string{c.PeerStatusURL, c.AppServerURL, c.PublicURL, c.OpenAIBase, c.AnthropicBase} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || p.Host == "" {
			return fmt.Errorf("%w: malformed URL", ErrBadEnv)
		}
	}
	if c.Topology == DedicatedCodex && c.AppServerURL == "" {
		return fmt.Errorf("%w: dedicated-codex needs OCE_APP_SERVER_URL", ErrBadEnv)
	}
	if c.AdmittedConfig == "" || c.ConfigDir == "" || c.StateDir == "" {
		return fmt.Errorf("%w: config and state paths", ErrBadEnv)
	}
	return nil
}

// RenderedConfigPath is where the gateway's configuration is rendered.
func (c *Config) RenderedConfigPath() string { return filepath.Join(c.ConfigDir, RenderedConfigName) }

// LocalURL is the gateway's WebSocket URL on loopback.
func (c *Config) LocalURL() string { return fmt.Sprintf("ws://127.0.0.1:%d", c.Port) }

// localHTTP is the gateway's HTTP base on loopback.
func (c *Config) localHTTP() string { return fmt.Sprintf("http://127.0.0.1:%d", c.Port) }

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
