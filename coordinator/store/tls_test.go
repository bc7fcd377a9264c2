package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/certs"
)

// pki is a CA with member certificates on disk.
type pki struct {
	dir  string
	ca   []byte
	key  []byte
	pool *x509.CertPool
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	dir := t.TempDir()
	ca, key, err := certs.NewCA(name, time.Now())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644))
	pool, err := certs.LoadPool(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)
	return &pki{dir: dir, ca: ca, key: key, pool: pool}
}

// member issues a certificate and returns the Raft TLS of a member holding it.
func (p *pki) member(t *testing.T, id string) (*RaftTLS, *certs.Reloader) {
	t.Helper()
	crt, key, err := certs.Issue(p.ca, p.key, id, []string{"127.0.0.1"}, time.Now(), time.Hour)
	require.NoError(t, err)
	cf, kf := filepath.Join(p.dir, id+".crt"), filepath.Join(p.dir, id+".key")
	require.NoError(t, os.WriteFile(cf, crt, 0o644))
	require.NoError(t, os.WriteFile(kf, key, 0o600))
	rl, err := certs.NewReloader(cf, kf)
	require.NoError(t, err)
	return &RaftTLS{Server: certs.PeerServerTLS(rl, p.pool), Client: certs.PeerClientTLS(rl, p.pool)}, rl
}

func tlsNode(t *testing.T, id string, bootstrap bool, rt *RaftTLS) *node {
	t.Helper()
	n := &node{}
	n.cfg = Config{NodeID: id, DataDir: t.TempDir(), RaftBind: freePort(t), HTTPAddr: freePort(t),
		Bootstrap: bootstrap, Timeouts: fastTimeouts, RaftTLS: rt}
	n.open(t)
	return n
}

// TestRaftMutualTLS: members of the cluster CA replicate over mutual TLS; a
// member whose certificate another CA issued is added to the configuration
// but never receives an entry, and cannot even complete a handshake with a
// member, in either direction.
func TestRaftMutualTLS(t *testing.T) {
	good := newPKI(t, "cluster CA")
	evil := newPKI(t, "another CA")
	rt1, _ := good.member(t, "n1")
	rt2, _ := good.member(t, "n2")
	rtX, _ := evil.member(t, "x")
	n1 := tlsNode(t, "n1", true, rt1)
	waitLeader(t, []*node{n1})
	n2 := tlsNode(t, "n2", false, rt2)
	x := tlsNode(t, "x", false, rtX)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, n1.s.Join(ctx, "n2", n2.s.RaftAddr(), n2.cfg.HTTPAddr))
	createNS(t, []*node{n1, n2}, 1)
	converged(t, []*node{n1, n2})
	require.NotZero(t, n2.s.Machine().Applied())

	// The foreign member is added to the configuration (as a non-voter, so
	// the cluster keeps its quorum): the leader still sends it nothing.
	require.NoError(t, onLeader(t, []*node{n1, n2}, func(l *node) error { // adding it again changes nothing
		if err := l.s.raft.AddNonvoter("x", raft.ServerAddress(x.s.RaftAddr()), 0, waitFor).Error(); err != nil {
			return l.s.raftErr(err, false)
		}
		return nil
	}))
	createNS(t, []*node{n1, n2}, 2)
	converged(t, []*node{n1, n2})
	// Replication to x fails on the handshake: it applies nothing.
	require.Never(t, func() bool { return x.s.Machine().Applied() > 0 }, 3*time.Second, 50*time.Millisecond)

	// Direct handshakes: the foreign certificate is refused by a member,
	// and a member refuses the foreign server's certificate.
	for name, cfg := range map[string]*tls.Config{
		"foreign client certificate": rtX.Client,
		"no client certificate":      {InsecureSkipVerify: true, MinVersion: tls.VersionTLS13},
	} {
		conn, err := tls.Dial("tcp", n1.s.RaftAddr(), cfg)
		if err == nil {
			// TLS 1.3 reports a refused client certificate on the first read.
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		require.Error(t, err, name)
	}
	_, err := tls.Dial("tcp", x.s.RaftAddr(), rt1.Client)
	require.ErrorContains(t, err, "certificate signed by unknown authority", "a member refuses a server certificate of another CA")
}
