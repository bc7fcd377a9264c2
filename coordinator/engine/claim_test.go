package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// A claim its holder released (here: requeued) is never renewed after: the
// heartbeat stops without proposing, instead of racing the release and
// reporting the claim lost (a warning per deferred pass at scale).
func TestHeartbeatStopsAfterRelease(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	w := h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	expiry := h.clk.Now().Add(DefaultLease)
	h.propose(state.CmdClaimWork, state.ClaimWork{WorkID: w, Owner: "eng/1", LeaseExpiry: expiry})
	wk, _ := h.m.Work(w)
	cl := h.e.newClaim(t.Context(), "eng/1", wk)
	require.Eventually(t, func() bool { // the heartbeat waits for its renewal time
		h.clk.mu.Lock()
		defer h.clk.mu.Unlock()
		return len(h.clk.timers) > 0
	}, 10*time.Second, time.Millisecond)
	cl.requeue(codes.ActivationPending, "still starting", time.Second, true)
	released := len(h.proposals())
	h.clk.Advance(DefaultLease / 3) // the heartbeat's renewal time
	select {
	case <-cl.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not stop")
	}
	for _, p := range h.proposals()[released:] {
		require.NotEqual(t, state.CmdRenewClaim.Name(), p.typ, "renewed a released claim")
	}
	require.NoError(t, context.Cause(cl.ctx), "not abandoned: released")
	cl.close()
}
