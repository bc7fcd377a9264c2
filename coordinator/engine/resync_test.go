package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
)

// watchingDriver is the memory driver answering ready observations as
// watched (a driver with watch-fed caches), when watched is set.
type watchingDriver struct {
	*memory.Driver
	watched bool
}

func (w *watchingDriver) ObserveRevision(ctx context.Context, rev state.Revision) (compute.Observation, error) {
	obs, err := w.Driver.ObserveRevision(ctx, rev)
	obs.Watched = w.watched && obs.Ready
	return obs, err
}

// TestWatchedObservationsResync: an Agent whose ready verdict is watched is
// observed again on a change notice naming it, on ObserveNow, or once its
// resync bound passed — not every health interval; an Agent whose verdict
// is not watched is observed every round as before.
func TestWatchedObservationsResync(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(map[bool]string{true: "watched", false: "not watched"}[watched], func(t *testing.T) {
			h := newHarness(t, hopt{noStart: true})
			w := &watchingDriver{Driver: h.d, watched: watched}
			h.e = New(Config{Owner: "eng", Seed: 1}, h.p, w, h.clk, nil)
			h.start()
			h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
			h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready }, "observed ready")
			observed := func() int { return len(h.d.CallsOf(memory.OpObserve)) }
			// round waits for one more watcher round (whole or not) to end.
			round := func(advance time.Duration) {
				h.e.q.mu.Lock()
				n := h.e.q.ended
				h.e.q.mu.Unlock()
				if advance > 0 {
					h.clk.Advance(advance)
				}
				require.Eventually(t, func() bool {
					h.e.q.mu.Lock()
					defer h.e.q.mu.Unlock()
					return h.e.q.ended > n
				}, 10*time.Second, time.Millisecond)
			}
			round(DefaultHealthInterval) // the round after the one that saw it ready
			before := observed()
			for range 5 {
				round(DefaultHealthInterval)
			}
			if !watched {
				require.GreaterOrEqual(t, observed()-before, 5, "observed every round")
				return
			}
			require.Equal(t, before, observed(), "a watched verdict stands between notices")

			h.e.ObserveAgents([]string{"someone-else"})
			round(0)
			require.Equal(t, before, observed(), "a notice for another Agent")

			h.e.ObserveAgents([]string{"a1"})
			round(0)
			require.Equal(t, before+1, observed(), "a notice naming it")

			h.e.ObserveNow()
			round(0)
			require.Equal(t, before+2, observed(), "ObserveNow observes every Agent")
			require.NoError(t, h.e.WaitQuiescent(context.Background()), "a whole round reaches quiescence")

			now, since := observed(), h.clk.Now()
			for h.clk.Now().Sub(t0) < 10*time.Minute && observed() == now {
				round(DefaultHealthInterval)
			}
			require.Equal(t, now+1, observed(), "the resync bound")
			require.GreaterOrEqual(t, h.clk.Now().Sub(since), DefaultResyncInterval, "not before it")
		})
	}
}
