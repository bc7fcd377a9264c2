// Package realnode tests the Kubernetes compute driver against real Pods:
// the k8stest Cluster (control plane + a real kubelet, containerd, runc and
// kube-proxy in private namespaces), started once for the test binary.
// Workloads run the harness's podbin image with the driver's rendered Pod
// templates (probes, volumes, security context, labels); only the
// entrypoints of the not-yet-built runtime images are swapped for podbin.
package realnode

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"oce.dev/oce/shared/netns"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/coordinator/state"
)

var cluster *k8stest.Cluster

// TestMain runs the suite in a PID namespace of its own (host network): no
// kubelet, containerd, shim or container outlives the binary.
func TestMain(m *testing.M) {
	netns.Main(netns.RunnerFunc(func() int { return k8stest.ClusterMain(m, &cluster) }), netns.Options{HostNetwork: true})
}

var seq atomic.Int64

func uid(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

func newDriver(t testing.TB) *kdriver.Driver {
	t.Helper()
	// The driver's calls to Gateway Pods go through the node's namespace:
	// Pod addresses exist only there.
	st := &kdriver.HTTPGatewayStatus{Client: cluster.Client,
		HTTP: &http.Client{Timeout: kdriver.StatusRequestTimeout, Transport: &http.Transport{DialContext: cluster.DialContext}}}
	d, err := kdriver.New(kdriver.Config{GatewayImage: k8stest.PodbinImage, HarnessImage: k8stest.PodbinImage, GatewayStatus: st,
		PollInterval: 50 * time.Millisecond, GatewayStopWait: time.Minute, HarnessStopWait: time.Minute}, cluster.Client)
	require.NoError(t, err)
	return d
}

func embeddedRev(nsID, agentID, revID string) state.Revision {
	return state.Revision{ID: revID, AgentID: agentID, NamespaceID: nsID, Mode: state.ModeEmbedded,
		Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"}, Document: []byte(`{"agents":{}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret:model#key"}}
}

// asPodbin rewrites a rendered template to run podbin in mode with env:
// the supervisor binaries of the exec probes become /podbin (the same
// status.RunReadyProbe code), the init container (it needs a shell the
// FROM-scratch image lacks) is dropped. Everything else stays as rendered.
func asPodbin(spec *corev1.PodSpec, mode string, env ...corev1.EnvVar) {
	spec.InitContainers = nil
	c := &spec.Containers[0]
	c.Command = []string{"/podbin", mode}
	c.Args = nil
	c.Env = append(c.Env, env...)
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.StartupProbe, c.LivenessProbe} {
		if pr != nil && pr.Exec != nil && len(pr.Exec.Command) > 0 {
			switch pr.Exec.Command[0] {
			case "gatewayd", "harnessd":
				pr.Exec.Command = append([]string{"/podbin"}, pr.Exec.Command[1:]...)
			}
		}
	}
}

// patchTemplate applies mutate to a Deployment's Pod template.
func patchTemplate(t *testing.T, ns, name string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	var dep *appsv1.Deployment
	// The Deployment controller writes its status meanwhile: retry on conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&cur.Spec.Template.Spec)
		dep, err = cluster.Client.AppsV1().Deployments(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}))
	return dep
}

func onePod(t *testing.T, ns, selector string) *corev1.Pod {
	t.Helper()
	l, err := cluster.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	var live []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil
	}
	return &live[0]
}

// probeFailures counts kubelet's readiness-probe failures of a Pod (the
// "Unhealthy" Event's count).
func probeFailures(t *testing.T, p *corev1.Pod) int32 {
	t.Helper()
	n, err := cluster.ReadinessFailures(context.Background(), p)
	require.NoError(t, err)
	return n
}

// deploymentOf names the Agent's Deployment of a workload role.
func deploymentOf(t *testing.T, ns, agentID, role string) string {
	t.Helper()
	l, err := cluster.Client.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: kdriver.LabelAgent + "=" + agentID + "," + kdriver.LabelRole + "=" + role})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	return l.Items[0].Name
}
