package netns

import (
	"net"
	"os"
	"testing"

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
