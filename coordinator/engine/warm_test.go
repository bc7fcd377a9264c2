package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// standby is the memory driver as a compute.Standby: it records each
// KeepWarm's revisions.
type standby struct {
	*memory.Driver
	mu   sync.Mutex
	kept [][]string
}

func (s *standby) KeepWarm(_ context.Context, revs []state.Revision) bool {
	ids := make([]string, 0, len(revs))
	for _, r := range revs {
		ids = append(ids, r.ID)
	}
	s.mu.Lock()
	s.kept = append(s.kept, ids)
	s.mu.Unlock()
	return true
}

func (s *standby) passes() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.kept...)
}

// TestFollowerKeepsDriverWarm: while its replica follows, RunStandby hands
// the driver every active revision at once and again after each change
// (paced); while it leads, not at all; it returns when ctx ends.
func TestFollowerKeepsDriverWarm(t *testing.T) {
	h := newHarness(t, hopt{}) // the leader's engine, on the replicated state
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)

	s := &standby{Driver: h.d}
	var following atomic.Bool
	var asked atomic.Int64 // Following's answers: each is a pass considered
	following.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunStandby(ctx, h.m, s, StandbyConfig{Clock: h.clk, Pace: time.Second,
			Following: func() bool { asked.Add(1); return following.Load() }})
	}()
	require.Eventually(t, func() bool { return len(s.passes()) == 1 }, 10*time.Second, time.Millisecond, "a first pass, without a change")
	require.Equal(t, []string{"r1"}, s.passes()[0])

	// r2 replaces r1: the next pass (after the pace) keeps r2 only
	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool {
		p := s.passes()
		return len(p) > 1 && len(p[len(p)-1]) == 1 && p[len(p)-1][0] == "r2"
	}, "a pass keeps the new active revision only")

	// leading: changes are considered but hand the driver nothing
	following.Store(false)
	before, seen := len(s.passes()), asked.Load()
	h.waitWork(h.deploy("r3", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { return asked.Load() > seen }, "the change considered")
	require.Len(t, s.passes(), before, "no pass while leading")

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunStandby did not return")
	}
}

// TestStandbyNeedsAStandbyDriver: a driver without caches to keep is left
// alone — RunStandby returns at once.
func TestStandbyNeedsAStandbyDriver(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunStandby(context.Background(), state.NewMachine(), memory.New(memory.DefaultCapabilities()),
			StandbyConfig{Following: func() bool { return true }})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunStandby kept running without a Standby driver")
	}
}
