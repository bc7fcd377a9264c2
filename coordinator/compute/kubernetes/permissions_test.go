package kubernetes

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/internal/poll"
)

// recorder notes every API access a client makes, cluster-wide and inside
// namespaces apart, and every namespace it touches.
type recorder struct {
	mu         sync.Mutex
	cluster    map[Permission]bool
	namespaced map[Permission]bool
	namespaces map[string]bool
	paused     bool
}

func newRecorder() *recorder {
	return &recorder{cluster: map[Permission]bool{}, namespaced: map[Permission]bool{}, namespaces: map[string]bool{}}
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
	switch gvr.Group {
	case "authorization.k8s.io", "authentication.k8s.io":
		// Self reviews (the start-time check, who am I): every
		// authenticated identity may make them (system:basic-user).
		return false, nil, nil
	}
	p := Permission{Verb: a.GetVerb(), Group: gvr.Group, Resource: gvr.Resource, Subresource: a.GetSubresource()}
	if gvr.Resource == "clusterroles" {
		p.Name = a.(k8stesting.GetAction).GetName() // granted by name only
	}
	if a.GetNamespace() != "" {
		r.namespaces[a.GetNamespace()] = true
	}
	// The RoleBinding that grants the namespaced permissions cannot itself
	// be granted inside the namespace beforehand: cluster-wide.
	if a.GetNamespace() == "" || gvr.Resource == "rolebindings" {
		r.cluster[p] = true
	} else {
		r.namespaced[p] = true
	}
	if c, ok := a.(k8stesting.CreateAction); ok && gvr.Resource == "rolebindings" {
		// RBAC refuses to create a binding of a role the creator neither
		// holds nor may bind: creating one implies bind on its role.
		rb := c.GetObject().(*rbacv1.RoleBinding)
		r.cluster[Permission{Verb: "bind", Group: groupRBAC, Resource: "clusterroles", Name: rb.RoleRef.Name}] = true
	}
	return false, nil, nil
}

// reactWatch records the watches of the driver's caches; the test itself
// never watches, so they are recorded even while paused.
func (r *recorder) reactWatch(a k8stesting.Action) (bool, watch.Interface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gvr := a.GetResource()
	p := Permission{Verb: "watch", Group: gvr.Group, Resource: gvr.Resource}
	if a.GetNamespace() == "" {
		r.cluster[p] = true
	} else {
		r.namespaces[a.GetNamespace()] = true
		r.namespaced[p] = true
	}
	return false, nil, nil
}

func recorded(m map[Permission]bool) []Permission {
	out := make([]Permission, 0, len(m))
	for p := range m {
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
	rec := newRecorder()
	d, cs, st := newFakeStatus(t)
	d.cfg.Subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "oce-system", Name: "oce-coordinator"}
	d.cfg.ProbeBeforeCutover = true // the default activation order: a staged replacement's probe Pod
	d.cfg.ObserveCache = true       // as the coordinator runs it: the caches' watches
	t.Cleanup(d.Close)
	ctx := context.Background()
	_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: NamespaceRole},
		Rules: NamespaceRoleRules()}, metav1.CreateOptions{})
	require.NoError(t, err)
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed = true
		return true, r, nil
	})
	cs.PrependReactor("*", "*", rec.react)
	cs.PrependWatchReactor("*", rec.reactWatch)

	// the start-time check, then embedded: create, activate, replace,
	// stop, retire — in a Namespace with a quota that changes and goes
	require.NoError(t, CheckPermissions(ctx, cs))
	quota := &state.NamespaceQuota{Agents: 2, CPU: "8", Memory: "16Gi", Storage: "100Gi"}
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1", Quota: quota}))
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1", Quota: &state.NamespaceQuota{Agents: 3, CPU: "8"}}))
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
	p2, err := d.planFor(r2)
	require.NoError(t, err)
	rec.off(func() { probeStatus(t, cs, p2, true, time.Now(), "") })
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
	require.Eventually(t, func() bool { // the caches may still show the Gateway starting
		obs, err = d.ObserveRevision(ctx, rd)
		return err == nil && obs.Ready
	}, 10*time.Second, 5*time.Millisecond)
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
	// once the caches show its containers running, the candidate is the
	// API server's to judge, Events included
	poll.Until(t, func() bool {
		_, err = d.ObserveRevision(ctx, rd)
		require.NoError(t, err)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.namespaced[Permission{Verb: "list", Resource: "events"}]
	}, 10*time.Second, 5*time.Millisecond)
	for _, pod := range []struct{ ns, name string }{{pd.gw, "gateway-0"}, {pd.dp, "harness-0"}} {
		rec.off(func() { require.NoError(t, cs.CoreV1().Pods(pod.ns).Delete(ctx, pod.name, deleteNow())) })
	}
	require.NoError(t, d.RetireRevision(ctx, rd))

	// credential sources: create, rotate, resolve, register, withdraw
	store := d.CredentialStore()
	require.NoError(t, store.PutCredential(ctx, state.Namespace{ID: "ns1"}, "model", 1, map[string][]byte{"value": []byte("v1")}))
	require.NoError(t, store.PutCredential(ctx, state.Namespace{ID: "ns1"}, "model", 2, map[string][]byte{"value": []byte("v2")}))
	_, err = NamespaceSecrets(cs).Resolve(ctx, state.Revision{NamespaceID: "ns1", Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw},
		HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "credential:model"}})
	require.NoError(t, err)
	_, err = store.ReadLocation(ctx, state.Namespace{ID: "ns1"}, "secret:"+DataPlaneNamespace("ns1")+"/credential-model")
	require.ErrorIs(t, err, compute.ErrLocationRefused)
	require.NoError(t, store.DeleteCredential(ctx, state.Namespace{ID: "ns1"}, "model"))

	// teardown: Agent credentials, the quota, then the Namespace
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	_, err = d.StopRevision(ctx, r2)
	require.NoError(t, err)
	require.NoError(t, d.RetireRevision(ctx, r2))
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{NamespaceID: "ns1", ID: "a1"}))
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{NamespaceID: "ns2", ID: "a1"}))
	require.NoError(t, d.DeleteNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d.DeleteNamespace(ctx, state.Namespace{ID: "ns2"}))

	// the caches' watches start asynchronously, after their first list
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.namespaced[Permission{Verb: "watch", Resource: "pods"}] &&
			rec.namespaced[Permission{Verb: "watch", Group: "apps", Resource: "deployments"}] &&
			rec.namespaced[Permission{Verb: "watch", Resource: "services"}] &&
			rec.namespaced[Permission{Verb: "watch", Resource: "configmaps"}] &&
			rec.namespaced[Permission{Verb: "watch", Group: "networking.k8s.io", Resource: "networkpolicies"}]
	}, 10*time.Second, 10*time.Millisecond, "the caches watch Pods, Deployments, Services, ConfigMaps and NetworkPolicies")
	require.Equal(t, ClusterPermissions, recorded(rec.cluster), "cluster-wide")
	require.Equal(t, NamespacePermissions, recorded(rec.namespaced), "inside managed namespaces")
	managed := map[string]bool{}
	for _, id := range []string{"ns1", "ns2"} {
		managed[DataPlaneNamespace(id)], managed[GatewayNamespace(id)] = true, true
	}
	for ns := range rec.namespaces {
		require.True(t, managed[ns], "the driver touches only namespaces it manages, not %s", ns)
	}
	require.Equal(t, Permissions, append(append([]Permission{}, ClusterPermissions...), NamespacePermissions...))
}

// The start-time check names every missing access: cluster-wide ones by
// access review, namespaced ones by the ClusterRole NamespaceRole's rules
// (missing role: all of them).
func TestCheckPermissionsNamesMissing(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed = r.Spec.ResourceAttributes.Verb != "bind"
		return true, r, nil
	})
	err := CheckPermissions(ctx, cs)
	require.ErrorIs(t, err, ErrMissingPermission)
	require.Contains(t, err.Error(), "bind rbac.authorization.k8s.io/clusterroles "+NamespaceRole)
	for _, p := range NamespacePermissions {
		require.Contains(t, err.Error(), p.String())
	}
	require.NotContains(t, err.Error(), "create namespaces")

	rules := NamespaceRoleRules()
	rules[0].Verbs = rules[0].Verbs[1:] // one verb short
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: NamespaceRole},
		Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = CheckPermissions(ctx, cs)
	require.ErrorIs(t, err, ErrMissingPermission)
	require.Equal(t, 2, strings.Count(err.Error(), ", ")+1, err.Error())

	sub, err := SubjectOf("system:serviceaccount:oce-system:oce-coordinator")
	require.NoError(t, err)
	require.Equal(t, rbacv1.Subject{Kind: "ServiceAccount", Namespace: "oce-system", Name: "oce-coordinator"}, sub)
	sub, err = SubjectOf("admin")
	require.NoError(t, err)
	require.Equal(t, rbacv1.Subject{Kind: "User", APIGroup: groupRBAC, Name: "admin"}, sub)
	for _, bad := range []string{"", "system:serviceaccount:ns", "system:serviceaccount::x"} {
		_, err = SubjectOf(bad)
		require.Error(t, err, bad)
	}
}

func deleteNow() metav1.DeleteOptions { return metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))} }
