package kubernetes

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
)

// TestLogsReadTheRevisionsPod: the driver finds the revision's Pod by its
// exact labels and streams its container's log (the fake clientset answers
// every log request with "fake logs").
func TestLogsReadTheRevisionsPod(t *testing.T) {
	d, cs := newFake(t)
	rev := dedicatedRev("r1")
	p, err := d.planFor(rev)
	require.NoError(t, err)
	ctx := t.Context()
	var out bytes.Buffer
	err = d.Logs(ctx, rev, compute.LogOptions{Container: compute.ContainerGateway}, &out)
	require.ErrorIs(t, err, compute.ErrNoLogs, "no Pod yet")

	for _, pod := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: p.gw, Labels: p.gatewayPodLabels()}},
		{ObjectMeta: metav1.ObjectMeta{Name: "har", Namespace: p.dp, Labels: p.harnessPodLabels()}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: p.gw, Labels: map[string]string{LabelRole: RoleGateway}}},
	} {
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, d.Logs(ctx, rev, compute.LogOptions{Container: compute.ContainerGateway, Tail: 5}, &out))
	require.Equal(t, "fake logs", out.String())
	out.Reset()
	require.NoError(t, d.Logs(ctx, rev, compute.LogOptions{Container: compute.ContainerHarness}, &out))
	require.Equal(t, "fake logs", out.String())

	err = d.Logs(ctx, embeddedRev("r2"), compute.LogOptions{Container: compute.ContainerHarness}, &out)
	require.ErrorIs(t, err, compute.ErrNoLogs, "embedded revisions have no Harness")
}
