package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
)

// TestDedicatedPredecessorGateway: during a dedicated replacement a healthy
// predecessor Gateway stays while the candidate Harness starts (activation
// then switches it); a predecessor Gateway that is not ready is replaced by
// the candidate Gateway once the candidate Harness runs.
func TestDedicatedPredecessorGateway(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID, agentID := uid("ns-pred"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	gw := kdriver.GatewayNamespace(nsID)
	r1 := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	prepareUntilReady(t, d, r1)
	require.NoError(t, d.ActivateRevision(ctx, r1))
	gwName := podsOf(t, gw, sel(kdriver.LabelAgent, agentID))[0].Labels[kdriver.LabelName]
	running := func() string { return getDeployment(t, gw, gwName).Labels[kdriver.LabelRevision] }

	// Healthy predecessor: kept through preparation, switched at activation.
	r2 := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	prepareUntilReady(t, d, r2)
	require.Equal(t, r1.ID, running(), "the healthy predecessor Gateway stays")
	require.NoError(t, d.ActivateRevision(ctx, r2))
	require.Equal(t, r2.ID, running())
	require.Eventually(t, func() bool {
		return len(podsOf(t, gw, sel(kdriver.LabelRevision, r2.ID))) == 1 && len(podsOf(t, gw, sel(kdriver.LabelRevision, r1.ID))) == 0
	}, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { o, err := d.ObserveRevision(ctx, r2); return err == nil && o.Ready }, 30*time.Second, 20*time.Millisecond)

	// Unhealthy predecessor: its Pod goes unready; the candidate Gateway
	// replaces it as the bootstrap endpoint once the candidate Harness runs.
	p := podsOf(t, gw, sel(kdriver.LabelRevision, r2.ID))[0]
	setPodStatus(t, gw, p, func(p *corev1.Pod) {
		setCondition(p, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()})
	})
	require.Eventually(t, func() bool { return getDeployment(t, gw, gwName).Status.ReadyReplicas == 0 }, 30*time.Second, 20*time.Millisecond)
	r3 := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	prepareUntilReady(t, d, r3)
	require.Equal(t, r3.ID, running(), "the candidate Gateway replaced the unready predecessor")
	require.Len(t, podsOf(t, gw, sel(kdriver.LabelRevision, r3.ID)), 1)
}
