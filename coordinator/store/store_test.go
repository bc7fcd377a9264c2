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

// cluster bootstraps nodes[0] and joins the rest through the leader of the
// moment (a join repeated with the same addresses changes nothing).
func cluster(t testing.TB, size int) []*node {
	t.Helper()
	nodes := []*node{newNode(t, "n1", true)}
	waitLeader(t, nodes)
	for i := 2; i <= size; i++ {
		n := newNode(t, fmt.Sprintf("n%d", i), false)
		require.NoError(t, onLeader(t, nodes, func(l *node) error {
			return l.s.Join(ctxT(t), n.cfg.NodeID, n.s.RaftAddr(), n.cfg.HTTPAddr)
		}))
		nodes = append(nodes, n)
	}
	return nodes
}

// Tests never assume a leader keeps leading: on a loaded machine a member
// misses heartbeats and another takes over (pre-vote only keeps a member
// that was cut off from deposing a healthy leader). They find the leader
// by observation (waitLeader), send leader-only operations through
// onLeader, which follows a change only where repeating is safe, and
// assert what a leader serves inside one term (steady).

// observeLeader returns the leader every node names in one term, when all
// of them agree and that node says it leads; nil otherwise.
func observeLeader(nodes []*node) (*node, uint64) {
	term, id := nodes[0].s.raft.CurrentTerm(), nodes[0].s.LeaderID()
	var leader *node
	for _, n := range nodes {
		if id == "" || n.s.raft.CurrentTerm() != term || n.s.LeaderID() != id {
			return nil, 0
		}
		if n.s.IsLeader() {
			if leader != nil {
				return nil, 0
			}
			leader = n
		}
	}
	if leader == nil || leader.cfg.NodeID != id {
		return nil, 0
	}
	return leader, term
}

// waitLeader waits until every node names one leader in one term.
func waitLeader(t testing.TB, nodes []*node) *node {
	t.Helper()
	var leader *node
	require.Eventually(t, func() bool {
		leader, _ = observeLeader(nodes)
		return leader != nil
	}, waitFor, 5*time.Millisecond, "no single leader")
	return leader
}

// onLeader runs op on the leader, and on the next one while op fails with
// ErrNotLeader (with or without ErrOutcomeUnknown): only for operations
// safe to repeat, being idempotent or keyed (propose).
func onLeader(t testing.TB, nodes []*node, op func(l *node) error) error {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		err := op(waitLeader(t, nodes))
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrOutcomeUnknown) || time.Now().After(deadline) {
			return err
		}
	}
}

// steady runs read against the leader, again until leadership did not move
// while it ran, and returns that leader: what read saw belongs to one term.
func steady(t testing.TB, nodes []*node, read func(l *node) error) *node {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		l, term := observeLeader(nodes)
		if l == nil {
			l = waitLeader(t, nodes)
			continue
		}
		err := read(l)
		if after, now := observeLeader(nodes); err == nil && after == l && now == term {
			return l
		}
		require.True(t, time.Now().Before(deadline), "leadership kept moving (last error: %v)", err)
	}
}

var proposals atomic.Int64

// propose proposes on the leader under an idempotency key of its own, so
// the retry onLeader makes after a leader change applies it at most once;
// a retry of an entry that did commit answers a *state.Replay.
func propose(t testing.TB, nodes []*node, ctx context.Context, typ state.Named, payload any) (any, error) {
	t.Helper()
	ctx = state.WithIdempotency(ctx, state.Idempotency{Key: fmt.Sprintf("test-%d", proposals.Add(1)), Hash: typ.Name(), Status: 200})
	var res any
	err := onLeader(t, nodes, func(l *node) error {
		var err error
		res, err = l.s.Propose(ctx, typ.Name(), payload)
		return err
	})
	return res, err
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

// createNS creates namespace ns<i> through the leader of nodes.
func createNS(t testing.TB, nodes []*node, i int) {
	t.Helper()
	_, err := propose(t, nodes, ctxT(t), state.CmdCreateNamespace, state.CreateNamespace{ID: fmt.Sprintf("ns%d", i), Name: fmt.Sprintf("name-%d", i)})
	require.NoError(t, err)
}

func TestReplication(t *testing.T) {
	nodes := cluster(t, 3)
	res, err := propose(t, nodes, WithActor(ctxT(t), "alice"), state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "one"})
	require.NoError(t, err)
	if r, ok := res.(*state.Replay); ok { // committed by a leader that lost leadership before answering
		require.Equal(t, state.CmdCreateNamespace.Name(), r.Record.Type)
	} else {
		require.Equal(t, "ns1", res.(state.Namespace).ID)
	}
	for i := 2; i < 20; i++ {
		createNS(t, nodes, i)
	}
	// The FSM's error comes back through Propose and changes nothing.
	_, err = propose(t, nodes, ctxT(t), state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "again"})
	require.ErrorIs(t, err, state.ErrConflict)

	converged(t, nodes)
	for _, n := range nodes {
		require.Len(t, n.s.Machine().Namespaces(), 19, n.cfg.NodeID)
		ns1, ok := n.s.Machine().Namespace("ns1")
		require.True(t, ok, n.cfg.NodeID)
		require.Equal(t, "one", ns1.Name, "the conflicting create changed nothing")
	}
	// A follower's view of the cluster, taken within one leader's term.
	var info ClusterInfo
	var f *node
	leader := steady(t, nodes, func(l *node) error {
		f = nodes[0]
		if f == l {
			f = nodes[1]
		}
		var err error
		info, err = f.s.ClusterInfo(ctxT(t))
		return err
	})
	require.Equal(t, f.cfg.NodeID, info.NodeID)
	require.Equal(t, "Follower", info.State)
	require.Equal(t, leader.cfg.NodeID, info.LeaderID)
	require.Equal(t, leader.cfg.HTTPAddr, info.LeaderHTTP)
	require.Len(t, info.Members, 3)
	for i, m := range info.Members {
		require.Equal(t, nodes[i].cfg.NodeID, m.ID)
		require.Equal(t, nodes[i].cfg.HTTPAddr, m.HTTPAddr)
		require.Equal(t, nodes[i].s.RaftAddr(), m.RaftAddr)
		require.Equal(t, "voter", m.Suffrage)
		require.Equal(t, nodes[i] == leader, m.Leader)
	}
	require.Equal(t, leader.s.Machine().Digest(), info.Digest)
	// Only the leader runs the leader callback.
	require.Eventually(t, func() bool {
		l, _ := observeLeader(nodes)
		if l == nil || l.led.Load() != 1 {
			return false
		}
		for _, n := range nodes {
			if n != l && n.led.Load() != 0 {
				return false
			}
		}
		return true
	}, waitFor, 10*time.Millisecond, "one callback, on the leader")
}

func TestFollowerNotLeader(t *testing.T) {
	nodes := cluster(t, 3)
	var f *node
	errs := map[string]error{}
	var proposeErr error
	leader := steady(t, nodes, func(l *node) error {
		f = nodes[0]
		if f == l {
			f = nodes[1]
		}
		if f.s.LeaderHTTPAddr() != l.cfg.HTTPAddr {
			return errors.New("the follower has not heard of the leader yet")
		}
		_, proposeErr = f.s.Propose(ctxT(t), state.CmdCreateNamespace.Name(), state.CreateNamespace{ID: "x", Name: "x"})
		errs = map[string]error{
			"verify":   f.s.VerifyLeader(ctxT(t)),
			"leading":  f.s.WaitLeading(ctxT(t)),
			"join":     f.s.Join(ctxT(t), "n9", "127.0.0.1:1", "127.0.0.1:2"),
			"remove":   f.s.Remove(ctxT(t), "n3"),
			"transfer": f.s.TransferLeadership(ctxT(t), ""),
			"save":     f.s.SnapshotSave(ctxT(t), &bytes.Buffer{}),
			"restore":  f.s.SnapshotRestore(ctxT(t), &bytes.Buffer{}),
		}
		if err := l.s.WaitLeading(ctxT(t)); err != nil {
			return err
		}
		return l.s.VerifyLeader(ctxT(t))
	})
	require.ErrorIs(t, proposeErr, ErrNotLeader)
	require.NotErrorIs(t, proposeErr, ErrOutcomeUnknown)
	var nl *NotLeaderError
	require.True(t, errors.As(proposeErr, &nl))
	require.Equal(t, leader.cfg.NodeID, nl.LeaderID)
	require.Equal(t, leader.cfg.HTTPAddr, nl.LeaderHTTPAddr())
	for name, err := range errs {
		require.ErrorIs(t, err, ErrNotLeader, name)
	}
	require.Empty(t, f.s.Machine().Namespaces())
}

func TestJoinValidationAndIdempotence(t *testing.T) {
	nodes := cluster(t, 2)
	// Refused requests change nothing, so following a leader change is safe.
	refused := func(op func(l *Store) error) error {
		return onLeader(t, nodes, func(l *node) error { return op(l.s) })
	}
	for _, c := range []struct{ id, raft, http string }{
		{"", "127.0.0.1:1", "127.0.0.1:2"},
		{"a b", "127.0.0.1:1", "127.0.0.1:2"},
		{"n9", "nohostport", "127.0.0.1:2"},
		{"n9", "127.0.0.1:1", ""},
	} {
		require.ErrorIs(t, refused(func(l *Store) error { return l.Join(ctxT(t), c.id, c.raft, c.http) }), ErrInvalidMember, c)
	}
	require.ErrorIs(t, refused(func(l *Store) error { return l.Remove(ctxT(t), "nope") }), ErrInvalidMember)
	require.ErrorIs(t, refused(func(l *Store) error { return l.TransferLeadership(ctxT(t), "nope") }), ErrInvalidMember)
	require.ErrorIs(t, onLeader(t, nodes, func(l *node) error { return l.s.TransferLeadership(ctxT(t), l.cfg.NodeID) }),
		ErrInvalidMember, "a transfer to itself")

	members := func() []Member {
		var info ClusterInfo
		steady(t, nodes, func(l *node) error {
			var err error
			info, err = l.s.ClusterInfo(ctxT(t))
			return err
		})
		return info.Members
	}
	// Re-joining with the same addresses changes nothing but may refresh HTTP
	// (a join is idempotent: onLeader may repeat it).
	require.NoError(t, onLeader(t, nodes, func(l *node) error {
		return l.s.Join(ctxT(t), "n2", nodes[1].s.RaftAddr(), "127.0.0.1:9999")
	}))
	m := members()
	require.Len(t, m, 2)
	require.Equal(t, "127.0.0.1:9999", m[1].HTTPAddr)

	// A reused id with a new Raft address replaces the stale entry (n2 no
	// longer listens there: read n1's view).
	moved := freePort(t)
	require.NoError(t, onLeader(t, nodes, func(l *node) error { return l.s.Join(ctxT(t), "n2", moved, "127.0.0.1:9998") }))
	var info ClusterInfo
	require.Eventually(t, func() bool {
		var err error
		info, err = nodes[0].s.ClusterInfo(ctxT(t))
		return err == nil && len(info.Members) == 2 && info.Members[1].RaftAddr == moved
	}, waitFor, 10*time.Millisecond)
	require.Equal(t, "127.0.0.1:9998", info.Members[1].HTTPAddr)
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	nodes := cluster(t, 3)
	for i := range 10 {
		createNS(t, nodes, i)
	}
	var backup bytes.Buffer
	require.NoError(t, onLeader(t, nodes, func(l *node) error {
		backup.Reset()
		return l.s.SnapshotSave(ctxT(t), &backup)
	}))
	want := converged(t, nodes)
	for i := 10; i < 15; i++ {
		createNS(t, nodes, i)
	}
	before := converged(t, nodes)
	require.NotEqual(t, want, before)

	// Invalid streams fail closed and change nothing.
	for name, b := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a backup"),
		"truncated": backup.Bytes()[:len(backup.Bytes())/2],
		"badheader": append([]byte("OCESNAP1\xff\xff\xff\xff"), backup.Bytes()[12:]...),
	} {
		require.ErrorIs(t, onLeader(t, nodes, func(l *node) error { return l.s.SnapshotRestore(ctxT(t), bytes.NewReader(b)) }),
			ErrInvalidBackup, name)
	}
	require.Equal(t, before, converged(t, nodes))

	// Restoring one backup twice leaves what restoring it once does.
	require.NoError(t, onLeader(t, nodes, func(l *node) error {
		return l.s.SnapshotRestore(ctxT(t), bytes.NewReader(backup.Bytes()))
	}))
	require.Equal(t, want, converged(t, nodes))
	require.Len(t, nodes[2].s.Machine().Namespaces(), 10)
	// Membership metadata survived the restore, and the cluster still commits.
	steady(t, nodes, func(l *node) error {
		for _, n := range nodes {
			if n.s.LeaderHTTPAddr() != l.cfg.HTTPAddr {
				return fmt.Errorf("%s names leader %q", n.cfg.NodeID, n.s.LeaderHTTPAddr())
			}
		}
		return nil
	})
	createNS(t, nodes, 99)
	converged(t, nodes)
	require.Len(t, nodes[1].s.Machine().Namespaces(), 11)
}

// TestLeaderElectionAfterStop: when the leader stops, another takes over,
// and it is leading (WaitLeading) only once its state holds everything the
// old leader acknowledged — which its followers may not have applied yet
// when it stopped (no convergence is awaited here on purpose).
func TestLeaderElectionAfterStop(t *testing.T) {
	nodes := cluster(t, 3)
	const acked = 10
	for i := range acked {
		createNS(t, nodes, i)
	}
	old := waitLeader(t, nodes)
	require.NoError(t, old.s.Close())
	require.Zero(t, old.led.Load(), "leader callback stopped on close")

	var rest []*node
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	var l *node
	require.Eventually(t, func() bool {
		l, _ = observeLeader(rest)
		return l != nil
	}, waitFor, time.Millisecond, "a new leader")
	if err := l.s.WaitLeading(ctxT(t)); err == nil {
		require.Len(t, l.s.Machine().Namespaces(), acked, "a leading leader holds every acknowledged entry")
	} else {
		require.ErrorIs(t, err, ErrNotLeader, "only a lost leadership stops the wait")
	}
	require.Eventually(t, func() bool {
		l, _ := observeLeader(rest)
		return l != nil && l.led.Load() == 1
	}, waitFor, 10*time.Millisecond, "a new leader runs the leader callback")
	createNS(t, rest, acked)
	converged(t, rest)
	steady(t, rest, func(l *node) error {
		for _, n := range rest {
			if n.s.LeaderHTTPAddr() != l.cfg.HTTPAddr {
				return fmt.Errorf("%s names leader %q", n.cfg.NodeID, n.s.LeaderHTTPAddr())
			}
		}
		return nil
	})
	require.Len(t, rest[0].s.Machine().Namespaces(), acked+1)
}

func TestTransferAndRemove(t *testing.T) {
	nodes := cluster(t, 3)
	createNS(t, nodes, 1)
	// Hand leadership to a follower. Should leadership move meanwhile (a
	// loaded machine), the leader of the moment hands it on; the target is
	// done only once a transfer to it was accepted.
	var to *node
	var accepted bool
	require.Eventually(t, func() bool {
		l, _ := observeLeader(nodes)
		if l == nil {
			return false
		}
		if l == to {
			if accepted {
				return to.led.Load() == 1
			}
			to = nil // it took leadership by an election: transfer it to another
		}
		if to == nil {
			to = nodes[0]
			if to == l {
				to = nodes[1]
			}
		}
		accepted = l.s.TransferLeadership(ctxT(t), to.cfg.NodeID) == nil
		return false
	}, waitFor, 10*time.Millisecond, "a transfer accepted and completed")
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if n != to && n.led.Load() != 0 {
				return false
			}
		}
		return true
	}, waitFor, 10*time.Millisecond, "the callback runs only on the new leader")

	// Remove a former leader (a removal repeated is refused as unknown).
	from := nodes[0]
	if from == to {
		from = nodes[1]
	}
	var rest []*node
	for _, n := range nodes {
		if n != from {
			rest = append(rest, n)
		}
	}
	err := onLeader(t, nodes, func(l *node) error { return l.s.Remove(ctxT(t), from.cfg.NodeID) })
	if !errors.Is(err, ErrInvalidMember) { // a retry after a lost answer finds it gone
		require.NoError(t, err)
	}
	var info ClusterInfo
	steady(t, rest, func(l *node) error {
		var err error
		info, err = l.s.ClusterInfo(ctxT(t))
		return err
	})
	require.Len(t, info.Members, 2)
	for _, m := range info.Members {
		require.NotEqual(t, from.cfg.NodeID, m.ID)
	}
	createNS(t, rest, 2)
	converged(t, rest)
}

func TestRestartFromDisk(t *testing.T) {
	nodes := cluster(t, 3)
	for i := range 30 {
		createNS(t, nodes, i)
	}
	// Force a snapshot on one node so its restart goes through FSM.Restore.
	// Raft refuses one while a configuration entry (a new leader's) is not
	// yet applied; a snapshot taken again is harmless.
	converged(t, nodes)
	require.Eventually(t, func() bool { return nodes[1].s.raft.Snapshot().Error() == nil }, waitFor, 10*time.Millisecond)
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
		createNS(t, []*node{n1}, i)
	}
	require.NoError(t, n1.s.raft.Snapshot().Error())
	n2 := newNode(t, "n2", false)
	require.NoError(t, n1.s.Join(ctxT(t), "n2", n2.s.RaftAddr(), n2.cfg.HTTPAddr))
	both := []*node{n1, n2}
	converged(t, both)
	require.Len(t, n2.s.Machine().Namespaces(), 20)
	steady(t, both, func(l *node) error {
		if n2.s.LeaderHTTPAddr() != l.cfg.HTTPAddr {
			return fmt.Errorf("n2 names leader %q", n2.s.LeaderHTTPAddr())
		}
		return nil
	})
}

func TestOpenValidation(t *testing.T) {
	_, err := Open(Config{})
	require.Error(t, err)
	_, err = Open(Config{NodeID: "a", DataDir: t.TempDir(), RaftBind: "0.0.0.0:0"})
	require.ErrorContains(t, err, "advertise")
}

func TestReady(t *testing.T) {
	nodes := cluster(t, 2)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.s.Ready(ctxT(t)) == nil }, waitFor, 10*time.Millisecond, n.cfg.NodeID)
	}
	loner := newNode(t, "n9", false)
	require.ErrorIs(t, loner.s.Ready(ctxT(t)), ErrNotReady, "no leader, not a member")
	member, err := loner.s.IsMember(ctxT(t))
	require.NoError(t, err)
	require.False(t, member)
	var st Stats
	steady(t, nodes, func(l *node) error { st = l.s.Stats(); return nil })
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

// A member's own DNS name published after its process started: the
// advertise address is asked again until it resolves, within the wait; a
// name that never resolves fails the start, an IP is never retried.
func TestAdvertiseResolvesLate(t *testing.T) {
	orig := resolveTCP
	t.Cleanup(func() { resolveTCP = orig })
	for _, tc := range []struct {
		name      string
		addr      string
		failFirst int
		wantErr   bool
		wantCalls int
	}{
		{name: "published a moment later", addr: "oce-coordinator-1.oce-coordinator:7300", failFirst: 3, wantCalls: 4},
		{name: "never published", addr: "oce-coordinator-1.oce-coordinator:7300", failFirst: 1 << 30, wantErr: true},
		{name: "an IP is not retried", addr: "10.0.0.1:7300", failFirst: 1 << 30, wantErr: true, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			resolveTCP = func(network, addr string) (*net.TCPAddr, error) {
				calls++
				if calls <= tc.failFirst {
					return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
				}
				return &net.TCPAddr{IP: net.IPv4(10, 232, 0, 4), Port: 7300}, nil
			}
			a, err := resolveAdvertise(tc.addr, 2*time.Second)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				require.Equal(t, "10.232.0.4:7300", a.String())
			}
			if tc.wantCalls > 0 {
				require.Equal(t, tc.wantCalls, calls)
			} else {
				require.Greater(t, calls, 3, "asked again until the wait ended")
			}
		})
	}
}
