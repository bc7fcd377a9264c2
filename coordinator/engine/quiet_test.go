package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// waitQuiescent waits for quiescence while the fake clock stays put: the
// watcher's rounds come from WaitQuiescent's own requests.
func (h *harness) waitQuiescent() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(h.t, h.e.WaitQuiescent(ctx))
}

// TestQuiescence: the engine is not quiescent while work is open or an
// observation is unrecorded; once it is, nothing more is written however
// many rounds the watcher runs, until an observation changes — which
// makes it not quiescent until that change is recorded.
func TestQuiescence(t *testing.T) {
	h := newHarness(t, hopt{})
	require.False(t, h.e.Quiescent(), "no watcher round yet")
	w := h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	require.False(t, h.e.Quiescent(), "open work")
	h.waitWork(w, state.WorkCompleted)
	h.waitQuiescent()
	health, ok := h.m.Health("a1")
	require.True(t, ok, "quiescent only once the active revision's health is recorded")
	require.True(t, health.Ready)

	applied, digest := h.m.Applied(), h.m.Digest()
	for range 5 {
		h.e.ObserveNow()
		h.waitQuiescent()
	}
	require.Equal(t, applied, h.m.Applied(), "a quiescent engine writes nothing")
	require.Equal(t, digest, h.m.Digest())

	// a changed observation: not quiescent until it is recorded
	h.d.Hold("r1", codes.AuthenticationFailed, nil)
	h.waitQuiescent()
	health, _ = h.m.Health("a1")
	require.False(t, health.Ready)
	require.Equal(t, string(codes.AuthenticationFailed), health.HeldCode)
	require.Greater(t, h.m.Applied(), applied)

	// a write from outside the engine (a request) ends quiescence until a
	// round over the new state
	h.propose(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns2", Name: "two"})
	require.False(t, h.e.Quiescent())
	h.waitQuiescent()
}
