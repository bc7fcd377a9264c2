package netns

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"oce.dev/oce/internal/poll"
)

func TestMain(m *testing.M) {
	if os.Getenv(envLeaker) != "" {
		Main(leaker{}, Options{HostNetwork: true})
	}
	if f := os.Getenv(envTermFile); f != "" {
		Main(RunnerFunc(func() int { return awaitTerm(f) }), Options{})
	}
	Main(m, Options{PrivateTmp: true})
}

// envLeaker makes the test binary a leaker: under Main with HostNetwork it
// starts a detached sleep whose argument is the variable's value, writes
// its network namespace to the file envLeakerOut names, and exits without
// ending the sleep.
const (
	envLeaker    = "OCE_NETNS_TEST_LEAKER"
	envLeakerOut = "OCE_NETNS_TEST_LEAKER_OUT"
)

// envTermFile makes the test binary wait (under Main) for SIGTERM, after
// writing "ready" to the file it names; it then writes "terminated".
const envTermFile = "OCE_NETNS_TEST_TERM_FILE"

func awaitTerm(file string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	if err := os.WriteFile(file, []byte("ready"), 0o600); err != nil {
		return 3
	}
	select {
	case <-sigs:
	case <-time.After(time.Minute):
		return 4
	}
	if err := os.WriteFile(file, []byte("terminated"), 0o600); err != nil {
		return 5
	}
	return 0
}

// TestSignalsReachTheTests: SIGTERM to the process go test started reaches
// the tests inside the namespaces (through the namespace's init), so a
// suite's own teardown runs when a run is interrupted.
func TestSignalsReachTheTests(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "term")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(withoutEnv(os.Environ(), envIsolated), envTermFile+"="+file)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(file)
		return string(b) == "ready"
	}, time.Minute, 10*time.Millisecond, "the inner test binary started")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", out.String())
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "terminated", string(b))
}

type leaker struct{}

func (leaker) Run() int {
	cmd := exec.Command("sleep", os.Getenv(envLeaker))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 3
	}
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return 4
	}
	if err := os.WriteFile(os.Getenv(envLeakerOut), []byte(ns), 0o600); err != nil {
		return 5
	}
	return 0 // the sleep is left running on purpose
}

// processesWithArg lists the PIDs whose command line has arg.
func processesWithArg(t *testing.T, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestHostNetworkLeavesNothingBehind: a test binary under Main with
// HostNetwork keeps its parent's network namespace, and a process it
// starts and never ends (detached into its own session) does not outlive
// it.
func TestHostNetworkLeavesNothingBehind(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	mark := fmt.Sprintf("600.%d", os.Getpid()) // a sleep argument no one else uses
	out := filepath.Join(t.TempDir(), "ns")
	cmd := exec.Command(exe, "-test.run=^$")
	// the leaker starts its own namespaces, as a test binary run by go test
	cmd.Env = append(withoutEnv(os.Environ(), envIsolated), envLeaker+"="+mark, envLeakerOut+"="+out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	t.Cleanup(func() {
		for _, pid := range processesWithArg(t, mark) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
	ns, err := os.ReadFile(out)
	require.NoError(t, err, "the leaker ran")
	own, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	require.Equal(t, own, string(ns), "HostNetwork keeps the parent's network namespace")
	require.Empty(t, processesWithArg(t, mark), "the detached sleep outlived its test binary")
}

func TestOnlyLoopback(t *testing.T) {
	require.NoError(t, Isolated())
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	for _, i := range ifs {
		if i.Name == "lo" {
			continue
		}
		// a kernel fallback device may be present, never usable
		require.Zero(t, i.Flags&net.FlagUp, "interface %s is up", i.Name)
		addrs, err := i.Addrs()
		require.NoError(t, err)
		require.Empty(t, addrs, "interface %s has addresses", i.Name)
	}
}

func TestOnlyLoopbackJudgesEachInterface(t *testing.T) {
	lo := iface{name: "lo", loopback: true, up: true, addrs: 2}
	for _, tc := range []struct {
		name string
		ifs  []iface
		want string // "" = isolated
	}{
		{"loopback only", []iface{lo}, ""},
		{"fallback device down", []iface{lo, {name: "ifb0"}, {name: "tunl0"}}, ""},
		{"loopback down", []iface{{name: "lo", loopback: true, addrs: 2}}, "loopback is down"},
		{"no loopback", nil, "no loopback"},
		{"other interface up", []iface{lo, {name: "eth0", up: true}}, `"eth0"`},
		{"other interface addressed", []iface{lo, {name: "veth1", addrs: 1}}, `"veth1"`},
		{"lo that is not loopback", []iface{{name: "lo", up: true}}, `"lo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := onlyLoopback(tc.ifs)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotIsolated)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLoopbackWorks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("x"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	buf := make([]byte, 1)
	_, err = c.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "x", string(buf))
}

func TestNoRouteOutside(t *testing.T) {
	// 192.0.2.1 is TEST-NET-1: never routed; here there is no route at all,
	// so the dial fails at once without sending a packet anywhere.
	_, err := net.Dial("udp", "192.0.2.1:9")
	require.Error(t, err)
}

func TestPrivateTmp(t *testing.T) {
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs("/tmp", &st))
	require.Equal(t, int64(unix.TMPFS_MAGIC), int64(st.Type), "/tmp is not a private tmpfs")
	kept := map[string]bool{}
	for _, k := range hostTmpKeep() {
		kept[k] = true
	}
	entries, err := os.ReadDir("/tmp")
	require.NoError(t, err)
	// only the entries bound back for go test itself are visible
	for _, e := range entries {
		require.True(t, kept[e.Name()], "host /tmp entry %q is visible", e.Name())
	}
}

func TestCommandWrapsUnshare(t *testing.T) {
	cmd, err := Command(Options{PrivateTmp: true}, "/bin/true")
	require.NoError(t, err)
	require.Contains(t, cmd.Args, "--net")
	require.Contains(t, cmd.Args, "/bin/true")
}

func TestPIDNamespace(t *testing.T) {
	// the test binary runs under the reaping init, PID 1 of its namespace
	require.Equal(t, 1, os.Getppid())
	b, err := os.ReadFile("/proc/1/cmdline")
	require.NoError(t, err)
	require.NotEmpty(t, b)
}

// TestEnterCommandSharesNamespaces: a second process joins the network and
// mount namespaces of a Command (its private /tmp and its loopback).
func TestEnterCommandSharesNamespaces(t *testing.T) {
	holder, err := Command(Options{PrivateTmp: true}, "sh", "-c", "echo mark > /tmp/netns-enter-mark; exec sleep 60")
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	hostNet, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	var holderNet string
	poll.Until(t, func() bool {
		holderNet, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid))
		if err != nil || holderNet == hostNet {
			return false
		}
		check, err := EnterCommand(holder.Process.Pid, "cat", "/tmp/netns-enter-mark")
		require.NoError(t, err)
		out, err := check.Output()
		return err == nil && strings.TrimSpace(string(out)) == "mark"
	}, 10*time.Second, 20*time.Millisecond, "the entered process sees the holder's private /tmp")
	enter, err := EnterCommand(holder.Process.Pid, "readlink", "/proc/self/ns/net")
	require.NoError(t, err)
	out, err := enter.Output()
	require.NoError(t, err)
	require.Equal(t, holderNet, strings.TrimSpace(string(out)), "the entered process shares the holder's network namespace")
	require.NotEqual(t, hostNet, holderNet)
	require.NoFileExists(t, "/tmp/netns-enter-mark", "the holder's /tmp is private")
}

func TestFreshEnvDropsTheMark(t *testing.T) {
	// this binary runs under Main, so its environment carries the mark
	require.Equal(t, "1", os.Getenv(envIsolated))
	for _, kv := range FreshEnv() {
		require.False(t, strings.HasPrefix(kv, envIsolated+"="), kv)
	}
	require.Len(t, FreshEnv(), len(os.Environ())-1)
}
