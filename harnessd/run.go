// Package harnessd is the entrypoint of the dedicated Codex Harness
// container (under `tini -s -e 143`): it validates the login environment,
// writes the host-owned Codex configuration, logs Codex in with the
// credential on stdin, runs the Codex model probe, spawns `codex app-server`
// on a WebSocket guarded by a capability token, installs the selected
// plugins, publishes readiness and the plugin status the Gateway peer reads,
// and supervises the companion workspace node. Any startup failure is held:
// published on the status server, never retried, the process alive and
// unready until it is stopped (docs/design/reference.md#s1-5, docs/design/reference.md#s1-7, docs/design/reference.md#s1-8; docs/design/seed-001.md).
package harnessd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"oce.dev/oce/probe/codexprobe"
	"oce.dev/oce/shared/appserver"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/status"
	"oce.dev/oce/shared/supervise"
)

// Container is the container name of every phase record.
const Container = "agent"

// Startup phases, in order; one runtime.startup_phase record each.
const (
	PhaseLoginEnv       = "login-env"
	PhaseWorkspaceSetup = "workspace-setup"
	PhaseCodexLogin     = "codex-login"
	PhaseModelProbe     = "model-probe"
	PhaseNativeSpawn    = "native-spawn"
	PhasePluginInstall  = "plugin-install"
	PhaseReadyMarker    = "ready-marker"
)

// ReadyMarker is the file under CODEX_HOME written when startup finished;
// a stale one is removed first.
const ReadyMarker = ".oce-harness-ready"

// Options are test hooks; the zero value is production.
type Options struct {
	// Stderr receives the JSON log records; default os.Stderr.
	Stderr io.Writer
	// AppServerStartTimeout bounds the wait for the app-server's /readyz;
	// zero means DefaultAppServerStartTimeout.
	AppServerStartTimeout time.Duration
	// NodeRestartDelay, zero means NodeRestartDelay.
	NodeRestartDelay time.Duration
}

// harness is one harnessd run.
type harness struct {
	cfg       Config
	opts      Options
	log       *slog.Logger
	sup       *supervise.Supervisor
	st        *status.Server
	phases    *phase.Runner
	startupID string

	app      *supervise.Process
	appURL   string
	tokenDir string
	// ownsHome: CODEX_HOME passed the placement check and was emptied; only
	// then does harnessd empty it again.
	ownsHome bool

	nodeDone chan struct{} // closed when the companion loop returned; nil if never started
}

func newStartupID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func levelOf(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Run is `harnessd` (run): it returns the process exit status, 0 after a
// stop signal (held or serving), 1 when the app-server exits on its own or
// harnessd cannot start at all.
func Run(ctx context.Context, opts Options) int {
	start := time.Now()
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	cfg, cfgErr := LoadConfig() // removes every credential variable first
	log := logging.New(opts.Stderr, levelOf(cfg.LogLevel), "harnessd")
	// Every child (login, probe, app-server, nodehost) starts through
	// supervise, so harnessd reaps as a subreaper: orphans of Codex's own
	// helpers never linger as zombies.
	sup, err := supervise.New(supervise.Options{Log: log})
	if err != nil {
		log.Error("supervisor", "err", err)
		return 1
	}
	h := &harness{cfg: cfg, opts: opts, log: log, sup: sup, startupID: newStartupID()}
	h.st = status.New(status.Options{Addr: cfg.StatusAddr, Component: Container, RevisionID: cfg.RevisionID,
		RemoteStatusKey: cfg.PluginStatusKey, Log: log})
	h.phases = phase.New(Container, start, log, nil)
	h.phases.Observe(h.st.PhaseObserver())
	h.phases.ObserveStart(h.st.SetPhase)

	sctx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	ln, err := h.st.Listen(ctx)
	if err != nil {
		log.Error("status server", "err", err)
		return 1
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := h.st.Serve(sctx, ln); err != nil {
			log.Error("status server", "err", err)
		}
	}()
	defer func() { stopServing(); <-served }()
	h.st.SetPluginStatus(h.pluginStatus(PluginResult{Successful: []string{}, Failures: []status.PluginFailure{}}, status.PluginPhasePending))

	// A stop signal ends whatever phase runs: children get it forwarded by
	// the supervisor, the phase's own waits see sctx end.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sup.StopRequested():
			cancel()
		case <-rctx.Done():
		}
	}()

	failedPhase, err := h.startup(rctx, cfgErr)
	if err != nil {
		if rctx.Err() != nil {
			return h.drain()
		}
		h.st.Hold(status.FailureOf(err, failedPhase))
		f, _ := h.st.Held()
		log.Error("startup failure held", "check", f.Check, "code", string(f.Code))
		if h.app != nil {
			// A held runtime serves nothing; stop the app-server now.
			_ = h.app.Stop(context.Background())
		}
		if h.tokenDir != "" {
			_ = os.RemoveAll(h.tokenDir)
		}
		h.dropLoginState()
		if err := sup.Hold(ctx); err != nil {
			return 1
		}
		return h.drain()
	}
	h.nodeDone = make(chan struct{})
	go func() {
		defer close(h.nodeDone)
		h.companion(rctx)
	}()
	select {
	case <-sup.StopRequested():
		return h.drain()
	case <-h.app.Exited():
		st, _ := h.app.Status()
		log.Error("codex app-server exited", "status", st.String())
		h.st.SetReady(false)
		cancel()
		_ = sup.StopAll(context.Background())
		return 1
	case <-ctx.Done():
		_ = sup.StopAll(context.Background())
		return h.drain()
	}
}

// drain waits for the children the stop signal reached (each is killed after
// its budget by the supervisor) and exits 0.
func (h *harness) drain() int {
	if h.app != nil {
		<-h.app.Done()
	}
	if h.nodeDone != nil {
		// The loop returns once its current nodehost (stopped by the
		// forwarded signal, killed after 9 s) is gone.
		<-h.nodeDone
	}
	if h.tokenDir != "" {
		_ = os.RemoveAll(h.tokenDir)
	}
	h.dropLoginState()
	h.log.Info("stopped")
	return 0
}

// startup runs the phases in order and returns the failed phase's name and
// error, or "" and nil once the runtime is ready.
func (h *harness) startup(ctx context.Context, cfgErr error) (string, error) {
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{PhaseLoginEnv, func(context.Context) error {
			if cfgErr != nil {
				return cfgErr
			}
			return h.cfg.validateLogin()
		}},
		{PhaseWorkspaceSetup, h.workspaceSetup},
		{PhaseCodexLogin, func(ctx context.Context) error {
			return login(ctx, h.sup.Run, &h.cfg, h.loginEnv(), h.log)
		}},
		{PhaseModelProbe, h.modelProbe},
		{PhaseNativeSpawn, h.nativeSpawn},
		{PhasePluginInstall, h.pluginInstall},
		{PhaseReadyMarker, h.readyMarker},
	}
	for _, s := range steps {
		if err := h.phases.Run(ctx, s.name, s.fn); err != nil {
			return s.name, err
		}
		if ctx.Err() != nil {
			return s.name, ctx.Err()
		}
	}
	return "", nil
}

// workspaceSetup checks that no credential directory lies in the workspace,
// empties CODEX_HOME (ephemeral login state; also a stale ready marker),
// links the durable thread history, creates the workspace, removes node
// credentials an earlier version left in it, and writes config.toml (0600).
func (h *harness) workspaceSetup(context.Context) error {
	cfg := &h.cfg
	src, _ := os.LookupEnv(EnvNativeConfig)
	m, err := ParseNativeConfig(src, os.Getenv(EnvProviderOverride))
	if err != nil {
		return phase.Fail(codes.NotConfigured, err)
	}
	cfg.Model = m
	missing := func(err error) error {
		// the one record that names what is missing (the phase records
		// carry codes only): the variable, never a path
		h.log.Error("codex runtime not installed", "code", string(codes.Unavailable), "missing", EnvCodexBin)
		return phase.Fail(codes.Unavailable, fmt.Errorf("codex binary (%s) not found: %w", EnvCodexBin, err))
	}
	if !strings.Contains(cfg.Codex, "/") {
		path, err := exec.LookPath(cfg.Codex) // a lookup only: every child starts through supervise
		if err != nil {
			return missing(err)
		}
		cfg.Codex = path
	} else if _, err := os.Stat(cfg.Codex); err != nil {
		return missing(err)
	}
	if err := cfg.checkPlacement(); err != nil {
		return phase.Fail(codes.Unavailable, err)
	}
	// Emptying CODEX_HOME also removes a stale ready marker.
	h.ownsHome = true
	if err := h.resetCodexHome(); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("prepare CODEX_HOME: %w", err))
	}
	if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("create workspace: %w", err))
	}
	if err := h.removeLegacyNodeState(); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("remove legacy node state: %w", err))
	}
	text, err := RenderCodexConfig(CodexSettings{Model: m, PluginsEnabled: h.pluginsEnabled(), WorkspaceID: cfg.WorkspaceID,
		OpenAIBaseURL: strings.TrimSpace(os.Getenv(EnvProviderOverride)), SQLiteHome: cfg.CodexStateDir})
	if err != nil {
		return phase.Fail(codes.NotConfigured, err)
	}
	if err := writePrivate(filepath.Join(cfg.CodexHome, ConfigFile), []byte(text)); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("write config.toml: %w", err))
	}
	return nil
}

// pluginsEnabled: plugins need a ChatGPT login; api_key disables them.
func (h *harness) pluginsEnabled() bool {
	return len(h.cfg.Plugins) > 0 && h.cfg.LoginMode != LoginAPIKey
}

func (h *harness) markerPath() string { return filepath.Join(h.cfg.CodexHome, ReadyMarker) }

// modelProbe runs the Codex probe; anything but READY is held with the
// probe's code and cause.
func (h *harness) modelProbe(ctx context.Context) error {
	res, err := codexprobe.Run(ctx, codexprobe.Config{
		Codex: h.cfg.Codex, CodexHome: h.cfg.CodexHome, TmpDir: h.cfg.TmpDir,
		Model: h.cfg.Model.Ref.String(), Provider: h.cfg.Model.Provider(),
		WorkspaceID: h.cfg.WorkspaceID, Log: h.log,
	})
	if err != nil {
		return err
	}
	if res.Ready() {
		return nil
	}
	perr := fmt.Errorf("model probe: %s after %d attempt(s)", res.FailureClass, res.Attempts)
	if res.Cause != nil {
		return phase.FailCause(res.Code, *res.Cause, perr)
	}
	return phase.Fail(res.Code, perr)
}

// pluginInstall installs the selected plugins (not in api_key mode) and
// publishes the plugin status. Plugin failures are reported to the Gateway
// peer, not held: the runtime serves with the plugins that succeeded.
func (h *harness) pluginInstall(ctx context.Context) error {
	var r PluginResult
	switch {
	case len(h.cfg.Plugins) == 0:
		r = PluginResult{Successful: []string{}, Failures: []status.PluginFailure{}}
	case h.cfg.LoginMode == LoginAPIKey:
		r = AuthRequiredResult(h.cfg.Plugins)
	default:
		ictx, cancel := context.WithTimeout(ctx, PluginInstallDeadline)
		defer cancel()
		c, err := appserver.Dial(ictx, h.appURL, h.cfg.AppServerToken, appserver.WithClientInfo(appserver.ClientInfo{Name: "oce_harnessd", Version: "1"}))
		if err != nil {
			r = PluginResult{Successful: []string{}}
			for _, id := range h.cfg.Plugins {
				r.Failures = append(r.Failures, status.PluginFailure{PluginID: id, Code: codes.PluginNotReady})
			}
		} else {
			r = InstallPlugins(ictx, c, h.cfg.Plugins, PluginRequestTimeout)
			_ = c.Close()
		}
	}
	ph := status.PluginPhaseReady
	if len(r.Failures) > 0 {
		ph = status.PluginPhaseFailed
		for _, f := range r.Failures {
			h.log.Warn("plugin not installed", "pluginId", f.PluginID, "code", string(f.Code))
		}
	}
	h.st.SetPluginStatus(h.pluginStatus(r, ph))
	return nil
}

func (h *harness) pluginStatus(r PluginResult, ph string) status.PluginStatus {
	return status.PluginStatus{StartupID: h.startupID, PodUID: h.cfg.PodUID,
		SuccessfulPluginIDs: r.Successful, Failures: r.Failures, Phase: ph}
}

// readyMarker writes the marker and turns readiness on; from now on every
// readiness poll also checks the marker, the app-server's /readyz and a
// WebSocket opened with the capability token.
func (h *harness) readyMarker(context.Context) error {
	if err := writePrivate(h.markerPath(), []byte(h.startupID+"\n")); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("write ready marker: %w", err))
	}
	h.st.SetReadyCheck(h.readyCheck)
	h.st.SetReady(true)
	h.st.SetStarted()
	return nil
}

func (h *harness) readyCheck(ctx context.Context) error {
	if _, err := os.Stat(h.markerPath()); err != nil {
		return fmt.Errorf("ready marker: %w", err)
	}
	if err := appReadyz(ctx, h.appAddr()); err != nil {
		return err
	}
	return appserver.Probe(ctx, h.appURL, h.cfg.AppServerToken)
}
