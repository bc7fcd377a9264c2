package integration

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// serviceOf parses http://<svc>.<ns>.svc:<port>/… into (ns, svc).
func serviceOf(t *testing.T, raw string) (string, string) {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	parts := strings.Split(u.Hostname(), ".")
	require.Len(t, parts, 3, "service DNS name %q", raw)
	require.Equal(t, "svc", parts[2])
	return parts[1], parts[0]
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// readyEndpoints lists the ready endpoint addresses of a Service.
func readyEndpoints(t *testing.T, ns, svc string) []string {
	t.Helper()
	l, err := env.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	require.NoError(t, err)
	var out []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out
}

// TestCandidateRoutesReachTheCandidate: before a dedicated revision is
// activated, the address its Harness's workspace node dials reaches the
// candidate Gateway Pod, and the address the candidate Gateway dials for
// its app-server and plugin-status peer reaches the candidate Harness Pod,
// while the Agent's published Gateway and Harness Services stay
// nonserving. (With only the published Services, both paths had no
// endpoints until activation, which itself waited for the enrolled node.)
func TestCandidateRoutesReachTheCandidate(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID, agentID := uid("ns-route"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	dp, gw := kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)
	prepareUntilReady(t, d, rev)

	hdeps, err := env.Client.AppsV1().Deployments(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, hdeps.Items, 1)
	gdeps, err := env.Client.AppsV1().Deployments(gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, gdeps.Items, 1)
	hc, gc := hdeps.Items[0].Spec.Template.Spec.Containers[0], gdeps.Items[0].Spec.Template.Spec.Containers[0]

	gwPods := podsOf(t, gw, sel(kdriver.LabelAgent, agentID, kdriver.LabelRole, kdriver.RoleGateway))
	harPods := podsOf(t, dp, sel(kdriver.LabelAgent, agentID, kdriver.LabelRole, kdriver.RoleAgent))
	require.Len(t, gwPods, 1)
	require.Len(t, harPods, 1)

	nodeNS, nodeSvc := serviceOf(t, envOf(hc, "OCE_NODEHOST_GATEWAY_URL"))
	require.Equal(t, gw, nodeNS)
	appNS, appSvc := serviceOf(t, envOf(gc, "OCE_APP_SERVER_URL"))
	peerNS, peerSvc := serviceOf(t, envOf(gc, "OCE_PEER_STATUS_URL"))
	require.Equal(t, dp, appNS)
	require.Equal(t, appNS+"/"+appSvc, peerNS+"/"+peerSvc)

	require.Eventually(t, func() bool {
		return slicesEqual(readyEndpoints(t, gw, nodeSvc), []string{gwPods[0].Status.PodIP}) &&
			slicesEqual(readyEndpoints(t, dp, appSvc), []string{harPods[0].Status.PodIP})
	}, 30*time.Second, 50*time.Millisecond, "node route → candidate Gateway, Gateway → candidate Harness, before activation")

	// The published routes carry no traffic before activation.
	require.Empty(t, readyEndpoints(t, gw, gdeps.Items[0].Name))
	require.Empty(t, readyEndpoints(t, dp, "agent-"+strings.TrimPrefix(gdeps.Items[0].Name, "gateway-")))
	nodeRoute, err := env.Client.CoreV1().Services(gw).Get(ctx, nodeSvc, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, nodeRoute.Spec.Ports, 1, "the node route exposes only the Gateway port")
	require.Equal(t, int32(contract.GatewayPort), nodeRoute.Spec.Ports[0].Port)

	// After activation the node keeps reaching the (now active) Gateway.
	require.NoError(t, d.ActivateRevision(ctx, rev))
	require.Eventually(t, func() bool {
		return slicesEqual(readyEndpoints(t, gw, nodeSvc), []string{gwPods[0].Status.PodIP}) &&
			slicesEqual(readyEndpoints(t, gw, gdeps.Items[0].Name), []string{gwPods[0].Status.PodIP})
	}, 30*time.Second, 50*time.Millisecond)

	// Retiring the revision removes its Harness route; the Agent's node route stays.
	require.NoError(t, d.RetireRevision(ctx, rev))
	_, err = env.Client.CoreV1().Services(dp).Get(ctx, appSvc, metav1.GetOptions{})
	require.Error(t, err)
	_, err = env.Client.CoreV1().Services(gw).Get(ctx, nodeSvc, metav1.GetOptions{})
	require.NoError(t, err)
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
