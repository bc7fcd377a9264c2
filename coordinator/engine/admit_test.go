package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// admitting is the memory driver declaring an admission rate.
type admitting struct {
	*memory.Driver
	perSecond float64
	burst     int
}

func (a admitting) AdmissionRate() (float64, int) { return a.perSecond, a.burst }

// TestAdmissionSpacesNewActivations: with a driver that can start one
// activation a second (burst 2), six deploys admitted at once start no
// faster than that — the first claims of their work are spaced by the
// rate after the burst — and every one completes; none spends an attempt
// waiting. A stop is never held back by it.
func TestAdmissionSpacesNewActivations(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	h.e = New(Config{Owner: "eng", Seed: 1}, h.p, admitting{Driver: h.d, perSecond: 1, burst: 2}, h.clk, nil)
	const n = 6
	works := admitEmbedded(h, n)
	h.start()
	starts := completedStarts(t, h, works)
	for _, w := range works {
		wk, _ := h.m.Work(w)
		require.Equal(t, 1, wk.Attempts, "%s: waiting for admission spends no attempt", w)
	}
	// Claims are in the queue's order; after the burst of two, one a second.
	for i := 2; i < n; i++ {
		require.GreaterOrEqual(t, starts[i].Sub(starts[0]), time.Duration(i-1)*time.Second, "start %d", i)
	}

	// A stop is not an activation's start: it is claimed at once even
	// with no admission left.
	h.e.starts.lim.AllowN(h.clk.Now(), 2)
	h.propose(state.CmdRequestStop, state.RequestStop{AgentID: "ag0", WorkID: "s-ag0"})
	h.e.Notify()
	h.drive(func() bool { wk, _ := h.m.Work("s-ag0"); return wk.State == state.WorkCompleted }, "the stop ran")
}

// TestConvergenceWindowFromStart: an activation that admission held queued
// longer than the convergence window still gets the whole window once it
// starts; one that started at once and never converges fails at its window.
func TestConvergenceWindowFromStart(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	h.step = time.Second
	const window = 20 * time.Second
	h.e = New(Config{Owner: "eng", Seed: 1, ConvergenceWindow: window}, h.p,
		admitting{Driver: h.d, perSecond: 1.0 / 60, burst: 1}, h.clk, nil) // one start a minute
	cf, _ := h.m.Configuration("c1")
	for _, id := range []string{"ag0", "ag1"} {
		h.propose(state.CmdCreateAgent, state.CreateAgent{ID: id, NamespaceID: "ns1", Name: id, ConfigurationID: "c1",
			ExecutionMode: state.ModeEmbedded, ComputeID: memory.Name})
		h.propose(state.CmdAdmitRevision, state.AdmitRevision{Revision: state.Revision{ID: "r-" + id, AgentID: id, NamespaceID: "ns1",
			Document: cf.Document, ConfigurationID: cf.ID, ConfigurationGeneration: cf.Generation,
			Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "pinned"}, Mode: state.ModeEmbedded,
			ComputeID: memory.Name}, WorkID: "w-" + id})
	}
	h.d.ReadyAfter("r-ag0", -1) // never converges
	h.d.ReadyAfter("r-ag1", 3)  // converges on its third observation
	h.start()
	w0 := h.waitWork("w-ag0", state.WorkFailed)
	require.Equal(t, string(codes.RevisionNotReady), w0.LastCode)
	w1 := h.waitWork("w-ag1", state.WorkCompleted)
	started, _ := h.m.Revision("r-ag1")
	require.Greater(t, w1.UpdatedAt.Sub(started.CreatedAt), window, "ag1 converged after more than the window since its creation")
}

// admitEmbedded creates n embedded Agents ag0… and admits a revision of
// each; it returns their work IDs in admission order.
func admitEmbedded(h *harness, n int) []string {
	var works []string
	for i := range n {
		id := fmt.Sprintf("ag%d", i)
		h.propose(state.CmdCreateAgent, state.CreateAgent{ID: id, NamespaceID: "ns1", Name: id, ConfigurationID: "c1",
			ExecutionMode: state.ModeEmbedded, ComputeID: memory.Name})
		cf, _ := h.m.Configuration("c1")
		r := state.Revision{ID: "r-" + id, AgentID: id, NamespaceID: "ns1", Document: cf.Document, ConfigurationID: cf.ID,
			ConfigurationGeneration: cf.Generation, Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "pinned"},
			Mode: state.ModeEmbedded, ComputeID: memory.Name}
		h.propose(state.CmdAdmitRevision, state.AdmitRevision{Revision: r, WorkID: "w-" + id, MaxAttempts: 3})
		works = append(works, "w-"+id)
	}
	return works
}

// completedStarts drives until every work completes and returns the time
// each one's first claim was admitted at, in the order of works: the run
// loop's clock reading, which the claim carries as its lease expiry less
// the lease (the proposal itself may come steps later on a loaded
// machine, the harness's clock running on).
func completedStarts(t *testing.T, h *harness, works []string) []time.Time {
	t.Helper()
	h.drive(func() bool {
		for _, w := range works {
			if wk, _ := h.m.Work(w); wk.State != state.WorkCompleted {
				return false
			}
		}
		return true
	}, "every deploy completed")
	first := map[string]time.Time{}
	for _, p := range h.proposals() {
		if c, ok := p.payload.(state.ClaimWork); ok {
			if _, seen := first[c.WorkID]; !seen {
				first[c.WorkID] = c.LeaseExpiry.Add(-h.e.cfg.Lease)
			}
		}
	}
	var starts []time.Time
	for _, w := range works {
		require.Contains(t, first, w)
		starts = append(starts, first[w])
	}
	return starts
}

// TestAdmissionBacksOffOnOverload: the start rate halves on the target's
// overload signal — once for the signals of one moment — down to a floor,
// and doubles back after each calm period, the burst returning with the
// driver's rate.
func TestAdmissionBacksOffOnOverload(t *testing.T) {
	a := admissionFor(admitting{Driver: memory.New(memory.DefaultCapabilities()), perSecond: 8, burst: 16}, slog.New(slog.DiscardHandler))
	require.NotNil(t, a)
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at       time.Duration
		overload bool
		rate     float64
		burst    int
	}{
		{0, false, 8, 16},
		{0, true, 4, 1},
		{time.Second, true, 4, 1}, // the same moment: one cut
		{3 * time.Second, true, 2, 1},
		{6 * time.Second, true, 1, 1},
		{9 * time.Second, true, 0.5, 1},
		{12 * time.Second, true, 0.25, 1},
		{15 * time.Second, true, 0.125, 1}, // six cuts: the floor
		{18 * time.Second, true, 0.125, 1},
		{18*time.Second + OverloadCalm - time.Millisecond, false, 0.125, 1},
		{18*time.Second + OverloadCalm, false, 0.25, 1},
		{18*time.Second + 3*OverloadCalm, false, 1, 1},
		{18*time.Second + 6*OverloadCalm, false, 8, 16}, // back to the driver's
		{18*time.Second + 9*OverloadCalm, false, 8, 16},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if s.overload {
			a.overloaded(now)
		}
		a.allowedAt(now)
		require.InDelta(t, s.rate, a.rate(), 1e-9, "at %v", s.at)
		require.Equal(t, s.burst, a.lim.Burst(), "at %v", s.at)
	}
}

// TestOverloadSlowsStarts: one activation's driver call failing with the
// target's overload signal halves the rate the next activations start at
// (1/s → 1 per 2 s); the same failure without the signal leaves it at the
// driver's rate.
func TestOverloadSlowsStarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		slowed bool
	}{
		{"overloaded", compute.Overloaded(codes.TransientDependency, errors.New("429 Too Many Requests")), true},
		{"other transient", compute.Transient(codes.TransientDependency, errors.New("connection reset")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopt{noStart: true})
			h.e = New(Config{Owner: "eng", Seed: 1}, h.p, admitting{Driver: h.d, perSecond: 1, burst: 1}, h.clk, nil)
			h.d.Fail(memory.OpPrepare, "r-ag0", 1, tc.err)
			works := admitEmbedded(h, 6)
			h.start()
			starts := completedStarts(t, h, works)
			h.e.starts.mu.Lock()
			cuts, cut := h.e.starts.cuts, h.e.starts.lastCut
			h.e.starts.mu.Unlock()
			if !tc.slowed {
				require.Zero(t, cuts)
				return
			}
			require.Equal(t, 1, cuts)
			// ag0 failed at its start; every start after the cut waits
			// two seconds for the one before it (burst 1, 0.5/s).
			var after []time.Time
			for _, s := range starts {
				if s.After(cut) {
					after = append(after, s)
				}
			}
			require.GreaterOrEqual(t, len(after), 3, "starts %v, cut at %v", starts, cut)
			for i := 1; i < len(after); i++ {
				require.GreaterOrEqual(t, after[i].Sub(after[i-1]), 2*time.Second, "starts %v, cut at %v", starts, cut)
			}
		})
	}
}

// TestConvergenceWindowStretchesUnderOverload: a revision that never
// becomes ready fails at its convergence window when the target is calm;
// while the target keeps signaling overload it gets one more window, and
// fails at twice the window if the target never calms.
func TestConvergenceWindowStretchesUnderOverload(t *testing.T) {
	const window = 40 * time.Second
	for _, tc := range []struct {
		name       string
		overloaded bool
		min, max   time.Duration // the failure's time after the start; max 0: unbounded
	}{
		// The harness's clock may run ahead of a loaded engine: the
		// bounds leave it a window's slack. That the overloaded revision
		// fails at all (the drive would time out) is the stretch's cap.
		{"calm", false, window, 2 * window},
		{"overloaded throughout", true, 2 * window, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, hopt{noStart: true})
			h.step = time.Second
			h.e = New(Config{Owner: "eng", Seed: 1, ConvergenceWindow: window}, h.p, h.d, h.clk, nil)
			works := admitEmbedded(h, 1)
			h.d.ReadyAfter("r-ag0", -1)
			start := h.clk.Now()
			h.start()
			h.drive(func() bool {
				if tc.overloaded {
					// another Agent's call meeting a 429 on every step
					h.e.sawOverload(compute.Overloaded(codes.TransientDependency, errors.New("429")))
				}
				wk, _ := h.m.Work(works[0])
				return wk.State == state.WorkFailed
			}, "the revision failed")
			wk, _ := h.m.Work(works[0])
			require.Equal(t, string(codes.RevisionNotReady), wk.LastCode)
			took := wk.UpdatedAt.Sub(start)
			require.Greater(t, took, tc.min)
			if tc.max > 0 {
				require.Less(t, took, tc.max)
			}
		})
	}
}
