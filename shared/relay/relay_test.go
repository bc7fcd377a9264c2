package relay

import (
	"bufio"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServeForwardsTCPToUnix(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "up.sock")
	up, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("echo " + line))
			}()
		}
	}()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- Serve(front, func() (net.Conn, error) { return net.Dial("unix", sock) }) }()
	for range 3 {
		c, err := net.Dial("tcp", front.Addr().String())
		require.NoError(t, err)
		_, err = c.Write([]byte("hi\n"))
		require.NoError(t, err)
		got, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "echo hi\n", got)
		c.Close()
	}
	require.NoError(t, front.Close())
	require.NoError(t, <-done, "a closed listener ends Serve cleanly")
}

func TestServeDropsWhenDialFails(t *testing.T) {
	front, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer front.Close()
	go func() { _ = Serve(front, func() (net.Conn, error) { return nil, net.ErrClosed }) }()
	c, err := net.Dial("tcp", front.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = bufio.NewReader(c).ReadByte()
	require.Error(t, err, "the accepted connection is closed when the upstream cannot be dialed")
}
