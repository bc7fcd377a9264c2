package clustertest

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRandomPartitionsKeepInvariants isolates a random member (leader or
// follower) six times while every Agent is deployed twice through whichever
// member answers, then heals: every Agent ends with exactly one active
// revision (its newest deploy's or a later one), every activated revision
// has exactly one activate audit record, and all members hold the same
// state.
func TestRandomPartitionsKeepInvariants(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 3, proxied: true, ipBase: 130})
	ctx := context.Background()
	const agents = 60
	names := c.setupWorkload(ctx, t, agents)
	work := append(append([]string{}, names...), names...)
	rand.Shuffle(len(work), func(i, j int) { work[i], work[j] = work[j], work[i] })

	var answered atomic.Int64
	deployErr := make(chan error, 1)
	go func() {
		deployErr <- parallelErr(work, 4, func(name string) error {
			_, err := c.deploy(ctx, name)
			answered.Add(1)
			return err
		})
	}()
	seed := uint64(time.Now().UnixNano())
	t.Logf("victim seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 6 {
		victim := c.Nodes[rng.IntN(len(c.Nodes))]
		c.isolate(victim)
		var rest []*node
		for _, n := range c.Nodes {
			if n != victim {
				rest = append(rest, n)
			}
		}
		leader := c.waitLeader(rest)
		// Stay partitioned until the deploys made progress meanwhile.
		mark := int64((round + 1) * len(work) / 8)
		require.Eventually(t, func() bool { return answered.Load() >= mark }, clusterWait, 5*time.Millisecond,
			"deploys stalled while %s was isolated", victim.ID)
		t.Logf("round %d: isolated %s, leader %s, %d/%d deploys answered", round, victim.ID, leader.ID, answered.Load(), len(work))
		c.heal()
		c.waitMembers(c.Nodes)
	}
	select {
	case err := <-deployErr:
		require.NoError(t, err)
	case <-time.After(5 * clusterWait):
		t.Fatal("deploys did not finish")
	}
	leader := c.waitMembers(c.Nodes)
	c.awaitState(ctx, t, leader, snapshotOf.unsettled)
	c.converged(c.Nodes)
	for _, n := range c.Nodes {
		s := c.read(ctx, t, n)
		s.checkInvariants(t, agents)
		for _, a := range s.agents {
			require.GreaterOrEqual(t, len(s.revisions[a.ID]), 2, "agent %s was deployed twice", a.Name)
		}
	}
}
