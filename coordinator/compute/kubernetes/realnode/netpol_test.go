package realnode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// podbinPod is a podbin Pod serving on port (and oce's status server on
// the status port) with the restricted Pod Security profile's settings.
func podbinPod(t *testing.T, ns, name string, labels map[string]string, port int) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr(false), EnableServiceLinks: ptr(false), TerminationGracePeriodSeconds: ptr(int64(1)),
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "podbin", Image: k8stest.PodbinImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"/podbin", "serve"},
			Env: []corev1.EnvVar{{Name: "PORT", Value: fmt.Sprint(port)},
				{Name: "OCE_STATUS_ADDR", Value: fmt.Sprintf(":%d", contract.StatusPort)}},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
	_, err := cluster.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	return readyPod(t, ns, metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels}))
}

func ptr[T any](v T) *T { return &v }

// reach reports how a GET from a Pod fared: "" when it answered 200, else
// podbin probe's output (a dropped connection times out; a refused one
// says so).
func reach(ctx context.Context, from *corev1.Pod, url string) string {
	out, err := cluster.Exec(ctx, from.Namespace, from.Name, from.Spec.Containers[0].Name, "/podbin", "probe", url)
	if err == nil {
		return ""
	}
	return strings.TrimSpace(out) + " (" + err.Error() + ")"
}

// dropped asserts the connection is dropped (the enforcer's verdict: a
// time-out, not a refusal or an answer).
func dropped(t *testing.T, ctx context.Context, from *corev1.Pod, url, what string) {
	t.Helper()
	res := reach(ctx, from, url)
	require.NotEmpty(t, res, "%s: %s answered", what, url)
	require.Contains(t, res, "Client.Timeout", "%s: %s is dropped, not refused: %s", what, url, res)
}

// flows asserts the connection succeeds (within a bound: the enforcer
// learns a new Pod's address from its watch, kube-proxy a Service's
// endpoint).
func flows(t *testing.T, ctx context.Context, from *corev1.Pod, url, what string) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		last = reach(ctx, from, url)
		return last == ""
	}, time.Minute, 250*time.Millisecond, "%s: %s (last: %s)", what, url, last)
}

func podURL(p *corev1.Pod, port int, path string) string {
	return fmt.Sprintf("http://%s:%d%s", p.Status.PodIP, port, path)
}

// TestEnforcerDropsDenied is the positive control: on the real node, a
// connection that flows without a policy is dropped once a default-deny
// policy selects its target, and flows again when the policy goes — the
// enforcer enforces, so the isolation tests below can fail.
func TestEnforcerDropsDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := uid("netpol-control")
	_, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	server := podbinPod(t, ns, "server", map[string]string{"app": "server"}, 8080)
	client := podbinPod(t, ns, "client", map[string]string{"app": "client"}, 8081)
	url := podURL(server, 8080, "/healthz")
	flows(t, ctx, client, url, "no policy")

	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	_, err = cluster.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return reach(ctx, client, url) != "" }, 30*time.Second, 250*time.Millisecond)
	dropped(t, ctx, client, url, "default-deny ingress")

	require.NoError(t, cluster.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "deny", metav1.DeleteOptions{}))
	flows(t, ctx, client, url, "the policy gone")
}

// TestTeamsIsolatedOnRealPods runs team A's dedicated Agent (the driver's
// rendered Harness and Gateway Pods, podbin serving their ports, oce's
// status server on the status port) under the driver's policies, with the
// enforcer on, and tries every door from outside: a Pod of team B labelled
// like B's own Harness, and a Pod in a namespace without any policy (any
// Pod of the cluster), reach neither A's Gateway port nor its status port
// nor its Harness — each connection is dropped. Team A's own traffic flows
// (its workspace node to the Gateway through the node route, the Gateway
// to its Harness), and the coordinator's Pods (by their labels, in their
// namespace) reach the Gateway's status port and nothing else.
func TestTeamsIsolatedOnRealPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	coordNS := uid("oce-coord")
	_, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: coordNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	coordLabels := map[string]string{"app.kubernetes.io/name": "oce-coordinator"}
	st := &kdriver.HTTPGatewayStatus{Client: cluster.Client,
		HTTP: &http.Client{Timeout: kdriver.StatusRequestTimeout, Transport: &http.Transport{DialContext: cluster.DialContext}}}
	d, err := kdriver.New(kdriver.Config{GatewayImage: k8stest.PodbinImage, HarnessImage: k8stest.PodbinImage, GatewayStatus: st,
		PollInterval: 50 * time.Millisecond, GatewayStopWait: time.Minute, HarnessStopWait: time.Minute,
		Coordinator: kdriver.CoordinatorPeer{Namespace: coordNS, PodLabels: coordLabels}}, cluster.Client)
	require.NoError(t, err)

	teamA, teamB, agentA := uid("team-a"), uid("team-b"), uid("a")
	for _, id := range []string{teamA, teamB} {
		require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: id}))
	}
	rev := dedicatedRev(teamA, agentA, uid("r"))
	harness, gateway := runDedicated(t, ctx, d, rev)

	// team A's own paths
	nodeURL, appURL := "", ""
	for _, e := range harness.Spec.Containers[0].Env {
		if e.Name == contract.EnvNodehostGatewayURL {
			nodeURL = e.Value
		}
	}
	for _, e := range gateway.Spec.Containers[0].Env {
		if e.Name == contract.EnvAppServerURL {
			appURL = "http" + strings.TrimPrefix(e.Value, "ws")
		}
	}
	flows(t, ctx, harness, nodeURL+"/healthz", "A's workspace node → A's Gateway (node route)")
	flows(t, ctx, gateway, appURL+"/healthz", "A's Gateway → A's Harness")

	// the coordinator: the status port, nothing else
	coordinator := podbinPod(t, coordNS, "coordinator", coordLabels, 7400)
	flows(t, ctx, coordinator, podURL(gateway, contract.StatusPort, "/readyz"), "the coordinator → A's Gateway status port")
	dropped(t, ctx, coordinator, podURL(gateway, contract.GatewayPort, "/healthz"), "the coordinator → A's Gateway port")
	dropped(t, ctx, coordinator, podURL(harness, contract.AppServerPort, "/healthz"), "the coordinator → A's Harness")

	// team B: a Pod labelled like B's own Harness, and a Pod of a namespace
	// without any policy (any Pod of the cluster)
	bLabels := map[string]string{kdriver.LabelManagedBy: kdriver.ManagedBy, kdriver.LabelNamespace: teamB, kdriver.LabelAgent: "b",
		kdriver.LabelRole: kdriver.RoleAgent, kdriver.LabelNetworkProfile: kdriver.NetworkProfileOrdinary}
	openNS := uid("no-policy")
	_, err = cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: openNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	intruders := []*corev1.Pod{
		podbinPod(t, kdriver.DataPlaneNamespace(teamB), "team-b", bLabels, 8080),
		podbinPod(t, openNS, "anyone", map[string]string{"app": "anyone"}, 8080),
	}
	// a control first: the open Pod reaches what no policy guards
	flows(t, ctx, intruders[1], podURL(coordinator, 7400, "/healthz"), "a Pod without policies → an unguarded Pod")
	for _, from := range intruders {
		who := from.Namespace + "/" + from.Name
		dropped(t, ctx, from, podURL(gateway, contract.GatewayPort, "/healthz"), who+" → A's Gateway port")
		dropped(t, ctx, from, podURL(gateway, contract.StatusPort, "/readyz"), who+" → A's Gateway status port")
		dropped(t, ctx, from, podURL(harness, contract.AppServerPort, "/healthz"), who+" → A's Harness app-server")
		dropped(t, ctx, from, podURL(harness, contract.StatusPort, "/readyz"), who+" → A's Harness status port")
	}
	dropped(t, ctx, intruders[1], nodeURL+"/healthz", "anyone → A's node route (Service)")

	// still serving: A's own paths after the attempts
	flows(t, ctx, harness, nodeURL+"/healthz", "A's workspace node → A's Gateway, after")
	_, err = d.StopRevision(ctx, rev)
	require.NoError(t, err)
	logEnforcerCost(t, ctx)
}

// logEnforcerCost prints what the enforcer spent per judged packet (its
// processing-time summary) and its memory: docs/PERFORMANCE.md's figures.
func logEnforcerCost(t *testing.T, ctx context.Context) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: cluster.DialContext}}
	resp, err := c.Get("http://" + k8stest.NetpolMetricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		for _, p := range []string{"kube_network_policies_packet_process_duration_microseconds_sum", "kube_network_policies_packet_process_duration_microseconds_count",
			"kube_network_policies_packet_count", "process_resident_memory_bytes"} {
			if strings.HasPrefix(line, p) {
				t.Logf("enforcer: %s", line)
			}
		}
	}
}
