package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
)

// TestFakeNodeRenewsItsLease: kwok keeps the fake Node's lease as a kubelet
// does, so the controller manager never marks the Node (and every Pod on
// it) not ready in a long run: the lease is renewed within its duration.
func TestFakeNodeRenewsItsLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*k8stest.NodeLeaseSeconds*time.Second)
	defer cancel()
	leases := env.Client.CoordinationV1().Leases("kube-node-lease")
	var first *metav1.MicroTime
	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, k8stest.NodeName, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false
		}
		first = l.Spec.RenewTime
		return true
	}, k8stest.NodeLeaseSeconds*time.Second, 100*time.Millisecond, "the fake Node holds a lease")
	w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + k8stest.NodeName})
	require.NoError(t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.Time) {
			return
		}
	}
	t.Fatalf("the lease was not renewed within %d s", 2*k8stest.NodeLeaseSeconds)
}
