// Package octest starts a real, pinned OpenClaw gateway for integration
// tests: headless, password auth, bound to loopback, network-calling
// features off. It refuses to start outside a loopback-only network
// namespace (see shared/netns).
package octest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// ReadyTimeout bounds the wait for /readyz (the gateway takes 22–40 s here).
const ReadyTimeout = 180 * time.Second

// Gateway is a running openclaw gateway.
type Gateway struct {
	URL      string // ws://127.0.0.1:PORT
	HTTPURL  string // http://127.0.0.1:PORT
	Port     int
	Password string
	Dir      string // state, home and config live here
	LogPath  string
	cmd      *exec.Cmd
	done     chan error
}

// Options tune the gateway.
type Options struct {
	Password string         // default a random-ish test password
	Config   map[string]any // merged over the defaults at the top level (gateway is merged one level deep)
	Env      []string       // extra environment
	Dir      string         // default a temp dir
}

// FreePort returns a free loopback TCP port.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// BaseConfig is the native configuration the test gateway starts from.
func BaseConfig(port int, logFile string) map[string]any {
	return map[string]any{
		"gateway": map[string]any{"mode": "local", "bind": "loopback", "port": port,
			"auth": map[string]any{"mode": "password"}},
		"update":    map[string]any{"checkOnStart": false},
		"discovery": map[string]any{"mdns": map[string]any{"mode": "off"}},
		"logging":   map[string]any{"file": logFile},
	}
}

// Start launches the gateway and waits until /readyz answers 200.
func Start(ctx context.Context, o Options) (*Gateway, error) {
	if err := netns.Isolated(); err != nil {
		return nil, fmt.Errorf("octest: refusing to start a real gateway outside a loopback-only namespace: %w", err)
	}
	rt, err := runtimes.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "octest-gw-*"); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"home", "state", "tmp", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	password := o.Password
	if password == "" {
		password = "octest-password-" + strconv.Itoa(port)
	}
	cfg := BaseConfig(port, filepath.Join(dir, "logs", "openclaw.log"))
	for k, v := range o.Config {
		if k == "gateway" {
			if m, ok := v.(map[string]any); ok {
				g := cfg["gateway"].(map[string]any)
				for gk, gv := range m {
					g[gk] = gv
				}
				continue
			}
		}
		cfg[k] = v
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(dir, "openclaw.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "logs", "gateway.out")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	argv := rt.OpenClawCommand("gateway", "run", "--port", strconv.Itoa(port), "--bind", "loopback", "--auth", "password")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state"),
		"OPENCLAW_CONFIG_PATH=" + cfgPath,
		"OPENCLAW_GATEWAY_PASSWORD=" + password,
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_SKIP_CHANNELS=1",
	}, o.Env...)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	out.Close()
	g := &Gateway{URL: fmt.Sprintf("ws://127.0.0.1:%d", port), HTTPURL: fmt.Sprintf("http://127.0.0.1:%d", port),
		Port: port, Password: password, Dir: dir, LogPath: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() { g.done <- cmd.Wait() }()
	if err := g.WaitReady(ctx, ReadyTimeout); err != nil {
		g.Kill()
		return nil, err
	}
	return g, nil
}

// WaitReady polls /readyz until it answers 200, the process exits, or the
// timeout passes.
func (g *Gateway) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := client.Get(g.HTTPURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-g.done:
			g.done <- err
			tail, _ := os.ReadFile(g.LogPath)
			if len(tail) > 4000 {
				tail = tail[len(tail)-4000:]
			}
			return fmt.Errorf("octest: gateway exited before ready: %v\n%s", err, tail)
		case <-deadline.C:
			return errors.New("octest: gateway not ready within " + timeout.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Stop sends SIGTERM to the gateway's process group and waits (10 s, then SIGKILL).
func (g *Gateway) Stop() error {
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-g.done:
		g.done <- err
		return nil
	case <-time.After(10 * time.Second):
		g.Kill()
		return errors.New("octest: gateway ignored SIGTERM for 10 s")
	}
}

// Kill ends the gateway's process group at once.
func (g *Gateway) Kill() { _ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL) }

// Pid is the gateway launcher's pid.
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }
