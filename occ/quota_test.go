package occ_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
)

// `occ namespace set-quota` sets and clears a Namespace's quota; a deploy
// over it fails with QUOTA_EXCEEDED naming the quota; the resource flags
// set an Agent's own limits, which an update changes one value at a time.
func TestSetQuotaAndResources(t *testing.T) {
	h := newHarness(t)
	h.seed()
	require.Equal(t, occ.ExitUsage, h.run("namespace", "set-quota", "team").code, "no bound")
	require.Equal(t, occ.ExitUsage, h.run("namespace", "set-quota", "team", "--clear", "--agents", "1").code)
	r := h.run("namespace", "set-quota", "team", "--cpu", "lots")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "INVALID_REQUEST")

	h.ok("namespace", "set-quota", "team", "--agents", "1", "--memory", "4Gi")
	require.Contains(t, h.ok("namespace", "get", "team", "-o", "wide"), "agents=1,memory=4Gi")
	h.ok("-n", "team", "agent", "deploy", "bot")
	h.ok("-n", "team", "agent", "create", "bot2", "--config", "cfg", "--auth-method", "api_key",
		"--auth-kind", "secret", "--auth-ref", "secret://team/anthropic#key", "--gateway-limits", "memory=1Gi",
		"--gateway-requests", "memory=512Mi")
	r = h.run("-n", "team", "agent", "deploy", "bot2")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "QUOTA_EXCEEDED")
	require.Contains(t, r.stderr, "quota agents")

	require.Equal(t, occ.ExitUsage, h.run("-n", "team", "agent", "update", "bot2", "--gateway-limits", "disk=1").code)
	h.ok("-n", "team", "agent", "update", "bot2", "--gateway-limits", "cpu=1")
	out := h.ok("-n", "team", "agent", "get", "bot2", "-o", "json")
	require.Contains(t, out, `"cpuLimit": "1"`)
	require.Contains(t, out, `"memoryLimit": "1Gi"`, "an update changes only the values it names")

	h.ok("namespace", "set-quota", "team", "--clear")
	require.NotContains(t, h.ok("namespace", "get", "team", "-o", "json"), "quota")
	h.ok("-n", "team", "agent", "deploy", "bot2")
}
