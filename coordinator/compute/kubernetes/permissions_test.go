package kubernetes

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"oce.dev/oce/coordinator/state"
)

// recorder notes every API access a client makes.
type recorder struct {
	mu     sync.Mutex
	seen   map[Permission]bool
	paused bool
}

// off runs the test's own API calls (planting Pods) unrecorded.
func (r *recorder) off(fn func()) {
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
	fn()
	r.mu.Lock()
	r.paused = false
	r.mu.Unlock()
}

func (r *recorder) react(a k8stesting.Action) (bool, runtime.Object, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		return false, nil, nil
	}
	gvr := a.GetResource()
	r.seen[Permission{Verb: a.GetVerb(), Group: gvr.Group, Resource: gvr.Resource, Subresource: a.GetSubresource()}] = true
	return false, nil, nil
}

func (r *recorder) list() []Permission {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Permission, 0, len(r.seen))
	for p := range r.seen {
		out = append(out, p)
	}
	sortPermissions(out)
	return out
}

func sortPermissions(ps []Permission) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
}

// Permissions is exactly what the driver calls: every operation of both
// topologies (namespace setup, prepare, observe, enrollment, activation,
// replacement, stop, retire, credential and namespace deletion) runs
// against a recording client, and the recorded accesses must equal the
// declared list — nothing missing (the deploy bundle's ClusterRole would
// deny it), nothing extra (the ClusterRole would grant more than needed).
func TestPermissionsAreExactlyWhatTheDriverCalls(t *testing.T) {
	rec := &recorder{seen: map[Permission]bool{}}
	d, cs, st := newFakeStatus(t)
	cs.PrependReactor("*", "*", rec.react)
	ctx := context.Background()

	// embedded: create, activate, replace, stop, retire
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	r1 := embeddedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, r1))
	p1, err := d.planFor(r1)
	require.NoError(t, err)
	rec.off(func() { addPod(t, cs, p1.gw, "gateway-r1", p1.gatewayPodLabels(), true) })
	obs, err := d.ObserveRevision(ctx, r1)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.NoError(t, d.ActivateRevision(ctx, r1))
	r2 := embeddedRev("r2")
	require.NoError(t, d.PrepareRevision(ctx, r2))
	require.NoError(t, d.ActivateRevision(ctx, r2))
	rec.off(func() { require.NoError(t, cs.CoreV1().Pods(p1.gw).Delete(ctx, "gateway-r1", deleteNow())) })
	_, err = d.StopRevision(ctx, r1)
	require.NoError(t, err)
	require.NoError(t, d.RetireRevision(ctx, r1))

	// dedicated Codex: enrollment through the Gateway status, activation
	rd := dedicatedRev("d1")
	rd.NamespaceID = "ns2"
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns2"}))
	require.NoError(t, d.PrepareRevision(ctx, rd))
	pd, err := d.planFor(rd)
	require.NoError(t, err)
	rec.off(func() { addPod(t, cs, pd.dp, "harness-0", pd.harnessWantLabels(), true) })
	require.NoError(t, d.PrepareRevision(ctx, rd))
	rec.off(func() { addPod(t, cs, pd.gw, "gateway-0", pd.gatewayWantLabels(), true) })
	require.NoError(t, d.PrepareRevision(ctx, rd)) // mints the setup code
	st.enroll("node-1")
	obs, err = d.ObserveRevision(ctx, rd)
	require.NoError(t, err)
	require.Equal(t, ReasonNodeNotPinned, obs.Reason)
	require.NoError(t, d.PrepareRevision(ctx, rd)) // pins the node: the Gateway restarts
	rec.off(func() { rollGateway(t, cs, pd, "gateway-1") })
	obs, err = d.ObserveRevision(ctx, rd)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.NoError(t, d.ActivateRevision(ctx, rd))
	// a held candidate: the driver reads kubelet's readiness Events
	rec.off(func() { require.NoError(t, cs.CoreV1().Pods(pd.gw).Delete(ctx, "gateway-1", deleteNow())) })
	rec.off(func() {
		addPod(t, cs, pd.gw, "gateway-0", pd.gatewayWantLabels(), false)
		pod, err := cs.CoreV1().Pods(pd.gw).Get(ctx, "gateway-0", metav1.GetOptions{})
		require.NoError(t, err)
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "gateway",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		_, err = cs.CoreV1().Pods(pd.gw).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
	})
	_, err = d.ObserveRevision(ctx, rd)
	require.NoError(t, err)
	for _, pod := range []struct{ ns, name string }{{pd.gw, "gateway-0"}, {pd.dp, "harness-0"}} {
		rec.off(func() { require.NoError(t, cs.CoreV1().Pods(pod.ns).Delete(ctx, pod.name, deleteNow())) })
	}
	require.NoError(t, d.RetireRevision(ctx, rd))

	// teardown: Agent credentials, then the Namespace
	_, err = d.StopRevision(ctx, r2)
	require.NoError(t, err)
	require.NoError(t, d.RetireRevision(ctx, r2))
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{NamespaceID: "ns1", ID: "a1"}))
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{NamespaceID: "ns2", ID: "a1"}))
	require.NoError(t, d.DeleteNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d.DeleteNamespace(ctx, state.Namespace{ID: "ns2"}))

	want := append([]Permission{}, Permissions...)
	sortPermissions(want)
	require.Equal(t, want, rec.list())
}

func deleteNow() metav1.DeleteOptions { return metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))} }
