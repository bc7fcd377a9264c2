package store

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is raft's TCP stream layer with one difference: outgoing
// connections leave from the bind address's IP when it is a specific one,
// so a multi-homed host (or a test that gives every node its own loopback
// IP) sees each node's traffic come from that node's address.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	localIP   net.IP
}

func newStreamLayer(bind, advertise string) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", bind, err)
	}
	s := &streamLayer{ln: ln, advertise: ln.Addr()}
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("raft advertise %s: %w", advertise, err)
		}
		if a.IP == nil || a.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("raft advertise %s: not an advertisable address", advertise)
		}
		s.advertise = a
	} else if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		_ = ln.Close()
		return nil, fmt.Errorf("raft bind %s is unspecified: set an advertise address", bind)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		s.localIP = ta.IP
	}
	return s, nil
}

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if s.localIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: s.localIP}
	}
	return d.Dial("tcp", string(address))
}

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }

// Close implements net.Listener.
func (s *streamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener; raft advertises it.
func (s *streamLayer) Addr() net.Addr { return s.advertise }
