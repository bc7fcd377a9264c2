package occ

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/local"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/store"
	"oce.dev/oce/shared/runtimes"
)

// DevServeConfig configures the single-node development coordinator that
// `occ dev up` starts (inside the runtimes' network namespace).
type DevServeConfig struct {
	// Dir is the dev data root: coordinator/ (Raft, token, api.sock),
	// runtimes/ and routes/ (the local driver), secrets/, dev/ (logs, pids).
	Dir string
	// BinDir holds gatewayd, harnessd, nodehost and fakeprovider.
	BinDir string
	// RaftAddr and HTTPAddr are the coordinator's loopback addresses.
	RaftAddr, HTTPAddr string
	// RealProvider uses the real model endpoints instead of the fake
	// provider (needs AllowHostNetwork).
	RealProvider bool
	// AllowHostNetwork lets runtimes run outside a loopback-only namespace.
	AllowHostNetwork bool
	// FakeReply is the fake provider's reply text.
	FakeReply string
	// Engine tunes the activation engine (tests shorten its timings).
	Engine engine.Config
	// GatewayStopWait / HarnessStopWait override the driver's stop budgets.
	GatewayStopWait, HarnessStopWait time.Duration
	// Ready, when set, receives the API socket path once serving.
	Ready func(socket string)
	Log   *slog.Logger
}

// Dev layout names under DevServeConfig.Dir.
const (
	devCoordinatorDir = "coordinator"
	devSecretsDir     = "secrets"
	devStateDir       = "dev"
	devAPISocket      = "api.sock"
	// DevDemoKey is the secret (a file in <dir>/secrets) holding the key the
	// fake provider accepts; Agents bind it with sourceRef local:demo-key.
	DevDemoKey = "demo-key"
	// devProviderKeyFile: the fake provider's accepted keys (mode 0600).
	devProviderKeyFile = "fakeprovider-keys"
)

// DevAPISocket is the coordinator API's Unix socket under a dev root.
func DevAPISocket(dir string) string {
	return filepath.Join(dir, devCoordinatorDir, devAPISocket)
}

// devBackend is the API backend: the store plus the local driver.
type devBackend struct {
	*store.Store
	driver compute.Driver
}

func (b devBackend) Driver() compute.Driver { return b.driver }

// RunDevCoordinator runs the development coordinator until ctx ends: the
// fake provider (unless RealProvider), the local compute driver, the Raft
// store, the activation engine and the API on a Unix socket (reachable from
// the host namespace) and on HTTPAddr. On the way out it stops every runtime
// it runs (Gateway before Harness) and the fake provider.
//
// It assembles the same parts coordinator/server.Run does, because
// server.Config cannot take a driver instance yet (see the report).
func RunDevCoordinator(ctx context.Context, cfg DevServeConfig) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return err
	}
	coordDir := filepath.Join(dir, devCoordinatorDir)
	secrets := filepath.Join(dir, devSecretsDir)
	for _, d := range []string{dir, coordDir, secrets, filepath.Join(dir, devStateDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("dev: %w", err)
		}
	}
	paths, err := runtimes.Ensure(ctx)
	if err != nil {
		return err
	}
	bases := map[string]string{}
	if !cfg.RealProvider {
		url, stop, err := startFakeProvider(ctx, cfg, dir, secrets)
		if err != nil {
			return err
		}
		defer stop()
		bases["OPENAI"], bases["ANTHROPIC"] = url, url
	}
	driver, err := local.New(local.Config{DataDir: dir, Binaries: local.BinariesIn(cfg.BinDir), Runtimes: paths,
		ProviderBaseURLs: bases, Credentials: local.SecretDir(secrets), AllowHostNetwork: cfg.AllowHostNetwork,
		GatewayStopWait: cfg.GatewayStopWait, HarnessStopWait: cfg.HarnessStopWait,
		Logger: log.With("component", "local-driver")})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), local.GatewayStopWait+local.HarnessStopWait)
		defer cancel()
		driver.Shutdown(sctx)
		driver.Close()
	}()

	token, err := server.LoadOrCreateToken(filepath.Join(coordDir, server.TokenFileName))
	if err != nil {
		return err
	}
	sock := DevAPISocket(dir)
	_ = os.Remove(sock)
	uln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("dev: api socket: %w", err)
	}
	defer uln.Close()
	_ = os.Chmod(sock, 0o600)
	tln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("dev: http listen: %w", err)
	}
	defer tln.Close()

	ecfg := cfg.Engine
	st, err := store.Open(store.Config{NodeID: "dev", DataDir: coordDir, RaftBind: cfg.RaftAddr,
		HTTPAddr: tln.Addr().String(), Bootstrap: true, Log: log,
		OnLeader: func(ctx context.Context, s *store.Store) {
			c := ecfg
			c.Owner = s.NodeID()
			if err := engine.New(c, s, driver, nil, log.With("component", "engine")).Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("activation engine stopped", "error", err.Error())
			}
		}})
	if err != nil {
		return err
	}
	defer st.Close()
	srv := &http.Server{Handler: api.New(api.Config{Token: token, Log: log.With("component", "api"),
		Metrics: prometheus.NewRegistry()}, devBackend{Store: st, driver: driver}), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(uln) }()
	go func() { errc <- srv.Serve(tln) }()
	log.Info("dev coordinator started", "socket", sock, "httpAddr", tln.Addr().String(), "fakeProvider", !cfg.RealProvider)
	if cfg.Ready != nil {
		cfg.Ready(sock)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), server.DefaultShutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return runErr
}

// startFakeProvider starts cmd/fakeprovider on loopback accepting the demo
// key (created on first use) and returns its base URL.
func startFakeProvider(ctx context.Context, cfg DevServeConfig, dir, secrets string) (string, func(), error) {
	key := filepath.Join(secrets, DevDemoKey)
	if _, err := os.Stat(key); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(key, []byte("sk-oce-dev-"+randomToken()+"\n"), 0o600); err != nil {
			return "", nil, err
		}
	}
	k, err := os.ReadFile(key)
	if err != nil {
		return "", nil, err
	}
	keys := filepath.Join(dir, devStateDir, devProviderKeyFile)
	if err := os.WriteFile(keys, k, 0o600); err != nil {
		return "", nil, err
	}
	args := []string{"--valid-key-file", keys}
	if cfg.FakeReply != "" {
		args = append(args, "--reply", cfg.FakeReply)
	}
	cmd := exec.Command(filepath.Join(cfg.BinDir, "fakeprovider"), args...)
	logf, err := os.OpenFile(filepath.Join(dir, devStateDir, "fakeprovider.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("dev: start fakeprovider (run make build): %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if t := s.Text(); strings.HasPrefix(t, "PORT ") {
				line <- strings.TrimPrefix(t, "PORT ")
				break
			}
		}
		close(line)
	}()
	select {
	case p, ok := <-line:
		if !ok {
			stop()
			return "", nil, errors.New("dev: fakeprovider exited before printing its port")
		}
		return "http://127.0.0.1:" + p, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, errors.New("dev: fakeprovider did not print its port within 30s")
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
}
