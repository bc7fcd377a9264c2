package harnessd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"oce.dev/oce/shared/logtest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
	"oce.dev/oce/shared/status"
)

// Binaries built once per test binary (inside the namespace).
var (
	harnessdBin string
	nodehostBin string
	rt          runtimes.Paths
)

type buildFirst struct{ m *testing.M }

func (b buildFirst) Run() int {
	dir, err := os.MkdirTemp("", "harnessd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	harnessdBin, nodehostBin = filepath.Join(dir, "harnessd"), filepath.Join(dir, "nodehost")
	for pkg, out := range map[string]string{"oce.dev/oce/cmd/harnessd": harnessdBin, "oce.dev/oce/cmd/nodehost": nodehostBin} {
		args := []string{"build", "-o", out}
		if os.Getenv("OCE_TEST_RACE_BINARIES") == "1" {
			args = append(args, "-race") // the supervisors themselves under the race detector
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			return 1
		}
	}
	if rt, err = runtimes.Ensure(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return b.m.Run()
}

// Real Codex runs in a loopback-only namespace with a private /tmp.
func TestMain(m *testing.M) { netns.Main(buildFirst{m}, netns.Options{PrivateTmp: true}) }

// Planted credentials: their exact bytes must never show up in a log line,
// a child's argv or a child's environment.
const (
	plantedKey   = "sk-oce-planted-5f1c2e9a7b3d4c61"
	plantedToken = "tok-oce-planted-app-server-0a9f3b"
	badKey       = "sk-oce-wrong-key-77aa01bb"
	staleKey     = "sk-oce-stale-login-3e8d0c1f"
	statusKey    = "plugin-status-hmac-key-for-tests"
	revisionID   = "rev-0001"
	podUID       = "pod-uid-1234"
)

// syncBuf collects a process's stderr.
type syncBuf struct{ logtest.Buffer }

func (s *syncBuf) records() []map[string]any { return s.JSONRecords() }

// phases returns the runtime.startup_phase records in order.
func (s *syncBuf) phases() []map[string]any {
	var out []map[string]any
	for _, r := range s.records() {
		if r["msg"] == "runtime.startup_phase" {
			out = append(out, r)
		}
	}
	return out
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// hd is harnessd running as `tini -s -e 143 -- harnessd`.
type hd struct {
	t          testing.TB
	cmd        *exec.Cmd
	log        *syncBuf
	dir        string
	codexHome  string
	codexState string
	statusAddr string
	appPort    int
	done       chan struct{}
	exit       int
}

type hdOpts struct {
	mode        string
	key         string // OPENAI_API_KEY (env projection)
	keyFile     bool   // deliver the key as a secret file instead
	accessToken string
	baseURL     string // Responses base of the custom endpoint
	plugins     string
	enrollment  bool        // plant an enrollment file for the companion node
	plant       func(h *hd) // runs before harnessd starts
}

func startHD(t testing.TB, o hdOpts) *hd {
	t.Helper()
	dir := t.TempDir()
	h := &hd{t: t, log: &syncBuf{}, dir: dir, codexHome: filepath.Join(dir, "codex-home"), codexState: filepath.Join(dir, "codex-state"),
		statusAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)), appPort: freePort(t), done: make(chan struct{})}
	secrets := filepath.Join(dir, "secrets")
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.MkdirAll(secrets, 0o700))
	require.NoError(t, os.MkdirAll(tmp, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, SecretPluginStatusKey), []byte(statusKey), 0o600))
	native := fmt.Sprintf(`{"agents":{"defaults":{"model":"codex/gpt-6-sol"}},"models":{"providers":{"codex":{"baseUrl":%q,"api":"openai-responses"}}}}`, o.baseURL)
	env := []string{
		"PATH=" + filepath.Dir(rt.Codex) + ":" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"TMPDIR=" + tmp,
		EnvLoginMode + "=" + o.mode,
		EnvCodexHome + "=" + h.codexHome,
		EnvCodexState + "=" + h.codexState,
		EnvWorkspace + "=" + filepath.Join(dir, "workspace"),
		EnvNativeConfig + "=" + native,
		EnvAppServerPort + "=" + strconv.Itoa(h.appPort),
		EnvAppServerBind + "=127.0.0.1",
		EnvStatusAddr + "=" + h.statusAddr,
		EnvSecretsDir + "=" + secrets,
		EnvPodUID + "=" + podUID,
		EnvRevisionID + "=" + revisionID,
		EnvNodehostBin + "=" + nodehostBin,
		EnvNodehostState + "=" + filepath.Join(dir, "node-state"),
		EnvLogLevel + "=info",
	}
	if o.keyFile {
		require.NoError(t, os.WriteFile(filepath.Join(secrets, SecretAppServerToken), []byte(plantedToken), 0o600))
	} else {
		env = append(env, EnvAppServerToken+"="+plantedToken)
	}
	if o.key != "" {
		if o.keyFile {
			require.NoError(t, os.WriteFile(filepath.Join(secrets, SecretAPIKey), []byte(o.key+"\n"), 0o600))
		} else {
			env = append(env, EnvAPIKey+"="+o.key)
		}
	}
	if o.accessToken != "" {
		env = append(env, EnvAccessToken+"="+o.accessToken)
	}
	if o.plugins != "" {
		env = append(env, EnvPlugins+"="+o.plugins)
	}
	if o.enrollment {
		f := filepath.Join(dir, "enrollment")
		require.NoError(t, os.WriteFile(f, []byte("not-a-setup-code"), 0o600))
		env = append(env, EnvNodehostEnroll+"="+f, EnvNodehostGateway+"=ws://127.0.0.1:1")
	}
	if o.plant != nil {
		o.plant(h)
	}
	h.cmd = exec.Command(rt.Tini, "-s", "-e", "143", "--", harnessdBin)
	h.cmd.Env = env
	h.cmd.Stdout = h.log
	h.cmd.Stderr = h.log
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	h.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, h.cmd.Start())
	go func() {
		_ = h.cmd.Wait()
		h.exit = h.cmd.ProcessState.ExitCode()
		close(h.done)
	}()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			for _, p := range descendantsOf(h.cmd.Process.Pid) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
			<-h.done
		}
		if t.Failed() {
			t.Logf("harnessd log:\n%s", h.log.String())
		}
	})
	return h
}

func (h *hd) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	h.t.Cleanup(cancel)
	return ctx
}

// readiness asks the status server like the exec probe does.
func (h *hd) readiness() (bool, string) {
	ok, reason, _ := status.ReadyCheck(context.Background(), h.statusAddr)
	return ok, reason
}

func (h *hd) waitReady() {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		select {
		case <-h.done:
			return true
		default:
		}
		ok, reason := h.readiness()
		if strings.Contains(reason, "startup check") {
			return true // held: fail below without waiting out the deadline
		}
		return ok
	}, 90*time.Second, 20*time.Millisecond)
	if ok, reason := h.readiness(); !ok {
		h.t.Fatalf("not ready: %s", reason)
	}
	select {
	case <-h.done:
		h.t.Fatalf("harnessd exited %d", h.exit)
	default:
	}
}

// waitHeld waits until readiness reports a held failure and returns it.
func (h *hd) waitHeld() status.RuntimeFailure {
	h.t.Helper()
	var reason string
	require.Eventually(h.t, func() bool {
		_, reason = h.readiness()
		return strings.Contains(reason, "startup check")
	}, 120*time.Second, 50*time.Millisecond)
	return h.held()
}

// held reads the published failure from /openclaw/runtime/status.
func (h *hd) held() status.RuntimeFailure {
	h.t.Helper()
	var doc struct {
		RuntimeFailure *status.RuntimeFailure `json:"runtimeFailure"`
	}
	var out []byte
	resp, err := http.Get("http://" + h.statusAddr + status.PathRuntimeStatus)
	if err == nil {
		out, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil && json.Unmarshal(out, &doc) == nil && doc.RuntimeFailure != nil {
		return *doc.RuntimeFailure
	}
	_, reason := h.readiness()
	h.t.Fatalf("no runtimeFailure in status (%v): %s / %s", err, out, reason)
	return status.RuntimeFailure{}
}

// readyCmd runs `harnessd ready` as kubelet would.
func (h *hd) readyCmd() (int, string) {
	cmd := exec.Command(harnessdBin, "ready")
	cmd.Env = []string{EnvStatusAddr + "=" + h.statusAddr}
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), strings.TrimSpace(string(out))
}

func (h *hd) stop() (int, time.Duration) {
	start := time.Now()
	require.NoError(h.t, h.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		h.t.Fatal("harnessd did not stop")
	}
	return h.exit, time.Since(start)
}

// pid of harnessd: tini's only child.
func (h *hd) harnessdPid() int {
	h.t.Helper()
	var pid int
	require.Eventually(h.t, func() bool {
		kids := childrenOf(h.cmd.Process.Pid)
		if len(kids) >= 1 {
			pid = kids[0]
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "tini (%d) has no child: %v", h.cmd.Process.Pid, procTable())
	return pid
}

// childrenOf lists the pids whose parent is ppid.
func childrenOf(ppid int) []int {
	var out []int
	for _, p := range allPids() {
		if parentOf(p) == ppid {
			out = append(out, p)
		}
	}
	return out
}

func procTable() map[int]int {
	m := map[int]int{}
	for _, p := range allPids() {
		m[p] = parentOf(p)
	}
	return m
}

// descendantsOf lists every process below pid.
func descendantsOf(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		kids := childrenOf(queue[0])
		queue = append(queue[1:], kids...)
		out = append(out, kids...)
	}
	return out
}

func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func startFake(t testing.TB, keys ...string) *fakeprovider.Server {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fp, err := fakeprovider.Start(ctx, fakeprovider.Options{ValidKeys: keys, SlowInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fp.Close() })
	return fp
}
