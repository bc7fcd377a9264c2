package netns

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { Main(m, Options{PrivateTmp: true}) }

func TestOnlyLoopback(t *testing.T) {
	require.NoError(t, Isolated())
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	require.Len(t, ifs, 1)
	require.Equal(t, "lo", ifs[0].Name)
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
	require.Eventually(t, func() bool {
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
