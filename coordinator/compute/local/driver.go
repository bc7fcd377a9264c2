// Package local is the compute.Driver of the embedded default: it realizes
// each AgentRevision as local processes started from the same build —
// embedded OpenClaw as gatewayd (→ openclaw gateway with the built-in
// Harness), dedicated Codex as gatewayd plus harnessd (→ codex app-server,
// nodehost as the companion workspace node) — following
// docs/RUNTIME-CONTRACT.md the way the Kubernetes driver renders Pods.
//
// Every revision has private directories under the data root, its own
// loopback ports and mode-0600 secret files; supervisors run under tini in
// their own process groups. Readiness and held failures are read from the
// supervisors' status servers. The Agent's stable endpoint is a Unix socket
// (reachable from outside the runtimes' network namespace) that the driver
// forwards to the active revision's gateway.
//
// Runtimes must run inside a loopback-only network namespace: New refuses
// otherwise unless Config.AllowHostNetwork is set.
package local

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// Name is the default driver name (a revision's ComputeID).
const Name = "local"

// Deadlines carrying the seeds' and the reference's numbers.
const (
	// GatewayStopWait bounds the wait for a Gateway to be gone: the pinned
	// runtime's 330 s service stop budget plus 10 s (docs/design/reference.md#s5-3).
	GatewayStopWait = 340 * time.Second
	// HarnessStopWait bounds the wait for a Harness (docs/design/reference.md#s5-3).
	HarnessStopWait = 120 * time.Second
	// LeftoverGrace is how long processes that outlived their stopped
	// supervisor get before SIGKILL.
	LeftoverGrace = 2 * time.Second
	// StopPollInterval is how often a stop checks whether processes are gone.
	StopPollInterval = 50 * time.Millisecond
	// StatusTimeout bounds one status-server request of an observation.
	StatusTimeout = 2 * time.Second
	// SetupCodeTimeout bounds one setup-code or node-list request; the
	// supervisor itself allows 30 s (gatewayd SetupRouteTimeout).
	SetupCodeTimeout = 35 * time.Second
)

// Sentinel errors callers branch on; the driver wraps them in compute.Error
// with codes of shared/codes.
var (
	ErrNotIsolated   = errors.New("local: runtimes would share the host network")
	ErrUnsupported   = errors.New("local: unsupported topology")
	ErrInvalidTarget = errors.New("local: invalid target")
	ErrCredentials   = errors.New("local: harness credential unavailable")
)

// Binaries are the oce supervisors the driver starts, from the same build.
type Binaries struct {
	Gatewayd string
	Harnessd string
	Nodehost string
}

// BinariesIn returns the supervisors' paths in dir.
func BinariesIn(dir string) Binaries {
	return Binaries{Gatewayd: filepath.Join(dir, "gatewayd"), Harnessd: filepath.Join(dir, "harnessd"),
		Nodehost: filepath.Join(dir, "nodehost")}
}

// Credentials resolves a revision's harnessAuth binding (see compute.Credentials).
type Credentials = compute.Credentials

// CredentialsFunc adapts a function to Credentials.
type CredentialsFunc = compute.CredentialsFunc

// Config configures the driver. Zero durations take the constants above.
type Config struct {
	// Name is the driver name; default Name.
	Name string
	// DataDir is the root of every runtime directory (created 0700).
	DataDir string
	// Binaries are gatewayd, harnessd and nodehost.
	Binaries Binaries
	// Runtimes are the pinned runtimes (tini, node + openclaw, codex).
	Runtimes runtimes.Paths
	// ProviderBaseURLs maps "OPENAI" / "ANTHROPIC" to the model endpoint the
	// runtimes use instead of the real one (OCE_MODEL_PROVIDER_BASE_URL_*),
	// e.g. the offline fake provider.
	ProviderBaseURLs map[string]string
	// Credentials delivers the model credential; nil delivers none (the
	// runtimes then hold NOT_CONFIGURED).
	Credentials Credentials
	// ProbeBeforeCutover runs a staged embedded replacement's model probe
	// while the predecessor serves (the installation's before-cutover
	// activation order, beyond the seeds): a failed probe holds the
	// candidate before any cutover, and the cutover no longer waits for it.
	// Off keeps the seeds' order: the replacement probes at its start.
	ProbeBeforeCutover bool
	// AllowHostNetwork lets runtimes run outside a loopback-only network
	// namespace. Off by default: New refuses then.
	AllowHostNetwork bool
	// Env is extra environment given to every supervisor (PATH, HOME and
	// XDG_CACHE_HOME are always passed from this process).
	Env []string
	// LogLevel is OCE_LOG_LEVEL of the supervisors (default info).
	LogLevel string
	// GatewayStopWait, HarnessStopWait and PollInterval override the stop
	// deadlines (tests inject shorter ones).
	GatewayStopWait time.Duration
	HarnessStopWait time.Duration
	PollInterval    time.Duration
	LeftoverGrace   time.Duration
	// Logger receives JSON logs; nil discards.
	Logger *slog.Logger
}

// Driver is the local compute driver.
type Driver struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	revs   map[string]*revRuntime // by revision ID
	routes map[string]*route      // by Agent ID
}

var _ compute.Driver = (*Driver)(nil)

// New returns a driver. It refuses to run runtimes on the host network
// unless cfg.AllowHostNetwork is set.
func New(cfg Config) (*Driver, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("local: DataDir is required")
	}
	if cfg.Binaries.Gatewayd == "" || cfg.Binaries.Harnessd == "" || cfg.Binaries.Nodehost == "" {
		return nil, errors.New("local: the gatewayd, harnessd and nodehost binaries are required")
	}
	if cfg.Runtimes.Tini == "" {
		return nil, errors.New("local: the tini runtime path is required")
	}
	if !cfg.AllowHostNetwork {
		if err := isolationCheck(); err != nil {
			return nil, fmt.Errorf("%w: %v; run the coordinator inside a loopback-only network namespace "+
				"(occ dev up does), or allow host networking explicitly", ErrNotIsolated, err)
		}
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("local: data dir: %w", err)
	}
	cfg.DataDir = abs
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("local: data dir: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = Name
	}
	if cfg.GatewayStopWait <= 0 {
		cfg.GatewayStopWait = GatewayStopWait
	}
	if cfg.HarnessStopWait <= 0 {
		cfg.HarnessStopWait = HarnessStopWait
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = StopPollInterval
	}
	if cfg.LeftoverGrace <= 0 {
		cfg.LeftoverGrace = LeftoverGrace
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{cfg: cfg, log: log.With("driver", cfg.Name), revs: map[string]*revRuntime{},
		routes: map[string]*route{}}
	d.restoreRoutes()
	return d, nil
}

// Capabilities implements compute.Driver, like Kubernetes: embedded OpenClaw
// and dedicated Codex, stopped predecessors for dedicated revisions,
// activation after the commit. The driver delivers api_key for embedded and
// api_key / codex_pat for dedicated Codex (secret files); the other
// bindings need a credential service the local driver does not have.
func (d *Driver) Capabilities() compute.Capabilities {
	return compute.Capabilities{
		Name: d.cfg.Name,
		Topologies: map[contract.Topology][]string{
			contract.Embedded:       {"api_key"},
			contract.DedicatedCodex: {"api_key", "codex_pat"},
		},
		StoppedPredecessors: map[string]bool{state.ModeDedicated: true},
	}
}

// Close stops every route listener (not the runtimes: they keep serving
// until stopped through the driver or `occ dev down`).
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, r := range d.routes {
		r.close()
		delete(d.routes, id)
	}
	return nil
}

// isolationCheck reports whether this process is in a loopback-only
// network namespace (tests replace it).
var isolationCheck = netns.Isolated
