package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
)

// warming is the memory driver with a cache to warm: it records what it was
// warmed with and how many observations preceded it.
type warming struct {
	*memory.Driver
	mu       sync.Mutex
	warmed   []string
	observed int // observations before the warm-up
}

func (w *warming) WarmUp(_ context.Context, revs []state.Revision) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range revs {
		w.warmed = append(w.warmed, r.ID)
	}
	w.observed = len(w.CallsOf(memory.OpObserve))
	return true
}

// TestNewLeaderWarmsBeforeObserving: a new leader's engine gives its driver
// every active revision before its first health round.
func TestNewLeaderWarmsBeforeObserving(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.stop() // leadership ends
	before := len(h.d.CallsOf(memory.OpObserve))
	w := &warming{Driver: h.d}
	h.e = New(Config{Owner: "eng2", Seed: 1}, h.p, w, h.clk, nil)
	h.start()
	h.drive(func() bool { return len(h.d.CallsOf(memory.OpObserve)) > before }, "the new leader observes")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, []string{"r1"}, w.warmed)
	require.Equal(t, before, w.observed, "warmed before its first observation")
}
