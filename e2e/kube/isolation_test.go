package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
)

// IntruderNS is a namespace without any NetworkPolicy: its Pod stands for
// any Pod of the cluster, another team's included.
const IntruderNS = "e2e-intruder"

var (
	intruderOnce sync.Once
	intruderPod  *corev1.Pod
)

// intruder is a podbin Pod in IntruderNS (created once).
func intruder(t testing.TB) *corev1.Pod {
	t.Helper()
	intruderOnce.Do(func() {
		ctx := context.Background()
		c := cluster.Client.CoreV1()
		_, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: IntruderNS}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.Pods(IntruderNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr(false), EnableServiceLinks: ptr(false), TerminationGracePeriodSeconds: ptr(int64(1)),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))},
			Containers: []corev1.Container{{Name: "podbin", Image: k8stest.PodbinImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/podbin", "serve"}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			p, err := c.Pods(IntruderNS).Get(ctx, "intruder", metav1.GetOptions{})
			if err == nil && podReady(p) || err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				intruderPod = p
				return true
			}
			return false
		}, time.Minute, 200*time.Millisecond)
	})
	require.NotNil(t, intruderPod)
	return intruderPod
}

// probeFrom runs podbin probe in a Pod: "" when url answered 200, else
// what failed.
func probeFrom(ctx context.Context, p *corev1.Pod, url string) string {
	out, err := cluster.Exec(ctx, p.Namespace, p.Name, p.Spec.Containers[0].Name, "/podbin", "probe", url)
	if err == nil {
		return ""
	}
	return strings.TrimSpace(out) + " (" + err.Error() + ")"
}

// isolated asserts that a Pod of no team reaches none of the Agent Pod's
// ports: each connection is dropped by the enforced policies (it times
// out), while a control connection to an unguarded Pod (the fake
// provider) answers.
func isolated(t testing.TB, p *corev1.Pod, ports ...int) {
	t.Helper()
	ctx := t.Context()
	from := intruder(t)
	var control string
	require.Eventually(t, func() bool {
		control = probeFrom(ctx, from, ProviderURL+"/")
		return !strings.Contains(control, "Timeout") && !strings.Contains(control, "refused")
	}, time.Minute, 250*time.Millisecond, "the control: the intruder reaches the unguarded fake provider (%s)", control)
	for _, port := range ports {
		url := fmt.Sprintf("http://%s:%d/", p.Status.PodIP, port)
		res := probeFrom(ctx, from, url)
		require.Contains(t, res, "Client.Timeout", "%s/%s:%d is unreachable from another namespace: %s", p.Namespace, p.Name, port, res)
	}
}
