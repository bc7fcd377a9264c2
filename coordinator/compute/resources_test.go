package compute

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// A revision's footprint is its containers' limits (the defaults under its
// own values) and its topology's claims; resources and quotas are
// validated as Kubernetes quantities, requests at most their limits.
func TestFootprintAndValidation(t *testing.T) {
	emb := state.Revision{Mode: state.ModeEmbedded, Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw}}
	f, err := FootprintOf(emb)
	require.NoError(t, err)
	require.Equal(t, Footprint{CPUMilli: 2000, Memory: 3 << 30, Storage: 10 << 30}, f)
	ded := state.Revision{Mode: state.ModeDedicated, Harness: state.HarnessIdentity{ID: state.HarnessCodex},
		Resources: &state.AgentResources{Harness: state.ContainerResources{CPULimit: "500m", MemoryLimit: "1Gi"}}}
	f, err = FootprintOf(ded)
	require.NoError(t, err)
	require.Equal(t, Footprint{CPUMilli: 2500, Memory: 4 << 30, Storage: 50 << 30}, f)
	require.Equal(t, Footprint{CPUMilli: 4500, Memory: 7 << 30, Storage: 60 << 30}, f.Add(Footprint{CPUMilli: 2000, Memory: 3 << 30, Storage: 10 << 30}))

	for _, tc := range []struct {
		r  *state.AgentResources
		ok bool
	}{
		{nil, true},
		{&state.AgentResources{Gateway: state.ContainerResources{MemoryRequest: "2Gi", MemoryLimit: "4Gi"}}, true},
		{&state.AgentResources{Gateway: state.ContainerResources{MemoryRequest: "4Gi"}}, false}, // above the default 3Gi limit
		{&state.AgentResources{Harness: state.ContainerResources{CPULimit: "0"}}, false},
		{&state.AgentResources{Harness: state.ContainerResources{CPURequest: "-1"}}, false},
		{&state.AgentResources{Gateway: state.ContainerResources{CPULimit: "two"}}, false},
	} {
		require.Equal(t, tc.ok, ValidateResources(tc.r) == nil, "%+v", tc.r)
	}
	for _, tc := range []struct {
		q  *state.NamespaceQuota
		ok bool
	}{
		{nil, true}, {&state.NamespaceQuota{Agents: 3, CPU: "8", Memory: "16Gi", Storage: "1Ti"}, true},
		{&state.NamespaceQuota{Agents: -1}, false}, {&state.NamespaceQuota{Memory: "lots"}, false},
		{&state.NamespaceQuota{CPU: "-2"}, false},
	} {
		require.Equal(t, tc.ok, ValidateQuota(tc.q) == nil, "%+v", tc.q)
	}
}
