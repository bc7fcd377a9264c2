package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/internal/poll"
	"oce.dev/oce/shared/contract"
)

func dedicatedRev(nsID, agentID, revID string) state.Revision {
	return state.Revision{ID: revID, AgentID: agentID, NamespaceID: nsID, Mode: state.ModeDedicated,
		Harness: state.HarnessIdentity{ID: state.HarnessCodex, Version: "0.169.0"}, Document: []byte(`{"agents":{}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret:model#key"}}
}

// runningPod waits for the single live Pod of a Deployment to run and be Ready.
func readyPod(t *testing.T, ns, selector string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		pod = onePod(t, ns, selector)
		if pod == nil {
			return false
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "a Ready pod for %s in %s", selector, ns)
	return pod
}

// TestCandidateRoutesOnRealPods runs a dedicated revision's rendered Harness
// and Gateway Pods (podbin serving on the app-server and Gateway ports, oce's
// status server ready) and, before activation, reaches across the real
// network through the addresses the driver renders: from the Harness Pod,
// the candidate Gateway through the node route (CoreDNS name, kube-proxy);
// from the Gateway Pod, its own revision's Harness. The published Gateway
// Service does not answer until activation.
func TestCandidateRoutesOnRealPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := newDriver(t)
	nsID, agentID := uid("ns-route"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := dedicatedRev(nsID, agentID, uid("r"))
	dp, gw := kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)
	harness, gateway := runDedicated(t, ctx, d, rev)

	hEnv, gEnv := map[string]string{}, map[string]string{}
	for _, e := range harness.Spec.Containers[0].Env {
		hEnv[e.Name] = e.Value
	}
	for _, e := range gateway.Spec.Containers[0].Env {
		gEnv[e.Name] = e.Value
	}
	nodeURL := hEnv[contract.EnvNodehostGatewayURL]
	appURL := gEnv[contract.EnvAppServerURL]
	require.NotEmpty(t, nodeURL)
	require.NotEmpty(t, appURL)

	// Workspace node → candidate Gateway, and Gateway → its Harness, both
	// before activation (kube-proxy programs a Service shortly after its
	// endpoint is Ready: retry within a bound).
	probe := func(ns, pod, container, url string) error {
		_, err := cluster.Exec(ctx, ns, pod, container, "/podbin", "probe", url)
		return err
	}
	require.Eventually(t, func() bool {
		return probe(dp, harness.Name, "harness", nodeURL+"/healthz") == nil
	}, time.Minute, 250*time.Millisecond, "the Harness reaches its candidate Gateway at %s", nodeURL)
	httpApp := "http" + appURL[len("ws"):]
	require.Eventually(t, func() bool {
		return probe(gw, gateway.Name, "gateway", httpApp+"/healthz") == nil
	}, time.Minute, 250*time.Millisecond, "the candidate Gateway reaches its Harness at %s", appURL)
	published := fmt.Sprintf("http://%s.%s.svc:%d/healthz", deploymentOf(t, gw, agentID, kdriver.RoleGateway), gw, contract.GatewayPort)
	require.Error(t, probe(dp, harness.Name, "harness", published), "the published route serves nothing before activation")

	_, err := d.StopRevision(ctx, rev)
	require.NoError(t, err)
}

// runDedicated prepares a dedicated revision and runs its rendered Harness
// and (once the Harness runs, as the driver orders it) Gateway Pods with
// podbin serving the app-server and Gateway ports (oce's status server
// ready on the status port); it returns the Ready Pods.
func runDedicated(t *testing.T, ctx context.Context, d *kdriver.Driver, rev state.Revision) (harness, gateway *corev1.Pod) {
	t.Helper()
	dp, gw := kdriver.DataPlaneNamespace(rev.NamespaceID), kdriver.GatewayNamespace(rev.NamespaceID)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	serve := func(port int) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			asPodbin(s, "serve", corev1.EnvVar{Name: "PORT", Value: fmt.Sprint(port)})
		}
	}
	hdep := patchTemplate(t, dp, deploymentOf(t, dp, rev.AgentID, kdriver.RoleAgent), serve(contract.AppServerPort))
	harness = readyPod(t, dp, metav1.FormatLabelSelector(hdep.Spec.Selector))
	// The candidate Gateway comes once its Harness runs.
	poll.Until(t, func() bool {
		require.NoError(t, d.PrepareRevision(ctx, rev))
		l, err := cluster.Client.AppsV1().Deployments(gw).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(l.Items) == 1
	}, time.Minute, 200*time.Millisecond)
	gdep := patchTemplate(t, gw, deploymentOf(t, gw, rev.AgentID, kdriver.RoleGateway), serve(contract.GatewayPort))
	return harness, readyPod(t, gw, metav1.FormatLabelSelector(gdep.Spec.Selector))
}
