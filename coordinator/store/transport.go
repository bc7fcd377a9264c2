package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is raft's TCP stream layer with one difference: outgoing
// connections leave from the bind address's IP when it is a specific one,
// so a multi-homed host (or a test that gives every node its own loopback
// IP) sees each node's traffic come from that node's address.
//
// With TLS set, every connection is mutual TLS: accepted ones must present
// a certificate of the cluster CA (a member without one cannot join or send
// entries), dialed ones present this member's.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	localIP   net.IP
	tls       *RaftTLS
}

// RaftTLS is the mutual TLS of the Raft transport (coordinator/certs makes
// both configurations).
type RaftTLS struct {
	Server *tls.Config // RequireAndVerifyClientCert with the cluster CA
	Client *tls.Config // presents this member's certificate, verifies the peer's
}

func newStreamLayer(bind, advertise string, rt *RaftTLS) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", bind, err)
	}
	s := &streamLayer{ln: ln, advertise: ln.Addr(), tls: rt}
	if advertise != "" {
		a, err := resolveAdvertise(advertise, AdvertiseResolveWait)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("raft advertise %s: %w", advertise, err)
		}
		if a.IP == nil || a.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("raft advertise %s: not an advertisable address", advertise)
		}
		s.advertise = a
		if host, _, _ := net.SplitHostPort(advertise); net.ParseIP(host) == nil {
			// a DNS name (a StatefulSet member's stable name) is what peers
			// store and dial: the Pod's IP changes when it is rescheduled
			s.advertise = nameAddr(advertise)
		}
	} else if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		_ = ln.Close()
		return nil, fmt.Errorf("raft bind %s is unspecified: set an advertise address", bind)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		s.localIP = ta.IP
	}
	return s, nil
}

// AdvertiseResolveWait bounds the wait for an advertised DNS name to
// resolve at start: a StatefulSet member's own name is published (the
// headless Service's endpoints, then the cluster DNS) a few seconds after
// its Pod got an address, and the process may start before that.
const AdvertiseResolveWait = 60 * time.Second

// resolveTCP is net.ResolveTCPAddr (tests stand in a slow DNS).
var resolveTCP = net.ResolveTCPAddr

// resolveAdvertise resolves advertise, asking again for a DNS name that
// does not resolve yet, up to wait.
func resolveAdvertise(advertise string, wait time.Duration) (*net.TCPAddr, error) {
	host, _, _ := net.SplitHostPort(advertise)
	deadline := time.Now().Add(wait)
	pause := 100 * time.Millisecond
	for {
		a, err := resolveTCP("tcp", advertise)
		if err == nil || net.ParseIP(host) != nil || time.Now().Add(pause).After(deadline) {
			return a, err
		}
		time.Sleep(pause) // no context at start: bounded by wait
		pause = min(2*pause, 2*time.Second)
	}
}

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if s.localIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: s.localIP}
	}
	if s.tls == nil {
		return d.Dial("tcp", string(address))
	}
	// The handshake runs within the dial timeout, so a peer that is not a
	// member fails here rather than in the first RPC.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	td := tls.Dialer{NetDialer: &d, Config: s.tls.Client}
	return td.DialContext(ctx, "tcp", string(address))
}

// Accept implements net.Listener. A TLS connection's handshake runs on its
// first read, in raft's per-connection goroutine, so a slow or hostile
// client never stalls the accept loop.
func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil || s.tls == nil {
		return c, err
	}
	return tls.Server(c, s.tls.Server), nil
}

// Close implements net.Listener.
func (s *streamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener; raft advertises it.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// nameAddr is an advertised address given by DNS name; peers resolve it
// when they dial.
type nameAddr string

// Network implements net.Addr.
func (nameAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a nameAddr) String() string { return string(a) }
