package occ

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
)

func TestEndpointReach(t *testing.T) {
	env := func(inCluster bool) func(string) string {
		return func(k string) string {
			if inCluster && k == "KUBERNETES_SERVICE_HOST" {
				return "10.96.0.1"
			}
			return ""
		}
	}
	svc := &wire.Endpoints{Gateway: "ws://gateway-abc.oce-ns.svc:18789"}
	local := &wire.Endpoints{Gateway: "ws://127.0.0.1:40001", Socket: "/data/agents/a1.sock"}
	for _, tc := range []struct {
		name      string
		ep        *wire.Endpoints
		server    string
		inCluster bool
		socket    bool
		want      string
	}{
		{"a Service name from outside the cluster", svc, "https://coordinator.example:7400", false, false, reachInCluster},
		{"a Service name through a port-forward", svc, "https://127.0.0.1:7400", false, false, reachInCluster},
		{"a Service name from inside the cluster", svc, "https://oce-coordinator:7400", true, false, ""},
		{"a loopback address beside a loopback coordinator", local, "http://127.0.0.1:7400", false, false, ""},
		{"a loopback address from another host", local, "https://coordinator.example:7400", false, false, reachCoordinatorHost},
		{"the socket is here", local, "https://coordinator.example:7400", false, true, ""},
		{"localhost is loopback", &wire.Endpoints{Gateway: "ws://localhost:1"}, "http://localhost:7400", false, false, ""},
		{"a routable address", &wire.Endpoints{Gateway: "ws://10.0.0.5:18789"}, "https://c:7400", false, false, ""},
		{"a socket only, not here", &wire.Endpoints{Socket: "/x.sock"}, "https://c:7400", false, false, reachCoordinatorHost},
		{"no endpoint", nil, "https://c:7400", false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := endpointReach(tc.ep, tc.server, env(tc.inCluster), func(string) bool { return tc.socket })
			require.Equal(t, tc.want, got)
		})
	}
}

// describe shows no address the caller cannot dial; -o wide shows it,
// labelled.
func TestDescribeEndpointShownWhenReachable(t *testing.T) {
	d := agentDescription{Agent: wire.Agent{Name: "bot"}, Phase: "serving",
		Endpoints: &wire.Endpoints{Gateway: "ws://gateway-abc.oce-ns.svc:18789"}, EndpointReach: reachInCluster}
	var out bytes.Buffer
	require.NoError(t, writeDescription(&out, d, false))
	require.NotContains(t, out.String(), "svc:18789")
	require.Regexp(t, `Endpoint:\s+- \(in-cluster only;`, out.String())
	out.Reset()
	require.NoError(t, writeDescription(&out, d, true))
	require.Contains(t, out.String(), "ws://gateway-abc.oce-ns.svc:18789 (in-cluster only)")

	d.EndpointReach = ""
	out.Reset()
	require.NoError(t, writeDescription(&out, d, false))
	require.Contains(t, out.String(), "ws://gateway-abc.oce-ns.svc:18789\n")
}
