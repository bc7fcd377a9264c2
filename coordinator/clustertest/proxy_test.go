package clustertest

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func echoServer(t *testing.T, addr string) string {
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					if _, err := c.Write(append(s.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func dialFrom(t *testing.T, ip, addr string) net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip reports whether a line echoes back through c.
func roundTrip(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

func TestProxyCutBlockHeal(t *testing.T) {
	target := echoServer(t, "127.0.0.31:0")
	p, err := NewProxy("127.0.0.31:0", target)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })

	a := dialFrom(t, "127.0.0.32", p.Addr())
	b := dialFrom(t, "127.0.0.33", p.Addr())
	require.True(t, roundTrip(a))
	require.True(t, roundTrip(b))

	p.Block("127.0.0.32")
	require.False(t, roundTrip(a), "blocked source's open connection is dropped")
	require.False(t, roundTrip(dialFrom(t, "127.0.0.32", p.Addr())), "blocked source's new connection is refused")
	require.True(t, roundTrip(b), "other sources pass")

	p.Cut()
	require.False(t, roundTrip(b))
	require.False(t, roundTrip(dialFrom(t, "127.0.0.33", p.Addr())))

	p.Heal()
	require.True(t, roundTrip(dialFrom(t, "127.0.0.32", p.Addr())))
	require.True(t, roundTrip(dialFrom(t, "127.0.0.33", p.Addr())))
}

func TestProxyDropNextAnswer(t *testing.T) {
	target := echoServer(t, "127.0.0.34:0")
	p, err := NewProxy("127.0.0.34:0", target)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	a := dialFrom(t, "127.0.0.35", p.Addr())
	require.True(t, roundTrip(a))
	p.DropNextAnswer()
	require.False(t, roundTrip(a), "the answer is dropped and the connection broken")
	require.True(t, roundTrip(dialFrom(t, "127.0.0.35", p.Addr())), "only one answer is dropped")
}
