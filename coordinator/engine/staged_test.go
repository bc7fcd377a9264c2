package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// TestStagedActiveRevisionIsNotServing: between the commit and the cutover
// an embedded replacement is observed staged — ready to be cut over, not
// serving — and the watcher must not record the Agent as serving it.
func TestStagedActiveRevisionIsNotServing(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready }, "observed ready")
	h.d.Observe("r1", compute.Observation{Ready: true, Staged: true, Reason: "staged"})
	h.drive(func() bool { hl, _ := h.m.Health("a1"); return !hl.Ready }, "a staged revision is not serving")
	hl, _ := h.m.Health("a1")
	require.Equal(t, "staged", hl.Reason)
}
