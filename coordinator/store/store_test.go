package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// fastTimeouts keep elections short in tests.
var fastTimeouts = Timeouts{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond,
	LeaderLease: 250 * time.Millisecond, Commit: 20 * time.Millisecond}

const waitFor = 10 * time.Second

type node struct {
	cfg Config
	s   *Store
	led atomic.Int32 // OnLeader runs currently active
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func newNode(t testing.TB, id string, bootstrap bool) *node {
	t.Helper()
	n := &node{}
	n.cfg = Config{NodeID: id, DataDir: t.TempDir(), RaftBind: freePort(t), HTTPAddr: freePort(t),
		Bootstrap: bootstrap, Timeouts: fastTimeouts}
	n.cfg.OnLeader = func(ctx context.Context, _ *Store) {
		n.led.Add(1)
		<-ctx.Done()
		n.led.Add(-1)
	}
	n.open(t)
	return n
}

func (n *node) open(t testing.TB) {
	t.Helper()
	s, err := Open(n.cfg)
	require.NoError(t, err)
	n.s = s
	t.Cleanup(func() { _ = s.Close() })
}

// cluster bootstraps nodes[0] and joins the rest through it.
func cluster(t testing.TB, size int) []*node {
	t.Helper()
	nodes := []*node{newNode(t, "n1", true)}
	waitLeader(t, nodes)
	for i := 2; i <= size; i++ {
		n := newNode(t, fmt.Sprintf("n%d", i), false)
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		require.NoError(t, nodes[0].s.Join(ctx, n.cfg.NodeID, n.s.RaftAddr(), n.cfg.HTTPAddr))
		cancel()
		nodes = append(nodes, n)
	}
	return nodes
}

func waitLeader(t testing.TB, nodes []*node) *node {
	t.Helper()
	var leader *node
	require.Eventually(t, func() bool {
		leader = nil
		for _, n := range nodes {
			if n.s.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		return leader != nil
	}, waitFor, 10*time.Millisecond, "no single leader")
	return leader
}

// converged waits until every node applied the same index and reports the
// same digest, and returns that digest.
func converged(t testing.TB, nodes []*node) string {
	t.Helper()
	var digest string
	require.Eventually(t, func() bool {
		idx0, d0 := nodes[0].s.fsm.digest()
		for _, n := range nodes[1:] {
			idx, d := n.s.fsm.digest()
			if idx != idx0 || d != d0 {
				return false
			}
		}
		digest = d0
		return true
	}, waitFor, 10*time.Millisecond, "nodes did not converge")
	return digest
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func createNS(t testing.TB, s *Store, i int) {
	t.Helper()
	_, err := s.Propose(ctxT(t), state.CmdCreateNamespace, state.CreateNamespace{ID: fmt.Sprintf("ns%d", i), Name: fmt.Sprintf("name-%d", i)})
	require.NoError(t, err)
}

func TestReplication(t *testing.T) {
	nodes := cluster(t, 3)
	leader := waitLeader(t, nodes)
	require.Equal(t, "n1", leader.cfg.NodeID)

	res, err := leader.s.Propose(WithActor(ctxT(t), "alice"), state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "one"})
	require.NoError(t, err)
	require.Equal(t, "ns1", res.(state.Namespace).ID)
	for i := 2; i < 20; i++ {
		createNS(t, leader.s, i)
	}
	// The FSM's error comes back through Propose and changes nothing.
	_, err = leader.s.Propose(ctxT(t), state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "again"})
	require.ErrorIs(t, err, state.ErrConflict)

	converged(t, nodes)
	for _, n := range nodes {
		require.Len(t, n.s.Machine().Namespaces(), 19, n.cfg.NodeID)
	}
	info, err := nodes[2].s.ClusterInfo(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "n3", info.NodeID)
	require.Equal(t, "Follower", info.State)
	require.Equal(t, "n1", info.LeaderID)
	require.Equal(t, nodes[0].cfg.HTTPAddr, info.LeaderHTTP)
	require.Len(t, info.Members, 3)
	for i, m := range info.Members {
		require.Equal(t, nodes[i].cfg.NodeID, m.ID)
		require.Equal(t, nodes[i].cfg.HTTPAddr, m.HTTPAddr)
		require.Equal(t, nodes[i].s.RaftAddr(), m.RaftAddr)
		require.Equal(t, "voter", m.Suffrage)
		require.Equal(t, i == 0, m.Leader)
	}
	require.Equal(t, nodes[0].s.Machine().Digest(), info.Digest)
	// Only the leader runs the leader callback.
	require.Eventually(t, func() bool { return nodes[0].led.Load() == 1 }, waitFor, 10*time.Millisecond)
	require.Zero(t, nodes[1].led.Load())
	require.Zero(t, nodes[2].led.Load())
}

func TestFollowerNotLeader(t *testing.T) {
	nodes := cluster(t, 3)
	f := nodes[1].s
	require.Eventually(t, func() bool { return f.LeaderHTTPAddr() == nodes[0].cfg.HTTPAddr }, waitFor, 10*time.Millisecond)

	_, err := f.Propose(ctxT(t), state.CmdCreateNamespace, state.CreateNamespace{ID: "x", Name: "x"})
	require.ErrorIs(t, err, ErrNotLeader)
	require.NotErrorIs(t, err, ErrOutcomeUnknown)
	var nl *NotLeaderError
	require.True(t, errors.As(err, &nl))
	require.Equal(t, "n1", nl.LeaderID)
	require.Equal(t, nodes[0].cfg.HTTPAddr, nl.LeaderHTTPAddr())

	for name, err := range map[string]error{
		"verify":   f.VerifyLeader(ctxT(t)),
		"join":     f.Join(ctxT(t), "n9", "127.0.0.1:1", "127.0.0.1:2"),
		"remove":   f.Remove(ctxT(t), "n3"),
		"transfer": f.TransferLeadership(ctxT(t), ""),
		"save":     f.SnapshotSave(ctxT(t), &bytes.Buffer{}),
		"restore":  f.SnapshotRestore(ctxT(t), &bytes.Buffer{}),
	} {
		require.ErrorIs(t, err, ErrNotLeader, name)
	}
	require.NoError(t, nodes[0].s.VerifyLeader(ctxT(t)))
	require.Empty(t, f.Machine().Namespaces())
}

func TestJoinValidationAndIdempotence(t *testing.T) {
	nodes := cluster(t, 2)
	l := nodes[0].s
	for _, c := range []struct{ id, raft, http string }{
		{"", "127.0.0.1:1", "127.0.0.1:2"},
		{"a b", "127.0.0.1:1", "127.0.0.1:2"},
		{"n9", "nohostport", "127.0.0.1:2"},
		{"n9", "127.0.0.1:1", ""},
	} {
		require.ErrorIs(t, l.Join(ctxT(t), c.id, c.raft, c.http), ErrInvalidMember, c)
	}
	require.ErrorIs(t, l.Remove(ctxT(t), "nope"), ErrInvalidMember)
	require.ErrorIs(t, l.TransferLeadership(ctxT(t), "nope"), ErrInvalidMember)
	require.ErrorIs(t, l.TransferLeadership(ctxT(t), "n1"), ErrInvalidMember)

	// Re-joining with the same addresses changes nothing but may refresh HTTP.
	require.NoError(t, l.Join(ctxT(t), "n2", nodes[1].s.RaftAddr(), "127.0.0.1:9999"))
	info, err := l.ClusterInfo(ctxT(t))
	require.NoError(t, err)
	require.Len(t, info.Members, 2)
	require.Equal(t, "127.0.0.1:9999", info.Members[1].HTTPAddr)

	// A reused id with a new Raft address replaces the stale entry.
	moved := freePort(t)
	require.NoError(t, l.Join(ctxT(t), "n2", moved, "127.0.0.1:9998"))
	info, err = l.ClusterInfo(ctxT(t))
	require.NoError(t, err)
	require.Len(t, info.Members, 2)
	require.Equal(t, moved, info.Members[1].RaftAddr)
	require.Equal(t, "127.0.0.1:9998", info.Members[1].HTTPAddr)
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	nodes := cluster(t, 3)
	l := nodes[0].s
	for i := range 10 {
		createNS(t, l, i)
	}
	var backup bytes.Buffer
	require.NoError(t, l.SnapshotSave(ctxT(t), &backup))
	want := converged(t, nodes)
	for i := 10; i < 15; i++ {
		createNS(t, l, i)
	}
	require.NotEqual(t, want, converged(t, nodes))

	// Invalid streams fail closed and change nothing.
	before := l.Machine().Digest()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a backup"),
		"truncated": backup.Bytes()[:len(backup.Bytes())/2],
		"badheader": append([]byte("OCESNAP1\xff\xff\xff\xff"), backup.Bytes()[12:]...),
	} {
		require.ErrorIs(t, l.SnapshotRestore(ctxT(t), bytes.NewReader(b)), ErrInvalidBackup, name)
	}
	require.Equal(t, before, l.Machine().Digest())

	require.NoError(t, l.SnapshotRestore(ctxT(t), bytes.NewReader(backup.Bytes())))
	require.Equal(t, want, converged(t, nodes))
	require.Len(t, nodes[2].s.Machine().Namespaces(), 10)
	// Membership metadata survived the restore, and the cluster still commits.
	require.Equal(t, nodes[0].cfg.HTTPAddr, nodes[1].s.LeaderHTTPAddr())
	createNS(t, l, 99)
	converged(t, nodes)
	require.Len(t, nodes[1].s.Machine().Namespaces(), 11)
}

func TestLeaderElectionAfterStop(t *testing.T) {
	nodes := cluster(t, 3)
	createNS(t, nodes[0].s, 1)
	converged(t, nodes)
	require.NoError(t, nodes[0].s.Close())
	require.Zero(t, nodes[0].led.Load(), "leader callback stopped on close")

	rest := nodes[1:]
	l := waitLeader(t, rest)
	require.Eventually(t, func() bool { return l.led.Load() == 1 }, waitFor, 10*time.Millisecond)
	createNS(t, l.s, 2)
	converged(t, rest)
	other := rest[0]
	if other == l {
		other = rest[1]
	}
	require.Eventually(t, func() bool { return other.s.LeaderHTTPAddr() == l.cfg.HTTPAddr }, waitFor, 10*time.Millisecond)
	require.Len(t, other.s.Machine().Namespaces(), 2)
}

func TestTransferAndRemove(t *testing.T) {
	nodes := cluster(t, 3)
	createNS(t, nodes[0].s, 1)
	require.NoError(t, nodes[0].s.TransferLeadership(ctxT(t), "n3"))
	require.Eventually(t, func() bool { return nodes[2].s.IsLeader() && nodes[2].led.Load() == 1 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, func() bool { return nodes[0].led.Load() == 0 }, waitFor, 10*time.Millisecond)

	require.NoError(t, nodes[2].s.Remove(ctxT(t), "n1"))
	info, err := nodes[2].s.ClusterInfo(ctxT(t))
	require.NoError(t, err)
	require.Len(t, info.Members, 2)
	createNS(t, nodes[2].s, 2)
	converged(t, nodes[1:])
}

func TestRestartFromDisk(t *testing.T) {
	nodes := cluster(t, 3)
	for i := range 30 {
		createNS(t, nodes[0].s, i)
	}
	// Force a snapshot on one node so its restart goes through FSM.Restore.
	require.NoError(t, nodes[1].s.raft.Snapshot().Error())
	want := converged(t, nodes)
	for _, n := range nodes {
		require.NoError(t, n.s.Close())
	}
	for _, n := range nodes {
		n.cfg.Bootstrap = false
		n.open(t)
	}
	waitLeader(t, nodes)
	require.Equal(t, want, converged(t, nodes))
	require.Len(t, nodes[1].s.Machine().Namespaces(), 30)
}

func TestNewMemberCatchesUpBySnapshot(t *testing.T) {
	n1 := &node{}
	n1.cfg = Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: freePort(t), HTTPAddr: freePort(t),
		Bootstrap: true, Timeouts: fastTimeouts, SnapshotThreshold: 5, TrailingLogs: 2}
	n1.open(t)
	waitLeader(t, []*node{n1})
	for i := range 20 {
		createNS(t, n1.s, i)
	}
	require.NoError(t, n1.s.raft.Snapshot().Error())
	n2 := newNode(t, "n2", false)
	require.NoError(t, n1.s.Join(ctxT(t), "n2", n2.s.RaftAddr(), n2.cfg.HTTPAddr))
	converged(t, []*node{n1, n2})
	require.Len(t, n2.s.Machine().Namespaces(), 20)
	require.Equal(t, n1.cfg.HTTPAddr, n2.s.LeaderHTTPAddr())
}

func TestOpenValidation(t *testing.T) {
	_, err := Open(Config{})
	require.Error(t, err)
	_, err = Open(Config{NodeID: "a", DataDir: t.TempDir(), RaftBind: "0.0.0.0:0"})
	require.ErrorContains(t, err, "advertise")
}

func TestReady(t *testing.T) {
	nodes := cluster(t, 2)
	require.Eventually(t, func() bool { return nodes[1].s.Ready(ctxT(t)) == nil }, waitFor, 10*time.Millisecond)
	require.NoError(t, nodes[0].s.Ready(ctxT(t)))
	loner := newNode(t, "n9", false)
	require.ErrorIs(t, loner.s.Ready(ctxT(t)), ErrNotReady, "no leader, not a member")
	member, err := loner.s.IsMember(ctxT(t))
	require.NoError(t, err)
	require.False(t, member)
	st := nodes[0].s.Stats()
	require.True(t, st.Leader)
	require.Positive(t, st.Leaderships)
}

// A DNS name given as the Raft advertise address (a StatefulSet member's
// stable name) is kept as the name peers store and dial; an IP stays an IP.
func TestAdvertiseByName(t *testing.T) {
	s, err := newStreamLayer("127.0.0.1:0", "localhost:7300", nil)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "localhost:7300", s.Addr().String())
	ip, err := newStreamLayer("127.0.0.1:0", "127.0.0.1:7300", nil)
	require.NoError(t, err)
	defer ip.Close()
	require.Equal(t, "127.0.0.1:7300", ip.Addr().String())
}
