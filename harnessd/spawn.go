package harnessd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"oce.dev/oce/shared/appserver"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/supervise"
)

// App-server start budgets.
const (
	// DefaultAppServerStartTimeout bounds the wait for the app-server's
	// /readyz after spawn (measured ~0.8 s, docs/design/codex.md#s6; a cold container
	// on a loaded node is slower).
	DefaultAppServerStartTimeout = 60 * time.Second
	// appReadyPoll is the /readyz poll interval during startup: short, since
	// every millisecond of it is start-to-ready latency harnessd adds.
	appReadyPoll = 10 * time.Millisecond
	// TokenFile is the capability token file's name in harnessd's private
	// runtime directory (mode 0700 under TMPDIR).
	TokenFile = "app-server-token"
)

// childDrop are the variables no child inherits: credentials, harnessd's own
// contract, and what harnessd sets itself.
var childDrop = append(append([]string{}, CredentialEnv...),
	"OCE_*", EnvLoginMode, EnvWorkspaceID, EnvCodexHome, "LOG_FORMAT", "RUST_LOG")

// baseEnv is this process's environment without childDrop (the credential
// variables are already unset; dropping them again keeps this correct on
// its own).
func baseEnv() []string { return supervise.Env(os.Environ(), childDrop...) }

// loginEnv is the environment of `codex login`: minimal, no credential.
func (h *harness) loginEnv() []string {
	e := supervise.MinimalEnv("PATH", "HOME", "TMPDIR", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR")
	return append(e, "CODEX_HOME="+h.cfg.CodexHome, "RUST_LOG=error")
}

// appEnv is the app-server's environment: no credential (the key is in
// auth.json, the token in its file), JSON logs on stderr, no OTel logs.
func (h *harness) appEnv() []string {
	return append(baseEnv(), "CODEX_HOME="+h.cfg.CodexHome, "LOG_FORMAT=json",
		"RUST_LOG="+h.cfg.LogLevel+",codex_otel=off")
}

// appArgs is the app-server command line; it names the token file, never
// the token.
func appArgs(bind string, port int, tokenFile string) []string {
	return []string{"app-server",
		"--listen", "ws://" + net.JoinHostPort(bind, strconv.Itoa(port)),
		"--ws-auth", "capability-token", "--ws-token-file", tokenFile,
		"-c", `otel.exporter="none"`, "-c", "otel.log_user_prompt=false", "-c", "allow_login_shell=false",
	}
}

// nativeSpawn writes the token file, starts `codex app-server` in the
// workspace with stderr turned into scrubbed JSON records, and waits until
// its /readyz answers and a WebSocket with the token opens.
func (h *harness) nativeSpawn(ctx context.Context) error {
	dir, err := os.MkdirTemp(h.cfg.TmpDir, "harnessd-")
	if err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("runtime dir: %w", err))
	}
	h.tokenDir = dir
	tokenFile := filepath.Join(dir, TokenFile)
	if err := writePrivate(tokenFile, []byte(h.cfg.AppServerToken)); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("token file: %w", err))
	}
	h.appURL = "ws://" + h.appAddr()
	stderr := logging.LineWriter(h.log.With("child", "codex-app-server"), "stderr", nil)
	p, err := h.sup.Start(ctx, supervise.Spec{
		Name: "codex-app-server", Path: h.cfg.Codex,
		Args: appArgs(h.cfg.AppServerBind, h.cfg.AppServerPort, tokenFile),
		Env:  h.appEnv(), Dir: h.cfg.Workspace,
		Stderr: stderr, StopBudget: supervise.CodexStopBudget,
	})
	if err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("start app-server: %w", err))
	}
	h.app = p
	go func() { <-p.Done(); _ = stderr.Close() }()
	budget := h.opts.AppServerStartTimeout
	if budget <= 0 {
		budget = DefaultAppServerStartTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	tick := time.NewTicker(appReadyPoll)
	defer tick.Stop()
	for {
		if appReadyz(wctx, h.appAddr()) == nil {
			break
		}
		select {
		case <-p.Exited():
			st, _ := p.Status()
			return phase.Fail(codes.Unavailable, fmt.Errorf("app-server exited during start: %s", st))
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return phase.Fail(codes.Unavailable, fmt.Errorf("app-server not ready within %s", budget))
		case <-tick.C:
		}
	}
	if err := appserver.Probe(wctx, h.appURL, h.cfg.AppServerToken); err != nil {
		return phase.Fail(codes.Unavailable, fmt.Errorf("app-server refused the capability token: %w", err))
	}
	return nil
}

var readyzClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// appAddr is where harnessd reaches its app-server: loopback when it listens
// on every interface.
func (h *harness) appAddr() string {
	host := h.cfg.AppServerBind
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(h.cfg.AppServerPort))
}

// appReadyz asks the app-server's own /readyz.
func appReadyz(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := readyzClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("app-server /readyz: %d", resp.StatusCode)
	}
	return nil
}
