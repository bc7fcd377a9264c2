package contract

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTopologyPairs(t *testing.T) {
	for _, tc := range []struct {
		harness, mode string
		want          Topology
		ok            bool
	}{
		{HarnessOpenClaw, ModeEmbedded, Embedded, true},
		{HarnessCodex, ModeDedicated, DedicatedCodex, true},
		{HarnessOpenClaw, ModeDedicated, DedicatedOpenClaw, true},
		{HarnessCodex, ModeEmbedded, "", false},
		{"other", ModeEmbedded, "", false},
	} {
		got, ok := Of(tc.harness, tc.mode)
		require.Equal(t, tc.ok, ok, "%s/%s", tc.harness, tc.mode)
		require.Equal(t, tc.want, got)
		if ok {
			require.Equal(t, tc.harness, got.Harness())
			require.Equal(t, tc.mode, got.Mode())
			require.Equal(t, tc.mode == ModeDedicated, got.Dedicated())
		}
	}
	for _, tp := range Topologies() {
		p, err := ParseTopology(string(tp))
		require.NoError(t, err)
		require.Equal(t, tp, p)
	}
	_, err := ParseTopology("embedded-codex")
	require.ErrorContains(t, err, EnvTopology)
	require.False(t, Topology("").Valid())
	require.Empty(t, Topology("x").Harness())
}

func TestURLs(t *testing.T) {
	require.Equal(t, "http://h:18791/openclaw/plugin-runtime/remote-status", PeerStatusURL("h", StatusPort))
	require.Equal(t, "ws://h:18790", AppServerURL("h", AppServerPort))
}

func TestProviderEndpoints(t *testing.T) {
	bases := map[string]string{ProviderOpenAI: "http://127.0.0.1:9/", ProviderAnthropic: "http://127.0.0.1:9/v1"}
	require.Equal(t, []Endpoint{{EnvProviderBaseURLOpenAI, "http://127.0.0.1:9"}, {EnvProviderBaseURLAnthropic, "http://127.0.0.1:9/v1"}},
		ProviderEndpoints(bases, false))
	require.Equal(t, []Endpoint{{EnvProviderBaseURLOpenAI, "http://127.0.0.1:9/v1"}, {EnvProviderBaseURLAnthropic, "http://127.0.0.1:9/v1"}},
		ProviderEndpoints(bases, true))
	require.Empty(t, ProviderEndpoints(nil, true))
}
