package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

func TestReadBarrierAndIndexes(t *testing.T) {
	nodes := cluster(t, 3)
	for i := range 10 {
		createNS(t, nodes, i)
	}
	// Within one leader's term: the leader's barrier passes what it applied,
	// a follower's is refused.
	var last, i uint64
	followerErrs := map[string]error{}
	leader := steady(t, nodes, func(l *node) error {
		last = l.s.AppliedIndex()
		var err error
		if i, err = l.s.ReadBarrier(ctxT(t)); err != nil {
			return err
		}
		for _, n := range nodes {
			if n != l {
				_, followerErrs[n.cfg.NodeID] = n.s.ReadBarrier(ctxT(t))
			}
		}
		return nil
	})
	require.GreaterOrEqual(t, i, last, "a linearizable read sees every acknowledged write")
	require.Len(t, followerErrs, len(nodes)-1)
	for id, err := range followerErrs {
		require.ErrorIs(t, err, ErrNotLeader, id)
	}
	for _, n := range nodes {
		got, err := n.s.WaitApplied(ctxT(t), last)
		require.NoError(t, err)
		require.GreaterOrEqual(t, got, last)
		require.Len(t, n.s.Machine().Namespaces(), 10)
	}

	// A blocking wait wakes on the next apply, not before.
	f := nodes[1].s
	if f == leader.s {
		f = nodes[2].s
	}
	at := f.AppliedIndex()
	woke := make(chan uint64, 1)
	go func() { woke <- f.WaitIndexChange(ctxT(t), at) }()
	select {
	case i := <-woke:
		t.Fatalf("woke at %d without an apply", i)
	case <-time.After(50 * time.Millisecond):
	}
	createNS(t, nodes, 99)
	require.Greater(t, <-woke, at)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.WaitApplied(ctx, f.AppliedIndex()+1000)
	require.ErrorIs(t, err, context.Canceled)
}

// TestFollowerFreshness: a follower is fresh only while it hears the
// leader's commit index and trails it by at most ReadyMaxLag entries.
func TestFollowerFreshness(t *testing.T) {
	nodes := cluster(t, 3)
	createNS(t, nodes, 1)
	// Fresh allows a lag of ReadyMaxLag entries: wait until every member
	// applied the namespace too, so the comparison below is about the
	// commit index the follower heard, not one that has applied nothing yet.
	converged(t, nodes)
	leader := waitLeader(t, nodes)
	var followers []*node
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	f, g := followers[0], followers[1]
	require.Eventually(t, func() bool { return f.s.Fresh() == nil }, waitFor, 10*time.Millisecond)
	c, ok := f.s.LeaderCommit()
	require.True(t, ok)
	require.GreaterOrEqual(t, c, f.s.AppliedIndex()-1)

	// The leader announces a commit index far beyond what this follower
	// applied (as after a restart behind the cluster): not fresh, not ready.
	f.s.watch.observe(f.s.raft.CurrentTerm(), f.s.AppliedIndex()+ReadyMaxLag+10)
	require.ErrorIs(t, f.s.Fresh(), ErrNotReady)
	require.ErrorContains(t, f.s.Ready(ctxT(t)), "committed entries")

	// A stopped leader's announcements go stale within the heartbeat
	// timeout (the leader of the moment: it may have changed meanwhile).
	if now := waitLeader(t, nodes); now != leader {
		g, leader = leader, now // the former leader follows now (and is not f)
	}
	require.Eventually(t, func() bool { return g.s.Fresh() == nil }, waitFor, 10*time.Millisecond)
	require.NoError(t, leader.s.Close())
	require.Eventually(t, func() bool { return g.s.Fresh() != nil }, waitFor, 10*time.Millisecond)
}

// TestRestartedMemberReplaysBeforeServing: a member that restarts with a log
// on disk reports Replaying (and not Fresh) until it applied that log.
func TestRestartedMemberReplaysBeforeServing(t *testing.T) {
	n := newNode(t, "n1", true)
	waitLeader(t, []*node{n})
	for i := range 20 {
		createNS(t, []*node{n}, i)
	}
	last := n.s.LastIndex()
	require.NoError(t, n.s.Close())
	n.open(t)
	// Before an election no entry after the last snapshot is applied.
	require.True(t, n.s.Replaying())
	require.ErrorContains(t, n.s.Fresh(), "no leader")
	require.Less(t, n.s.AppliedIndex(), last)
	waitLeader(t, []*node{n})
	require.Eventually(t, func() bool { return !n.s.Replaying() && n.s.Fresh() == nil }, waitFor, 10*time.Millisecond)
	require.GreaterOrEqual(t, n.s.AppliedIndex(), last)
	require.Len(t, n.s.Machine().Namespaces(), 20)
}

func TestProposeCarriesIdempotencyStamp(t *testing.T) {
	n := newNode(t, "n1", true)
	waitLeader(t, []*node{n})
	ctx := state.WithIdempotency(WithActor(ctxT(t), "alice"), state.Idempotency{Key: "k", Hash: "h", Status: 201})
	res, err := n.s.Propose(ctx, state.CmdCreateNamespace.Name(), state.CreateNamespace{ID: "a", Name: "a"})
	require.NoError(t, err)
	require.Equal(t, "a", res.(state.Namespace).ID)
	res, err = n.s.Propose(ctx, state.CmdCreateNamespace.Name(), state.CreateNamespace{ID: "b", Name: "b"})
	require.NoError(t, err)
	require.Equal(t, state.CmdCreateNamespace.Name(), res.(*state.Replay).Record.Type)
	require.Len(t, n.s.Machine().Namespaces(), 1)
}
