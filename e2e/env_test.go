// Package e2e runs oce end to end on one machine with the real OpenClaw
// gateway and the real Codex app-server: `occ dev up` (the local compute
// driver and the offline fake provider), deploys through the coordinator API
// with occ, and talks to the Agents with `occ agent send`. The test binary
// runs inside a loopback-only network namespace (netns.Main).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// FakeReply is the fake provider's reply text in these tests.
const FakeReply = "E2E-FAKE-REPLY"

type runner struct{ m *testing.M }

func (r runner) Run() int {
	code := r.m.Run()
	shared.teardown()
	return code
}

func TestMain(m *testing.M) { netns.Main(runner{m}, netns.Options{PrivateTmp: true}) }

// env is one `occ dev up` shared by the tests of this binary.
type env struct {
	once    sync.Once
	err     error
	root    string // work dir: the dev dir is root/.oce
	bin     string
	addr    string
	upTook  time.Duration
	started time.Time
	// extraEnv is added to every occ binary's environment (a benchmark's
	// OCE_CREDENTIAL_CHECK, which occ dev up hands its coordinator).
	extraEnv []string
}

var shared env

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found")
		}
		dir = parent
	}
}

// buildBinaries builds every cmd/ binary into dir.
func buildBinaries(dir string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// up starts the shared dev environment once.
func (e *env) up(t testing.TB) {
	t.Helper()
	e.once.Do(func() {
		if _, e.err = runtimes.Ensure(context.Background()); e.err != nil {
			return
		}
		if e.root, e.err = os.MkdirTemp("", "oce-e2e-"); e.err != nil {
			return
		}
		e.bin = filepath.Join(e.root, "bin")
		if e.err = buildBinaries(e.bin); e.err != nil {
			return
		}
		if e.addr, e.err = freeAddr(); e.err != nil {
			return
		}
		e.started = time.Now()
		out, code := e.occBin(context.Background(), "dev", "up", "--http-addr", e.addr, "--fake-reply", FakeReply)
		e.upTook = time.Since(e.started)
		if code != 0 {
			e.err = fmt.Errorf("occ dev up exited %d:\n%s", code, out)
		}
	})
	require.NoError(t, e.err)
}

func (e *env) teardown() {
	if e.root == "" {
		return
	}
	out, code := e.occBin(context.Background(), "dev", "down")
	if code != 0 {
		fmt.Fprintf(os.Stderr, "occ dev down exited %d:\n%s", code, out)
	}
	if os.Getenv("OCE_E2E_KEEP") != "" { // a failure's logs, kept for reading
		fmt.Fprintf(os.Stderr, "e2e: kept %s (OCE_E2E_KEEP)\n", e.root)
		return
	}
	_ = os.RemoveAll(e.root)
}

// devDir is the dev data dir (`occ dev up` default under the work dir).
func (e *env) devDir() string { return filepath.Join(e.root, occ.DefaultDevDir) }

// occBin runs the built occ binary in the work dir.
func (e *env) occBin(ctx context.Context, args ...string) (string, int) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "occ"), args...)
	cmd.Dir = e.root
	// the dev coordinator serves TLS; occ trusts ./.oce/coordinator/tls/ca.crt
	cmd.Env = append(append(os.Environ(), "OCC_SERVER=https://"+e.addr), e.extraEnv...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return b.String(), ee.ExitCode()
	}
	if err != nil {
		return b.String() + err.Error(), -1
	}
	return b.String(), 0
}

// occ runs an occ command in-process against the dev coordinator.
func (e *env) occ(t testing.TB, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := occ.Main(t.Context(), append([]string{"--server", "https://" + e.addr}, args...),
		occ.Options{Stdout: &out, Stderr: &out, WorkDir: e.root, ConfigFile: filepath.Join(e.root, "none.yaml"),
			Getenv: func(string) string { return "" }, PollInterval: 200 * time.Millisecond})
	return out.String(), code
}

// mustOcc runs occ and requires exit 0.
func (e *env) mustOcc(t testing.TB, args ...string) string {
	t.Helper()
	out, code := e.occ(t, args...)
	require.Equal(t, 0, code, "occ %s:\n%s", strings.Join(args, " "), out)
	return out
}

// getJSON runs an occ read command with -o json into v.
func (e *env) getJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	out := e.mustOcc(t, append([]string{"-o", "json"}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
}

// demoFile is a configuration document of scripts/demo.
func demoFile(t testing.TB, name string) string {
	t.Helper()
	root, err := moduleRoot()
	require.NoError(t, err)
	return filepath.Join(root, "scripts", "demo", name)
}

// writeSecret writes a key to the dev secrets directory and registers it
// (again) as credential source <name> of the default Namespace, which
// Agents there reference as local:<name> or credential:<name>.
func (e *env) writeSecret(t testing.TB, name, value string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(e.devDir(), "secrets", name), []byte(value), 0o600))
	verb := "register"
	if _, code := e.occ(t, "credential", "get", name); code == 0 {
		verb = "rotate"
	}
	e.mustOcc(t, "credential", verb, name, "--from-local", name)
}

// runPids lists the supervisor pids recorded for an Agent's revisions
// (with start times), plus all their live descendants.
func (e *env) agentProcs(t testing.TB, agentID string) []proc {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(e.devDir(), "runtimes", "*", agentID, "revisions", "*", "run.json"))
	var out []proc
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var r struct{ Gateway, Harness, Probe *proc }
		require.NoError(t, json.Unmarshal(b, &r))
		for _, p := range []*proc{r.Gateway, r.Harness, r.Probe} {
			if p != nil && p.alive() {
				out = append(out, *p)
				out = append(out, descendants(p.PID)...)
			}
		}
	}
	return out
}

type proc struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func (p proc) alive() bool {
	f := statFields(p.PID)
	if len(f) < 20 || f[0] == "Z" {
		return false
	}
	return p.StartTime == 0 || f[19] == fmt.Sprint(p.StartTime)
}

func descendants(pid int) []proc {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		var n int
		if _, err := fmt.Sscan(e.Name(), &n); err != nil {
			continue
		}
		f := statFields(n)
		if len(f) < 2 {
			continue
		}
		var pp int
		fmt.Sscan(f[1], &pp)
		children[pp] = append(children[pp], n)
	}
	var out []proc
	q := []int{pid}
	for len(q) > 0 {
		c := q[0]
		q = q[1:]
		for _, k := range children[c] {
			f := statFields(k)
			if len(f) < 20 {
				continue
			}
			var st uint64
			fmt.Sscan(f[19], &st)
			out = append(out, proc{PID: k, StartTime: st})
			q = append(q, k)
		}
	}
	return out
}

func anyAlive(ps []proc) bool {
	for _, p := range ps {
		if p.alive() {
			return true
		}
	}
	return false
}

var _ = syscall.Getpid
