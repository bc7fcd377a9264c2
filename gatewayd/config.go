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

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/status"
)

// Defaults of the runtime contract (the image's layout).
const (
	DefaultPort             = contract.GatewayPort
	DefaultBind             = contract.BindLAN
	DefaultSecretsDir       = contract.PathSecretsDir
	DefaultAdmittedConfig   = contract.PathAdmittedConfig
	DefaultConfigDir        = contract.PathGatewayConfigDir
	DefaultStateDir         = contract.PathOpenClawState
	DefaultWorkspaceDir     = contract.PathWorkspace
	DefaultNodeWorkspaceDir = contract.PathWorkspace
	DefaultAssetsSource     = contract.PathAssetsSource
	DefaultAssetsDir        = contract.PathAssetsDir
	// RenderedConfigName is the file gatewayd renders in the config dir.
	RenderedConfigName = "openclaw.json"
)

// Seed and reference deadlines (docs/design/reference.md#s1-3, docs/design/reference.md#s1-4, docs/design/reference.md#s5). Tests inject
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
	// ChatRouteTimeout bounds one relayed turn (contract.RouteChat).
	ChatRouteTimeout = 10 * time.Minute
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
	Topology                         contract.Topology
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
	// CompileCache is a Node compile-cache base filled beforehand
	// (contract.EnvCompileCache); empty when there is none.
	CompileCache string
	// ChildEnv is the environment the gateway and doctor start from (secrets
	// already removed); nil means this process's environment without secrets.
	ChildEnv []string
	// ProbeOnly runs the model probe alone (contract.EnvModelProbeOnly);
	// ProbePassedAt is when it passed before cutover
	// (contract.EnvModelProbePassedAt), zero when it did not.
	ProbeOnly     bool
	ProbePassedAt time.Time
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
var secretEnv = []string{contract.EnvGatewayPassword, contract.EnvOpenAIAPIKey, contract.EnvAnthropicAPIKey,
	contract.EnvAppServerToken, contract.EnvCodexAccessToken, contract.EnvAppServerTokenOCE, contract.EnvPluginStatusKey}

// LoadConfig reads the runtime contract from the environment and the secret
// files, then unsets the secret variables so no later child inherits them.
func LoadConfig() (Config, error) {
	get := os.Getenv
	c := Config{
		Topology:         contract.Topology(get(contract.EnvTopology)),
		NamespaceID:      get(contract.EnvNamespaceID),
		AgentID:          get(contract.EnvAgentID),
		RevisionID:       get(contract.EnvRevisionID),
		StatusAddr:       or(get(contract.EnvStatusAddr), status.DefaultAddr),
		AdmittedConfig:   or(get(contract.EnvAdmittedConfig), DefaultAdmittedConfig),
		ConfigDir:        or(get(contract.EnvGatewayConfigDir), DefaultConfigDir),
		StateDir:         or(get(contract.EnvOpenClawStateDir), DefaultStateDir),
		WorkspaceDir:     or(get(contract.EnvWorkspaceDir), DefaultWorkspaceDir),
		NodeWorkspaceDir: or(get(contract.EnvNodeWorkspaceDir), DefaultNodeWorkspaceDir),
		Bind:             or(get(contract.EnvGatewayBind), DefaultBind),
		PublicURL:        get(contract.EnvGatewayPublicURL),
		OpenAIBase:       get(contract.EnvProviderBaseURLOpenAI),
		AnthropicBase:    get(contract.EnvProviderBaseURLAnthropic),
		PeerStatusURL:    get(contract.EnvPeerStatusURL),
		AppServerURL:     get(contract.EnvAppServerURL),
		WorkspaceNodeID:  get(contract.EnvWorkspaceNodeID),
		AssetsSource:     or(get(contract.EnvRuntimeAssetsSrc), DefaultAssetsSource),
		AssetsDir:        or(get(contract.EnvRuntimeAssetsDir), DefaultAssetsDir),
		NPMCache:         get(contract.EnvNPMCache),
		CompileCache:     get(contract.EnvCompileCache),
		Policy:           DefaultPolicy(),
	}
	if err := c.LogLevel.UnmarshalText([]byte(or(get(contract.EnvLogLevel), "info"))); err != nil {
		return c, fmt.Errorf("%w: OCE_LOG_LEVEL: %v", ErrBadEnv, err)
	}
	port, err := strconv.Atoi(or(get(contract.EnvGatewayPort), strconv.Itoa(DefaultPort)))
	if err != nil || port < 1 || port > 65535 {
		return c, fmt.Errorf("%w: OPENCLAW_GATEWAY_PORT", ErrBadEnv)
	}
	c.Port = port
	if p := get(contract.EnvPlugins); p != "" {
		for _, id := range strings.Split(p, ",") {
			if id = strings.TrimSpace(id); id != "" {
				c.Plugins = append(c.Plugins, id)
			}
		}
	}
	if pol := get(contract.EnvGatewaydPolicy); pol != "" {
		if err := c.Policy.Override(pol); err != nil {
			return c, err
		}
	}
	if err := c.loadProbeEnv(get); err != nil {
		return c, err
	}
	if bin := get(contract.EnvOpenClawBin); bin != "" {
		c.OpenClawCommand = strings.Fields(bin)
	}
	dir := or(get(contract.EnvSecretsDir), DefaultSecretsDir)
	if c.Password, err = readSecret(dir, contract.SecretGatewayPassword, contract.EnvGatewayPassword); err != nil {
		return c, err
	}
	if c.Topology == contract.Embedded {
		if c.ModelKey, err = readSecret(dir, contract.SecretModelAPIKey, contract.EnvOpenAIAPIKey, contract.EnvAnthropicAPIKey); err != nil {
			return c, err
		}
	}
	key, err := readSecret(dir, contract.SecretPluginStatusKey, contract.EnvPluginStatusKey)
	if err != nil {
		return c, err
	}
	c.PluginStatusKey = []byte(key)
	if c.Topology == contract.DedicatedCodex {
		if c.AppServerToken, err = readSecret(dir, contract.SecretAppServerToken, contract.EnvAppServerToken, contract.EnvAppServerTokenOCE); err != nil {
			return c, err
		}
	}
	if f := get(contract.EnvStatusTokenFile); f != "" {
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
	if !c.Topology.Valid() {
		return ErrBadTopology
	}
	if c.Password == "" {
		return ErrNoPassword
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("%w: port", ErrBadEnv)
	}
	switch c.Bind {
	case contract.BindLoopback, contract.BindLAN, "auto", "tailnet", "custom":
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
	if c.Topology == contract.DedicatedCodex && c.AppServerURL == "" {
		return fmt.Errorf("%w: dedicated-codex needs OCE_APP_SERVER_URL", ErrBadEnv)
	}
	if c.AdmittedConfig == "" || c.ConfigDir == "" || c.StateDir == "" {
		return fmt.Errorf("%w: config and state paths", ErrBadEnv)
	}
	return c.validateProbe()
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
