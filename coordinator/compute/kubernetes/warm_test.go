package kubernetes

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"oce.dev/oce/coordinator/state"
)

// TestWarmUpNewLeader: a new leader's driver (caches empty) warmed with the
// active revisions answers its first observation from its caches, without
// a request; and its caches list and watch through WatchClient, never the
// rate-limited client.
func TestWarmUpNewLeader(t *testing.T) {
	ctx := context.Background()
	d, cs, _ := newFakeStatus(t)
	r1 := embeddedRev("r1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: r1.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, r1))
	p, err := d.planFor(r1)
	require.NoError(t, err)
	addPod(t, cs, p.gw, "gateway-r1", p.gatewayPodLabels(), true)
	require.NoError(t, d.ActivateRevision(ctx, r1))

	cfg := d.cfg
	cfg.ObserveCache = true
	leader, err := New(cfg, cs)
	require.NoError(t, err)
	t.Cleanup(leader.Close)
	require.True(t, leader.WarmUp(ctx, []state.Revision{r1}))
	reads := countReads(cs)
	obs, err := leader.ObserveRevision(ctx, r1)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.Zero(t, reads.Load(), "the first observation after warming is the caches'")

	// WatchClient: the caches' lists go there, not to the driver's client.
	var watchLists, mainLists atomic.Int64
	count := func(n *atomic.Int64) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetVerb() == "list" || a.GetVerb() == "watch" {
				n.Add(1)
			}
			return false, nil, nil
		}
	}
	wc := fake.NewClientset()
	wc.PrependReactor("*", "*", count(&watchLists))
	cs.PrependReactor("*", "*", count(&mainLists))
	cfg.WatchClient = wc
	other, err := New(cfg, cs)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	require.True(t, other.WarmUp(ctx, []state.Revision{r1}))
	require.Positive(t, watchLists.Load(), "the caches list through WatchClient")
	require.Zero(t, mainLists.Load(), "and not through the rate-limited client")
}
