package gatewayd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logtest"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// Binaries built once per test binary (inside the namespace).
var (
	binDir      string
	gatewaydBin string
	fakeOCBin   string
	nodehostBin string
	tiniBin     string
)

type buildFirst struct{ m *testing.M }

func (b buildFirst) Run() int {
	dir, err := os.MkdirTemp("", "gatewayd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	gatewaydBin, fakeOCBin, nodehostBin = filepath.Join(dir, "gatewayd"), filepath.Join(dir, "openclaw"), filepath.Join(dir, "nodehost")
	for pkg, out := range map[string]string{"oce.dev/oce/cmd/gatewayd": gatewaydBin,
		"oce.dev/oce/gatewayd/internal/fakeopenclaw": fakeOCBin, "oce.dev/oce/cmd/nodehost": nodehostBin} {
		args := []string{"build", "-o", out}
		if pkg == "oce.dev/oce/cmd/gatewayd" && os.Getenv("GATEWAYD_TEST_RACE") == "1" {
			args = append(args, "-race") // the supervisor under test, with the race detector
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			return 1
		}
	}
	paths, err := runtimes.Ensure(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tiniBin = paths.Tini
	return b.m.Run()
}

// Real OpenClaw gateways run in a loopback-only namespace with a private /tmp.
func TestMain(m *testing.M) { netns.Main(buildFirst{m}, netns.Options{PrivateTmp: true}) }

// syncBuf collects a process's stderr.
type syncBuf struct{ logtest.Buffer }

func (s *syncBuf) records() []map[string]any { return s.JSONRecords() }

// phase returns the runtime.startup_phase records of name.
func (s *syncBuf) phase(name string) []map[string]any {
	var out []map[string]any
	for _, r := range s.records() {
		if r["msg"] == "runtime.startup_phase" && r["phase"] == name {
			out = append(out, r)
		}
	}
	return out
}

// gwProc is gatewayd running under real tini.
type gwProc struct {
	t          *testing.T
	cmd        *exec.Cmd
	log        *syncBuf
	statusAddr string
	port       int
	dir        string
	done       chan struct{}
	exit       int
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// gwEnv is the runtime contract for a local gatewayd in dir.
func gwEnv(t testing.TB, dir string, topology contract.Topology, port, statusPort int) map[string]string {
	for _, d := range []string{"secrets", "tmp", "home"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secrets", "gateway-password"), []byte("gw-test-password-1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "status-token"), []byte("status-token-xyz"), 0o600))
	return map[string]string{
		"PATH":                      os.Getenv("PATH"),
		"HOME":                      filepath.Join(dir, "home"),
		"TMPDIR":                    filepath.Join(dir, "tmp"),
		"OCE_TOPOLOGY":              string(topology),
		"OCE_NAMESPACE_ID":          "ns1",
		"OCE_AGENT_ID":              "agent1",
		"OCE_REVISION_ID":           "rev1",
		"OCE_STATUS_ADDR":           fmt.Sprintf("127.0.0.1:%d", statusPort),
		"OCE_SECRETS_DIR":           filepath.Join(dir, "secrets"),
		"OCE_STATUS_TOKEN_FILE":     filepath.Join(dir, "status-token"),
		"OPENCLAW_CONFIG_PATH":      filepath.Join(dir, "admitted.json"),
		"OCE_GATEWAY_CONFIG_DIR":    filepath.Join(dir, "config"),
		"OPENCLAW_STATE_DIR":        filepath.Join(dir, "state"),
		"OCE_WORKSPACE_DIR":         filepath.Join(dir, "workspace"),
		"OPENCLAW_GATEWAY_PORT":     fmt.Sprint(port),
		"OCE_GATEWAY_BIND":          "loopback",
		"OCE_RUNTIME_ASSETS_SOURCE": filepath.Join(dir, "assets-src"),
		"OCE_RUNTIME_ASSETS_DIR":    filepath.Join(dir, "assets"),
		"OPENCLAW_SKIP_CHANNELS":    "1",
	}
}

// startGW runs `tini -s -e 143 -- gatewayd` with env.
func startGW(t *testing.T, dir string, env map[string]string) *gwProc {
	cmd := exec.Command(tiniBin, "-s", "-e", "143", "--", gatewaydBin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	lg := &syncBuf{}
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start())
	p := &gwProc{t: t, cmd: cmd, log: lg, statusAddr: env["OCE_STATUS_ADDR"], dir: dir, done: make(chan struct{})}
	fmt.Sscan(env["OPENCLAW_GATEWAY_PORT"], &p.port)
	go func() {
		_ = cmd.Wait()
		p.exit = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			// gatewayd's children lead their own groups: kill the whole tree
			for _, pid := range descendants(cmd.Process.Pid) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			tail := lg.String()
			if len(tail) > 6000 {
				tail = tail[len(tail)-6000:]
			}
			t.Logf("gatewayd log tail:\n%s", tail)
		}
	})
	return p
}

// ready asks gatewayd's /readyz.
func (p *gwProc) ready() (bool, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.statusAddr + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode == 200, b.String()
}

func (p *gwProc) waitReady(timeout time.Duration) {
	p.t.Helper()
	var held string
	require.Eventually(p.t, func() bool {
		ok, body := p.ready()
		if strings.Contains(body, "startup check") {
			held = body
			return true // a held failure never becomes ready: stop waiting
		}
		return ok
	}, timeout, 250*time.Millisecond, "gatewayd never ready")
	require.Empty(p.t, held, "gatewayd holds a startup failure")
}

func (p *gwProc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *gwProc) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.exit
	case <-time.After(timeout):
		p.t.Fatalf("gatewayd did not exit within %s", timeout)
		return -1
	}
}

// runtimeStatus reads /openclaw/runtime/status (loopback caller).
func (p *gwProc) runtimeStatus() map[string]any {
	resp, err := http.Get("http://" + p.statusAddr + "/openclaw/runtime/status")
	require.NoError(p.t, err)
	defer resp.Body.Close()
	var m map[string]any
	require.NoError(p.t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

// readyProbe runs `gatewayd ready` as kubelet would.
func readyProbe(t *testing.T, statusAddr string) (int, string) {
	cmd := exec.Command(gatewaydBin, "ready")
	cmd.Env = []string{"OCE_STATUS_ADDR=" + statusAddr}
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

func writeJSONFile(t testing.TB, path string, v any) {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// descendants lists pid's process tree (pid excluded), parents first.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		c := childPids(queue[0])
		queue = append(queue[1:], c...)
		out = append(out, c...)
	}
	return out
}
