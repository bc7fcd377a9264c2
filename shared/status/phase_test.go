package status

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
)

// TestCurrentPhase: while startup runs, readiness and /status name the phase
// running now; the name goes once startup ends or a failure is held, and a
// probe's reason parses back to it (kubelet's Event carries it).
func TestCurrentPhase(t *testing.T) {
	s, base := newTestServer(t, nil)
	ready := func() string {
		ok, reason, err := ReadyCheck(context.Background(), base)
		require.NoError(t, err)
		require.False(t, ok)
		return reason
	}
	phaseOf := func() any {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(get(t, base+PathStatus, nil).body), &doc))
		return doc[PhaseKey]
	}
	require.Equal(t, NotReadyReason, ready(), "no phase yet")
	require.Nil(t, phaseOf())

	s.SetPhase("model-probe")
	require.Equal(t, PhaseReason("model-probe"), ready())
	require.Equal(t, "model-probe", phaseOf())
	p, ok := ParsePhaseReason("Readiness probe failed: " + ready() + "\n")
	require.True(t, ok)
	require.Equal(t, "model-probe", p)

	s.SetPhase("Bad Name") // ignored
	require.Equal(t, "model-probe", phaseOf())

	// Ready, but the child's own check fails: still the phase.
	s.SetPhase("native-spawn")
	s.SetReady(true)
	s.SetReadyCheck(func(context.Context) error { return context.DeadlineExceeded })
	require.Equal(t, PhaseReason("native-spawn"), ready())
	s.SetStarted()
	require.Equal(t, NotReadyReason, ready(), "startup ended: no phase")
	require.Nil(t, phaseOf())

	h, hbase := newTestServer(t, nil)
	h.SetPhase("model-probe")
	h.Hold(RuntimeFailure{Check: "model-probe", Code: codes.AuthenticationFailed})
	ok, reason, err := ReadyCheck(context.Background(), hbase)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, NotReadyReason+"; startup check model-probe failed with AUTHENTICATION_FAILED", reason)
	_, ok = ParsePhaseReason(reason)
	require.False(t, ok, "a held reason names no running phase")
	require.Error(t, s.SetStatus(PhaseKey, "x"), "the phase field is built in")
}
