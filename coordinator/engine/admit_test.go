package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	h.start()
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
				first[c.WorkID] = p.at
			}
		}
	}
	var starts []time.Time
	for _, w := range works {
		require.Contains(t, first, w)
		starts = append(starts, first[w])
		wk, _ := h.m.Work(w)
		require.Equal(t, 1, wk.Attempts, "%s: waiting for admission spends no attempt", w)
	}
	// Claims are in the queue's order; after the burst of two, one a second.
	// The admission is spent at the time the run loop last read (the claim
	// is proposed after it), which may be one drive step before the claim
	// the test sees: the spacing holds within that step.
	for i := 2; i < n; i++ {
		require.GreaterOrEqual(t, starts[i].Sub(starts[0]), time.Duration(i-1)*time.Second-h.step, "start %d", i)
	}

	// A stop is not an activation's start: it is claimed at once even
	// with no admission left.
	h.e.starts.AllowN(h.clk.Now(), 2)
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
