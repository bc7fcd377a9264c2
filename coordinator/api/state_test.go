package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
)

// TestStateAfterCutover: a revision committed active whose runtime is still
// starting (an embedded replacement starts at the cutover) is activating,
// not degraded; once observed serving, a later loss of readiness is
// degraded.
func TestStateAfterCutover(t *testing.T) {
	e, d, _ := servingBot(t)
	agent := func() map[string]any { return e.expect(200, "GET", "/v1/namespaces/team/agents/bot", nil) }
	status := func() map[string]any { s, _ := agent()["status"].(map[string]any); return s }
	require.Eventually(t, func() bool { return status()["state"] == "serving" }, 10*time.Second, 5*time.Millisecond)
	first := agent()["activeRevisionId"].(string)

	// the replacement answers ready until its cutover, then starts over
	d.SetHook(memory.OpActivate, func(_ context.Context, rev string) error {
		if rev != first {
			d.Observe(rev, compute.Observation{Reason: "starting"})
		}
		return nil
	})
	e.expect(202, "POST", "/v1/namespaces/team/agents/bot/deploy", nil)
	require.Eventually(t, func() bool {
		s := status()
		return agent()["activeRevisionId"] != first && s["servingRevisionId"] == nil && s["observedAt"] != nil
	}, 10*time.Second, 5*time.Millisecond, "the replacement is active and observed not ready")
	s := status()
	require.Equal(t, "activating", s["state"], "never serving since its cutover: still activating")
	require.Equal(t, "starting", s["reason"])
	second := agent()["activeRevisionId"].(string)

	d.Observe(second, compute.Observation{Ready: true})
	require.Eventually(t, func() bool { return status()["state"] == "serving" }, 10*time.Second, 5*time.Millisecond)
	d.Observe(second, compute.Observation{Reason: "not-running"})
	require.Eventually(t, func() bool { return status()["state"] == "degraded" }, 10*time.Second, 5*time.Millisecond,
		"served, then lost readiness: degraded")
	require.Equal(t, "not-running", status()["reason"])
}
