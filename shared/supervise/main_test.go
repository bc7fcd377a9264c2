package supervise_test

import (
	"bufio"
	"context"
	"fmt"
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

	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
	"oce.dev/oce/shared/supervise"
)

var (
	helper  string         // the built supervisetest binary
	rt      runtimes.Paths // tini, node
	testSup *supervise.Supervisor
)

// TestMain runs the tests in a loopback-only network namespace (the
// benchmarks listen on TCP and start node), builds the test program, and
// makes the test process itself a supervisor: from then on every child is
// started through the package, never os/exec, and orphans the tests create
// are reaped here.
func TestMain(m *testing.M) { netns.Main(setup{m}, netns.Options{}) }

type setup struct{ m *testing.M }

func (s setup) Run() int {
	dir, err := os.MkdirTemp("", "supervise-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	helper = filepath.Join(dir, "supervisetest")
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go"
	}
	build := exec.Command(gobin, "build", "-o", helper, "oce.dev/oce/shared/supervise/internal/cmd/supervisetest")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build test program:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if rt, err = runtimes.Ensure(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testSup, err = supervise.New(supervise.Options{NoSignals: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return s.m.Run()
}

// child is a started process whose stdout lines the test reads.
type child struct {
	*supervise.Process
	lines chan string
}

// spawn starts path args under the test supervisor with stdout on a pipe.
func spawn(t testing.TB, spec supervise.Spec) *child {
	t.Helper()
	return spawnWith(t, testSup, spec)
}

// spawnWith is spawn under the supervisor s.
func spawnWith(t testing.TB, s *supervise.Supervisor, spec supervise.Spec) *child {
	t.Helper()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	spec.Stdout = pw
	stderr := &logtest.Buffer{}
	if spec.Stderr == nil {
		spec.Stderr = stderr
	}
	p, err := s.Start(context.Background(), spec)
	pw.Close()
	require.NoError(t, err)
	c := &child{Process: p, lines: make(chan string, 64)}
	go func() {
		defer close(c.lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr of %s (pid %d):\n%s", p.Name(), p.Pid(), stderr.String())
		}
		_ = p.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = p.Wait(ctx)
	})
	return c
}

func run(t testing.TB, path string, args ...string) *child {
	return spawn(t, supervise.Spec{Path: path, Args: args, StopBudget: time.Second})
}

// expect returns the next line starting with prefix, failing at the deadline
// or when stdout closes.
func (c *child) expect(t testing.TB, prefix string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			require.True(t, ok, "stdout closed before %q", prefix)
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			require.FailNow(t, "timed out waiting for line", prefix)
		}
	}
}

// field returns the value of key=value in a line.
func field(t testing.TB, line, key string) int {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	require.FailNow(t, "no field", "%s in %q", key, line)
	return 0
}

// pidsOf parses "PIDS a b c".
func pidsOf(t testing.TB, line string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "PIDS")) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		out = append(out, n)
	}
	require.NotEmpty(t, out)
	return out
}

func (c *child) wait(t testing.TB) supervise.ExitStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := c.Wait(ctx)
	require.NoError(t, err)
	return st
}

// procInfo is one /proc/<pid>/stat entry.
type procInfo struct {
	pid, ppid int
	state     byte
}

func procTable() map[int]procInfo {
	out := map[int]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+4 > len(s) {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = procInfo{pid: pid, ppid: ppid, state: f[0][0]}
	}
	return out
}

// descendants lists every process below root (root excluded).
func descendants(root int) []procInfo {
	tbl := procTable()
	var out []procInfo
	for _, p := range tbl {
		for a, n := p.ppid, 0; a > 1 && n < 64; a, n = tbl[a].ppid, n+1 {
			if a == root {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func zombies(ps []procInfo) []procInfo {
	var out []procInfo
	for _, p := range ps {
		if p.state == 'Z' {
			out = append(out, p)
		}
	}
	return out
}

// gone reports that none of pids exists any more.
func gone(pids []int) bool {
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			return false
		}
	}
	return true
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

func kill(t testing.TB, pid int, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, syscall.Kill(pid, sig))
}

// expectTermAll waits until every pid reported "GOT-TERM pid=…": the stop
// signal reached the whole group.
func (c *child) expectTermAll(t testing.TB, pids []int) {
	t.Helper()
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	for len(want) > 0 {
		delete(want, field(t, c.expect(t, "GOT-TERM"), "pid"))
	}
}
