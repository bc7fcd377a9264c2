package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// TestNewLeaderReleasesEarlierClaims: work a dead leader's engine claimed
// (its lease still live) is claimed and completed by the new leader's engine
// without waiting out the lease; the release follows a leadership check.
func TestNewLeaderReleasesEarlierClaims(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	w := h.deploy("r1", state.HarnessOpenClaw, nil, 3)
	h.propose(state.CmdClaimWork, state.ClaimWork{WorkID: w, Owner: "dead/abc", LeaseExpiry: h.clk.Now().Add(DefaultLease)})
	h.start()
	// Well within the dead engine's lease.
	require.Eventually(t, func() bool {
		wk, _ := h.m.Work(w)
		return wk.State == state.WorkCompleted
	}, 10*time.Second, time.Millisecond)
	require.True(t, h.clk.Now().Before(t0.Add(DefaultLease)), "no lease was waited out")
	var release int
	for _, p := range h.proposals() {
		if p.typ == state.CmdReleaseClaims.Name() {
			release++
			require.NotEqual(t, "dead/abc", p.payload.(state.ReleaseClaims).Keep)
		}
	}
	require.Equal(t, 1, release)
	require.Equal(t, map[string]int{"r1": 1}, h.activations())
	// The dead engine can write nothing more.
	_, err := h.p.Propose(t.Context(), state.CmdSetWorkPhase.Name(), state.SetWorkPhase{
		ClaimRef: state.ClaimRef{WorkID: w, Owner: "dead/abc"}, Phase: state.PhaseReady})
	require.ErrorIs(t, err, state.ErrClaimLost)
	h.requireReplayable()
}

// TestNoReleaseWithoutVerifiedLeadership: an engine that cannot verify its
// leadership releases nothing; the earlier claim then waits for its lease.
func TestNoReleaseWithoutVerifiedLeadership(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	w := h.deploy("r1", state.HarnessOpenClaw, nil, 3)
	h.propose(state.CmdClaimWork, state.ClaimWork{WorkID: w, Owner: "dead/abc", LeaseExpiry: h.clk.Now().Add(DefaultLease)})
	h.p.SetLeaderErr(errors.New("not the leader"))
	h.start()
	h.stop()
	for _, p := range h.proposals() {
		require.NotEqual(t, state.CmdReleaseClaims.Name(), p.typ)
	}
	wk, _ := h.m.Work(w)
	require.Equal(t, "dead/abc", wk.Owner)

	// Nothing foreign claimed: no entry is proposed at all.
	h2 := newHarness(t, hopt{})
	h2.stop()
	for _, p := range h2.proposals() {
		require.NotEqual(t, state.CmdReleaseClaims.Name(), p.typ)
	}
}
