// Package gatewayd is the Gateway container's supervisor around the real
// OpenClaw gateway (seeds 000–003, docs/design/reference.md#s1-3, docs/design/reference.md#s1-4, docs/design/reference.md#s1-7, docs/design/reference.md#s1-8, docs/design/reference.md#s5):
// it runs the startup phases in order, each logged as one runtime.startup_phase
// record (status server, model-probe, workspace-setup, runtime-assets,
// peer-plugin-status, configure, plugin-install, state-migration,
// native-spawn), then serves — readiness, peer watcher, respawn policy,
// node enrollment routes — and stops within the 330 s budget.
package gatewayd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/modelref"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/runtimes"
	"oce.dev/oce/shared/status"
	"oce.dev/oce/shared/supervise"
)

// Startup phase names, in order.
const (
	PhaseModelProbe       = "model-probe"
	PhaseWorkspaceSetup   = "workspace-setup"
	PhaseRuntimeAssets    = "runtime-assets"
	PhasePeerPluginStatus = "peer-plugin-status"
	PhaseConfigure        = "configure"
	PhasePluginInstall    = "plugin-install"
	PhaseStateMigration   = "state-migration"
	PhaseNativeSpawn      = "native-spawn"
)

// Exit codes of gatewayd.
const (
	ExitOK       = 0 // stopped (or held until stopped)
	ExitFailed   = 1 // respawn budget exhausted, or a fatal serving error
	ExitBadInput = 2 // unusable environment
)

// resolveOpenClaw finds the openclaw command when OCE_OPENCLAW_BIN is unset:
// the location the image sets (OCE_OPENCLAW_MJS, run by OCE_NODE or node in
// PATH) wins; else the pinned runtime cache of `make runtimes` (development
// hosts). The error names what is missing.
func resolveOpenClaw(getenv func(string) string) ([]string, error) {
	cmd, named, err := runtimes.OpenClawFromEnv(getenv)
	if named {
		return cmd, err
	}
	paths, err := runtimes.Load()
	if err != nil {
		return nil, fmt.Errorf("neither %s nor OCE_OPENCLAW_BIN is set and %w", runtimes.EnvOpenClawMJS, err)
	}
	return paths.OpenClawCommand(), nil
}

// MemoryLimit is gatewayd's soft Go memory limit (GOMEMLIMIT overrides it).
const MemoryLimit = 8 << 20

// superviseStopBudget is the gateway's stop budget (330 s).
const superviseStopBudget = supervise.GatewayStopBudget

// credentialEnv names the variable a built-in provider's key travels in.
var credentialEnv = contract.ProviderKeyEnv

// Gatewayd is one supervisor run.
type Gatewayd struct {
	cfg    Config
	log    *slog.Logger
	phases *phase.Runner
	status *status.Server
	sup    *supervise.Supervisor
	httpc  *http.Client

	identity        *ocproto.Identity
	wsConn          *workspaceConn // the workspace routes' gateway connection
	authMode        string
	managedPassword bool
	keyEnv          string
	renderedPath    string
	configReadonly  bool

	// installCache, while set, replaces cfg.NPMCache for the plugin
	// installer (a writable copy of a read-only image cache).
	installCache string
	// compileCacheBase is the launcher's compile-cache base under TMPDIR,
	// shared with the model probe ("" when not seeded).
	compileCacheBase string

	respawns    []time.Time
	peerChanged chan struct{}
	mu          sync.Mutex
	current     *child
}

// Run is gatewayd's main: it runs the startup phases and serves until a
// stop signal. It returns the process exit status.
func Run(ctx context.Context, cfg Config, stderr io.Writer) int {
	start := time.Now()
	log := logging.New(stderr, cfg.LogLevel, "gatewayd")
	if cfg.Policy == (Policy{}) {
		cfg.Policy = DefaultPolicy()
	}
	if err := cfg.Validate(); err != nil {
		log.Error("gatewayd: bad configuration", "code", string(codes.NotConfigured), "error", err.Error())
		return ExitBadInput
	}
	if len(cfg.OpenClawCommand) == 0 {
		cmd, err := resolveOpenClaw(os.Getenv)
		if err != nil {
			log.Error("gatewayd: openclaw runtime not installed", "code", string(codes.NotConfigured), "missing", err.Error())
			return ExitBadInput
		}
		cfg.OpenClawCommand = cmd
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// a supervisor's heap is small; a soft limit keeps bursts of child
		// output from leaving the heap (and RSS) grown
		debug.SetMemoryLimit(MemoryLimit)
	}
	sup, err := supervise.New(supervise.Options{Log: log})
	if err != nil {
		log.Error("gatewayd: supervisor", "error", err.Error())
		return ExitFailed
	}
	id, err := ocproto.NewIdentity()
	if err != nil {
		log.Error("gatewayd: identity", "error", err.Error())
		return ExitFailed
	}
	g := &Gatewayd{cfg: cfg, log: log, sup: sup, identity: id, peerChanged: make(chan struct{}, 1),
		httpc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	g.phases = phase.New("gateway", start, log, nil)
	return g.run(ctx)
}

func (g *Gatewayd) run(parent context.Context) int {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var stopAt atomic.Int64 // unix ms of the stop signal
	go func() {
		select {
		case <-g.sup.StopRequested():
			stopAt.Store(time.Now().UnixMilli())
			cancel()
		case <-ctx.Done():
		}
	}()
	exit := g.runPhases(ctx, parent)
	// One record closes the process: its exit status and, after a stop
	// signal, how long the stop took (the Pod's graceful stop budget is
	// GatewayTerminationGraceSeconds).
	attrs := []any{"exit", exit}
	if at := stopAt.Load(); at != 0 {
		attrs = append(attrs, "stop_ms", time.Now().UnixMilli()-at)
	}
	g.log.Info("stopped", attrs...)
	return exit
}

// runPhases runs the status server, the startup phases and the serving
// loop; it returns the exit status.
func (g *Gatewayd) runPhases(ctx, parent context.Context) int {

	// 1. status server
	g.status = status.New(status.Options{Addr: g.cfg.StatusAddr, Component: "gateway", RevisionID: g.cfg.RevisionID,
		Log: g.log})
	g.phases.Observe(g.status.PhaseObserver())
	g.phases.ObserveStart(g.status.SetPhase)
	if err := g.registerRoutes(g.status); err != nil {
		g.log.Error("gatewayd: status routes", "error", err.Error())
		return ExitFailed
	}
	ln, err := g.status.Listen(ctx)
	if err != nil {
		g.log.Error("gatewayd: status server cannot listen", "code", string(codes.Unavailable))
		return ExitFailed
	}
	srvCtx, srvCancel := context.WithCancel(context.Background())
	srvDone := make(chan struct{})
	go func() { _ = g.status.Serve(srvCtx, ln); close(srvDone) }()
	defer func() { srvCancel(); <-srvDone }()
	g.seedCompileCache()
	if g.cfg.ProbeOnly {
		return g.probeOnly(ctx, parent)
	}
	g.status.SetPluginStatus(status.PluginStatus{Phase: status.PluginPhasePending, SuccessfulPluginIDs: []string{}})
	g.status.SetReadyCheck(g.childReady)

	exit, done := g.startup(ctx, parent)
	if done {
		return exit
	}
	return g.serve(ctx, parent)
}

// boot is what one startup's phases hand each other.
type boot struct {
	rendered  Rendered
	renderErr error // an unreadable or unrenderable admitted document
	// baseline is the peer's plugin status the startup waited for.
	baseline     *status.PluginStatus
	installCodex bool
	first        *child
}

// bootStep is one startup phase; skip leaves it out for this topology,
// before runs just ahead of it.
type bootStep struct {
	name   string
	skip   bool
	before func()
	run    func(context.Context) error
}

// startup runs the phases in order (the step table below, like harnessd's);
// done is true when the process must exit (stop during startup, or held
// until stopped).
func (g *Gatewayd) startup(ctx, parent context.Context) (int, bool) {
	b := g.renderAdmitted()
	steps := []bootStep{
		{name: PhaseModelProbe, skip: g.cfg.Topology != contract.Embedded, run: func(ctx context.Context) error {
			return g.probeStep(ctx, b)
		}},
		{name: PhaseWorkspaceSetup, run: g.setupDirs},
		{name: PhaseRuntimeAssets, run: g.publishAssets},
		{name: PhasePeerPluginStatus, run: func(ctx context.Context) error { return g.peerPluginStep(ctx, b) },
			skip: g.cfg.Topology != contract.DedicatedCodex || len(g.cfg.Plugins) == 0 || g.cfg.PeerStatusURL == ""},
		{name: PhaseConfigure, before: func() { b.installCodex = g.needsCodexInstall() },
			run: func(ctx context.Context) error { return g.configureStep(b) }},
		// the codex plugin (dedicated Codex) is installed offline when
		// missing; the selected plugins are enabled in the config
		{name: PhasePluginInstall, run: func(ctx context.Context) error {
			if !b.installCodex {
				return nil
			}
			return g.installCodexPlugin(ctx, b.rendered.JSON)
		}},
		{name: PhaseStateMigration, run: g.stateMigration},
		{name: PhaseNativeSpawn, before: g.publishReady, run: func(ctx context.Context) error {
			c, err := g.spawn(ctx)
			b.first = c
			return err
		}},
	}
	for _, st := range steps {
		if st.skip {
			continue
		}
		if st.before != nil {
			st.before()
		}
		if err := g.phases.Run(ctx, st.name, st.run); err != nil {
			return g.failed(parent, st.name, err)
		}
	}
	g.status.SetStarted()
	debug.FreeOSMemory() // startup garbage (render, SQLite checks) is not kept resident
	g.mu.Lock()
	g.current = b.first
	g.mu.Unlock()
	if g.cfg.Topology.Dedicated() && g.cfg.PeerStatusURL != "" {
		go g.watchPeer(ctx, b.baseline)
	}
	return 0, false
}

// renderAdmitted renders the admitted document once for every phase that
// needs it; an unreadable one fails the first such phase (model-probe or
// configure) with NOT_CONFIGURED.
func (g *Gatewayd) renderAdmitted() *boot {
	b := &boot{}
	admitted, err := os.ReadFile(g.cfg.AdmittedConfig)
	if err != nil {
		b.renderErr = fmt.Errorf("%w: unreadable", ErrAdmittedConfig)
		return b
	}
	if b.rendered, b.renderErr = Render(admitted, g.renderInput()); b.renderErr == nil && b.rendered.Model != "" {
		if ref, err := modelref.Parse(b.rendered.Model); err == nil {
			g.keyEnv = credentialEnv[ref.Provider]
		}
	}
	return b
}

// probeStep is the embedded model probe.
func (g *Gatewayd) probeStep(ctx context.Context, b *boot) error {
	if b.renderErr != nil {
		return phase.FailCheck(PhaseModelProbe, codes.NotConfigured, b.renderErr)
	}
	return g.modelProbe(ctx, b.rendered)
}

// peerPluginStep waits for the dedicated Codex Harness's plugin status.
func (g *Gatewayd) peerPluginStep(ctx context.Context, b *boot) error {
	ps, err := g.waitPeerPlugins(ctx)
	if err == nil {
		b.baseline = &ps
	}
	return err
}

// configureStep writes the rendered configuration; while the codex plugin
// still has to be installed, without the parts that name it.
func (g *Gatewayd) configureStep(b *boot) error {
	if b.renderErr != nil {
		return phase.FailCheck(PhaseConfigure, codes.NotConfigured, b.renderErr)
	}
	doc := b.rendered.JSON
	if b.installCodex {
		// the plugin must be installed before the config names it
		pre, err := preInstallConfig(doc)
		if err != nil {
			return phase.FailCheck(PhaseConfigure, codes.NotConfigured, err)
		}
		doc = pre
	}
	path, writable, err := writeRendered(g.cfg.ConfigDir, keepMeta(doc, g.cfg.RenderedConfigPath()))
	if err != nil {
		return phase.FailCheck(PhaseConfigure, codes.Unavailable, err)
	}
	g.renderedPath, g.configReadonly = path, !writable
	g.authMode, g.managedPassword = b.rendered.AuthMode, b.rendered.ManagedPassword
	return nil
}

// publishReady marks the plugins and the supervisor ready once every
// phase before the spawn passed.
func (g *Gatewayd) publishReady() {
	plugins := append([]string{}, g.cfg.Plugins...)
	g.status.SetPluginStatus(status.PluginStatus{Phase: status.PluginPhaseReady, SuccessfulPluginIDs: plugins})
	g.status.SetReady(true)
}

// serve supervises the running gateway until a stop or exhaustion.
func (g *Gatewayd) serve(ctx, parent context.Context) int {
	for {
		g.mu.Lock()
		c := g.current
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return g.shutdown(c)
		case <-c.p.Exited():
			if ctx.Err() != nil {
				return g.shutdown(c)
			}
			st, _ := c.p.Status()
			g.log.Warn("gateway exited", "status", st.String())
			if configInvalid(c) {
				return g.holdConfigInvalid(parent)
			}
		case <-g.peerChanged:
		}
		next, err := g.respawn(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return g.shutdown(nil)
			}
			if errors.Is(err, errConfigInvalid) {
				return g.holdConfigInvalid(parent)
			}
			g.phases.Record(PhaseGatewayRespawn, phase.Failed, 0, exhaustedCode)
			g.status.SetReady(false)
			return ExitFailed
		}
		g.mu.Lock()
		g.current = next
		g.mu.Unlock()
	}
}

// shutdown waits for the gateway the supervisor is stopping: the stop
// signal was forwarded to its group once (a second SIGTERM could make the
// gateway skip its drain), and supervise kills the group after the stop
// budget. StopAll is only the fallback for children still alive after that.
func (g *Gatewayd) shutdown(c *child) int {
	budget := g.cfg.Policy.StopBudget + 5*time.Second
	if c != nil {
		t := time.NewTimer(budget)
		select {
		case <-c.p.Done():
		case <-t.C:
		}
		t.Stop()
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if err := g.sup.StopAll(stopCtx); err != nil {
		g.log.Warn("gatewayd: stop budget exceeded")
	}
	return ExitOK
}

// failed ends a failed startup phase: a stop ends the process with 0;
// anything else holds the failure, unready, until the stop.
func (g *Gatewayd) failed(parent context.Context, name string, err error) (int, bool) {
	select {
	case <-g.sup.StopRequested():
		return g.shutdown(nil), true
	default:
	}
	if parent.Err() != nil {
		return ExitOK, true
	}
	return g.hold(parent, name, err)
}

func (g *Gatewayd) hold(parent context.Context, name string, err error) (int, bool) {
	f := status.FailureOf(err, name)
	g.status.Hold(f)
	g.log.Error("gatewayd: startup failure held", "check", f.Check, "code", string(f.Code))
	_ = g.sup.Hold(parent)
	return g.shutdown(nil), true
}

func (g *Gatewayd) renderInput() RenderInput {
	lvl := "info"
	switch {
	case g.cfg.LogLevel <= slog.LevelDebug:
		lvl = "debug"
	case g.cfg.LogLevel >= slog.LevelError:
		lvl = "error"
	case g.cfg.LogLevel >= slog.LevelWarn:
		lvl = "warn"
	}
	node := g.cfg.WorkspaceNodeID
	return RenderInput{Topology: g.cfg.Topology, Port: g.cfg.Port, Bind: g.cfg.Bind, LogLevel: lvl,
		LogFile: filepath.Join(g.cfg.StateDir, "logs", "openclaw.log"), WorkspaceNodeID: node, Workspace: g.embeddedWorkspace(),
		NodeWorkspace: g.cfg.NodeWorkspaceDir, AppServerURL: g.cfg.AppServerURL, AppServerToken: g.cfg.AppServerToken,
		Plugins: g.cfg.Plugins, OpenAIBase: g.cfg.OpenAIBase, AnthropicBase: g.cfg.AnthropicBase,
		ProviderPlugins: startupProviderPlugins(openClawMJS(g.cfg.OpenClawCommand))}
}

// setupDirs creates the private state, SQLite and media directories (0700)
// and, for embedded, the workspace.
func (g *Gatewayd) setupDirs(context.Context) error {
	dirs := []string{g.cfg.StateDir, filepath.Join(g.cfg.StateDir, "agents"), filepath.Join(g.cfg.StateDir, "media"),
		filepath.Join(g.cfg.StateDir, "logs"), g.cfg.ConfigDir}
	if g.cfg.Topology == contract.Embedded {
		dirs = append(dirs, g.cfg.WorkspaceDir)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return phase.FailCheck(PhaseWorkspaceSetup, codes.Unavailable, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return phase.FailCheck(PhaseWorkspaceSetup, codes.Unavailable, err)
		}
	}
	return nil
}

// publishAssets republishes the image-owned bundled assets to the runtime
// asset dir; an image without assets publishes nothing.
func (g *Gatewayd) publishAssets(context.Context) error {
	src, dst := g.cfg.AssetsSource, g.cfg.AssetsDir
	if src == "" || dst == "" {
		return nil
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dst, os.Getpid())
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return phase.FailCheck(PhaseRuntimeAssets, codes.Unavailable, err)
	}
	if err := os.CopyFS(tmp, os.DirFS(src)); err != nil {
		_ = os.RemoveAll(tmp)
		return phase.FailCheck(PhaseRuntimeAssets, codes.Unavailable, err)
	}
	_ = os.RemoveAll(dst)
	if err := os.Rename(tmp, dst); err != nil {
		return phase.FailCheck(PhaseRuntimeAssets, codes.Unavailable, err)
	}
	return nil
}

// stateMigration runs doctor only when some agent database needs it; a
// stop is forwarded to doctor by the supervisor and ends startup.
func (g *Gatewayd) stateMigration(ctx context.Context) error {
	need, _, err := NeedsMigration(ctx, g.cfg.StateDir)
	if err != nil {
		return phase.FailCheck(PhaseStateMigration, codes.Unavailable, err)
	}
	if !need {
		return nil
	}
	cmd := g.cfg.OpenClawCommand
	out := logging.LineWriter(g.log, "stdout", nil)
	errw := logging.LineWriter(g.log, "stderr", nil)
	defer out.Close()
	defer errw.Close()
	p, err := g.sup.Start(ctx, supervise.Spec{Name: doctorChildName, Path: cmd[0],
		Args: append(append([]string{}, cmd[1:]...), "doctor", "--fix", "--non-interactive"),
		Env:  g.gatewayEnv(false), Dir: g.cfg.StateDir, Stdout: out, Stderr: errw, StopBudget: DoctorStopBudget})
	if err != nil {
		return phase.FailCheck(PhaseStateMigration, codes.Unavailable, err)
	}
	// wait for doctor itself: a forwarded SIGTERM ends it, not us
	st, err := p.Wait(context.Background())
	if err != nil {
		return phase.FailCheck(PhaseStateMigration, codes.Unavailable, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !st.Success() {
		return phase.FailCheck(PhaseStateMigration, codes.Unavailable, fmt.Errorf("doctor: %s", st))
	}
	return nil
}
