package clustertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSingleNodeDeployAndRestart(t *testing.T) {
	c := startCluster(t, clusterOpts{size: 1, ipBase: 50})
	ctx := context.Background()
	names := c.setupWorkload(ctx, t, 5)
	for _, n := range names {
		_, err := c.deploy(ctx, n)
		require.NoError(t, err)
	}
	s := c.awaitState(ctx, t, c.Nodes[0], snapshotOf.notServing)
	s.checkInvariants(t, 5)
	want := c.converged(c.Nodes)

	c.Nodes[0].stop()
	c.start(c.Nodes[0])
	c.waitLeader(c.Nodes)
	require.Equal(t, want, c.converged(c.Nodes))
}
