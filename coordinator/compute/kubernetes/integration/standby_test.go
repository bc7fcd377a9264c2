package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/state"
)

// keptWarm is a follower's driver that says when a standby pass left its
// caches synced.
type keptWarm struct {
	*kdriver.Driver
	warm chan struct{} // receives after each pass that left them synced
}

func (k *keptWarm) KeepWarm(ctx context.Context, revs []state.Revision) bool {
	ok := k.Driver.KeepWarm(ctx, revs)
	if ok {
		select {
		case k.warm <- struct{}{}:
		default:
		}
	}
	return ok
}

// follow runs a follower's standby over the fleet's replicated state with
// d (engine.RunStandby, as every coordinator that does not lead runs it),
// waits until a pass left d's caches synced, and returns what ends its
// following: call it when d's replica is elected.
func (f *fleet) follow(tb testing.TB, d *kdriver.Driver) (elected func()) {
	tb.Helper()
	k := &keptWarm{Driver: d, warm: make(chan struct{}, 1)}
	var following atomic.Bool
	following.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		engine.RunStandby(ctx, f.m, k, engine.StandbyConfig{Following: following.Load})
	}()
	elected = func() {
		following.Store(false)
		cancel()
		<-done
	}
	tb.Cleanup(elected)
	select {
	case <-k.warm:
	case <-time.After(5 * time.Minute):
		tb.Fatal("the follower's caches never synced")
	}
	return elected
}

// TestWarmFollowerLeadsWithoutListing: against the real API server, a
// follower whose standby kept its driver warm becomes a leader that is
// current without a single request — no list of what it observes, no read
// of an Agent — while its predecessor's Agents stay ready.
func TestWarmFollowerLeadsWithoutListing(t *testing.T) {
	f := fleetState(t, 6, 2)
	d1, rec1 := observingDriver(t, true)
	f.lead(t, d1, rec1)
	_, failed := f.deployAll(t)
	require.Zero(t, failed)
	require.True(t, assertEventually(f.allObservedReady, 2*time.Minute), "every Agent observed ready")

	d2, rec2 := observingDriver(t, true)
	elected := f.follow(t, d2)
	require.Positive(t, rec2.count(), "the follower's caches listed and watched")

	f.stop()
	elected()
	rec2.reset()
	f.lead(t, d2, rec2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, f.e.WaitQuiescent(ctx))
	require.Zero(t, rec2.count(), "the new leader current from its standby caches: %v", rec2.snapshot())
	for _, id := range f.agents {
		h, ok := f.m.Health(id)
		require.True(t, ok && h.Ready, "%s stays ready", id)
	}
}
