package kubernetes

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
	leader, cs, cfg, r1 := cachingPeer(t)
	require.True(t, leader.WarmUp(ctx, []state.Revision{r1}))
	requireFirstFromCaches(t, leader, cs, r1)

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

// TestKeepWarmFollower: a follower's driver kept warm holds synced caches
// of exactly the namespaces the given revisions run in (both of a
// dedicated one's), stops the others' (a stopped cache never answers), and,
// elected, answers its first observation from them without a request.
func TestKeepWarmFollower(t *testing.T) {
	ctx := context.Background()
	follower, cs, _, r1 := cachingPeer(t)
	cached := func() []string {
		follower.cacheMu.Lock()
		defer follower.cacheMu.Unlock()
		var out []string
		for ns := range follower.caches {
			out = append(out, ns)
		}
		return out
	}

	r2 := dedicatedRev("r2")
	r2.AgentID, r2.NamespaceID = "a2", "ns2"
	require.True(t, follower.KeepWarm(ctx, []state.Revision{r1, r2}))
	require.ElementsMatch(t, []string{DataPlaneNamespace("ns1"), GatewayNamespace("ns2"), DataPlaneNamespace("ns2")}, cached())
	follower.cacheMu.Lock()
	gone := follower.caches[GatewayNamespace("ns2")]
	follower.cacheMu.Unlock()
	require.True(t, gone.usable(time.Now()))

	require.True(t, follower.KeepWarm(ctx, []state.Revision{r1}))
	require.Equal(t, []string{DataPlaneNamespace("ns1")}, cached())
	require.False(t, gone.usable(time.Now()), "a stopped cache never answers")

	requireFirstFromCaches(t, follower, cs, r1)
}

// cachingPeer is a second driver, with caches not yet started, beside one
// that activated the embedded revision r1 (its Gateway Pod Ready): what a
// new leader finds. cfg is the peer's configuration.
func cachingPeer(t *testing.T) (*Driver, *fake.Clientset, Config, state.Revision) {
	t.Helper()
	d, cs, _ := newFakeStatus(t)
	r1 := activeEmbedded(t, d, cs).rev
	cfg := d.cfg
	cfg.ObserveCache = true
	peer, err := New(cfg, cs)
	require.NoError(t, err)
	t.Cleanup(peer.Close)
	return peer, cs, cfg, r1
}

// requireFirstFromCaches: d's next observation of rev finds it Ready
// without a request.
func requireFirstFromCaches(t *testing.T, d *Driver, cs *fake.Clientset, rev state.Revision) {
	t.Helper()
	reads := countReads(cs)
	obs, err := d.ObserveRevision(context.Background(), rev)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.Zero(t, reads.Load(), "the first observation is the caches'")
}
