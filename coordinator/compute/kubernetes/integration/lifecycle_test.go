package integration

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"oce.dev/oce/coordinator/compute"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

func setPodStatus(t *testing.T, ns string, p corev1.Pod, mutate func(*corev1.Pod)) {
	t.Helper()
	require.Eventually(t, func() bool { // retry on conflicts with kwok's own status writes
		cur, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		mutate(cur)
		_, err = env.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
}

func setCondition(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

func observe(t *testing.T, d *kdriver.Driver, rev state.Revision) compute.Observation {
	t.Helper()
	o, err := d.ObserveRevision(context.Background(), rev)
	require.NoError(t, err)
	return o
}

// TestLiveReadinessCases exercises the readiness rule on Pods the API
// server stored: an unready Pod, a held runtime failure reported as a Pod
// condition, and a second live candidate.
func TestLiveReadinessCases(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID, agentID := uid("ns-ready"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	prepareUntilReady(t, d, rev)
	dp := kdriver.DataPlaneNamespace(nsID)
	harness := sel(kdriver.LabelAgent, agentID, kdriver.LabelRole, kdriver.RoleAgent)
	pods := podsOf(t, dp, harness)
	require.Len(t, pods, 1)

	setPodStatus(t, dp, pods[0], func(p *corev1.Pod) {
		setCondition(p, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()})
	})
	require.Eventually(t, func() bool { return !observe(t, d, rev).Ready }, 10*time.Second, 20*time.Millisecond)
	o := observe(t, d, rev)
	require.Equal(t, kdriver.ReasonHarnessNotReady+":"+kdriver.ReasonPodNotReady, o.Reason)
	err := d.ActivateRevision(ctx, rev)
	code, _ := compute.ErrorCode(err, "")
	require.Equal(t, codes.ActivationPending, code, "activation repeats the check")

	setPodStatus(t, dp, pods[0], func(p *corev1.Pod) {
		setCondition(p, corev1.PodCondition{Type: kdriver.ConditionRuntimeFailure, Status: corev1.ConditionTrue,
			Reason: string(codes.ModelProbeFailed), Message: `{"check":"model-probe","cause":{"kind":"PROCESS_EXIT","detail":"exit-1"}}`,
			LastTransitionTime: metav1.Now()})
	})
	o = observe(t, d, rev)
	require.False(t, o.Ready)
	require.Equal(t, codes.ModelProbeFailed, o.HeldCode)
	require.Equal(t, codes.CauseProcessExit, o.Cause.Kind)

	// Clear the hold and make it Ready again; then a second live candidate blocks.
	setPodStatus(t, dp, pods[0], func(p *corev1.Pod) {
		setCondition(p, corev1.PodCondition{Type: kdriver.ConditionRuntimeFailure, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()})
		setCondition(p, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	})
	require.True(t, observe(t, d, rev).Ready)
	h := podsOf(t, dp, harness)[0]
	dep, err := env.Client.AppsV1().Deployments(dp).Get(ctx, h.OwnerReferences[0].Name[:strings.LastIndex(h.OwnerReferences[0].Name, "-")], metav1.GetOptions{})
	require.NoError(t, err)
	sc, err := env.Client.AppsV1().Deployments(dp).GetScale(ctx, dep.Name, metav1.GetOptions{})
	require.NoError(t, err)
	sc.Spec.Replicas = 2
	_, err = env.Client.AppsV1().Deployments(dp).UpdateScale(ctx, dep.Name, sc, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(podsOf(t, dp, harness)) == 2 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, kdriver.ReasonHarnessNotReady+":"+kdriver.ReasonMultipleCandidate, observe(t, d, rev).Reason)
}

// watchRV records the resourceVersion of DELETED events.
type watchRV struct {
	mu      sync.Mutex
	deleted map[string]uint64 // name → RV of its DELETED event
}

func (w *watchRV) get(name string) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.deleted[name]
	return rv, ok
}

func watchDeleted(t *testing.T, wi watch.Interface) *watchRV {
	w := &watchRV{deleted: map[string]uint64{}}
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			m, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
			w.mu.Lock()
			w.deleted[m.GetName()] = rv
			w.mu.Unlock()
		}
	}()
	t.Cleanup(wi.Stop)
	return w
}

// TestStopOrdering: the Gateway Deployment is deleted with uid and
// resourceVersion preconditions and its Pods are gone (server-side order of
// the watch events) before the Harness is touched at all.
func TestStopOrdering(t *testing.T) {
	ctx := context.Background()
	cs, rec := recordingClient(t)
	d := newDriver(t, cs)
	nsID, agentID := uid("ns-stop"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	prepareUntilReady(t, d, rev)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	dp, gw := kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)
	gwPods := podsOf(t, gw, sel(kdriver.LabelAgent, agentID))
	require.Len(t, gwPods, 1)
	pw, err := env.Client.CoreV1().Pods(gw).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	gwPodEvents := watchDeleted(t, pw)
	dw, err := env.Client.AppsV1().Deployments(dp).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	harnessEvents := watchDeleted(t, dw)
	gdep := getDeployment(t, gw, "gateway-"+strings.TrimPrefix(gwPods[0].Labels[kdriver.LabelName], "gateway-"))

	rec.reset()
	res, err := d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, res.Stopped)
	require.True(t, res.Found, "the running revision was found and stopped")

	calls := rec.snapshot()
	gwDelete, firstHarness := -1, -1
	for i, c := range calls {
		if c.Method == "DELETE" && strings.Contains(c.Path, "/namespaces/"+gw+"/deployments/") && gwDelete < 0 {
			gwDelete = i
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(c.Body), nil, nil)
			require.NoError(t, err)
			opts, ok := obj.(*metav1.DeleteOptions)
			require.True(t, ok, "%T", obj)
			require.NotNil(t, opts.Preconditions)
			require.Equal(t, gdep.UID, *opts.Preconditions.UID)
			require.NotNil(t, opts.Preconditions.ResourceVersion, "resourceVersion precondition")
			require.NotEmpty(t, *opts.Preconditions.ResourceVersion)
		}
		if strings.Contains(c.Path, "/namespaces/"+dp+"/") && firstHarness < 0 {
			firstHarness = i
		}
	}
	require.GreaterOrEqual(t, gwDelete, 0, "gateway deleted")
	require.Greater(t, firstHarness, gwDelete, "the Harness is touched only after the Gateway delete")
	// Every request between them concerns the Gateway (polling its Pods,
	// or re-reading it after a precondition conflict).
	var polled bool
	for _, c := range calls[gwDelete+1 : firstHarness] {
		require.Contains(t, c.Path, "/namespaces/"+gw+"/")
		polled = polled || strings.HasSuffix(c.Path, "/namespaces/"+gw+"/pods")
	}
	require.True(t, polled, "the Gateway Pods were polled before the Harness was touched")
	var harnessName string
	require.Eventually(t, func() bool {
		for _, c := range calls {
			if c.Method == "DELETE" && strings.Contains(c.Path, "/namespaces/"+dp+"/deployments/") {
				harnessName = c.Path[strings.LastIndex(c.Path, "/")+1:]
			}
		}
		_, a := gwPodEvents.get(gwPods[0].Name)
		_, b := harnessEvents.get(harnessName)
		return harnessName != "" && a && b
	}, 30*time.Second, 20*time.Millisecond)
	podGone, _ := gwPodEvents.get(gwPods[0].Name)
	harnessDeleted, _ := harnessEvents.get(harnessName)
	require.Less(t, podGone, harnessDeleted, "the Gateway Pod was gone (etcd revision) before the Harness Deployment was deleted")
	require.Empty(t, podsOf(t, dp, sel(kdriver.LabelAgent, agentID)), "harness pods gone when StopRevision returns")

	// Stopping again finds nothing; a late write by another driver (lost
	// claim) brings the runtime back, and a stop by a driver that never
	// stopped it (a new leader's) finds it: the engine's replicated stop
	// record makes that a comeback, not the driver's memory.
	res, err = d.StopRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, res.Found)
	late := newDriver(t, env.Client)
	require.NoError(t, late.PrepareRevision(ctx, rev))
	res, err = newDriver(t, env.Client).StopRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, res.Found)
}

type objKey struct{ kind, ns, name string }

// inventory lists every object carrying agentID's label in both namespaces.
func inventory(t *testing.T, nsID, agentID string) map[objKey]types.UID {
	t.Helper()
	ctx := context.Background()
	out := map[objKey]types.UID{}
	o := metav1.ListOptions{LabelSelector: sel(kdriver.LabelAgent, agentID)}
	add := func(kind, ns string, m metav1.Object) {
		if m.GetDeletionTimestamp() == nil {
			out[objKey{kind, ns, m.GetName()}] = m.GetUID()
		}
	}
	for _, ns := range []string{kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)} {
		deps, err := env.Client.AppsV1().Deployments(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range deps.Items {
			add("deployment", ns, &deps.Items[i])
		}
		pvcs, err := env.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range pvcs.Items {
			add("pvc", ns, &pvcs.Items[i])
		}
		secs, err := env.Client.CoreV1().Secrets(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range secs.Items {
			add("secret", ns, &secs.Items[i])
		}
		cms, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range cms.Items {
			add("configmap", ns, &cms.Items[i])
		}
		svcs, err := env.Client.CoreV1().Services(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range svcs.Items {
			add("service", ns, &svcs.Items[i])
		}
		sas, err := env.Client.CoreV1().ServiceAccounts(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range sas.Items {
			add("serviceaccount", ns, &sas.Items[i])
		}
		nps, err := env.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range nps.Items {
			add("networkpolicy", ns, &nps.Items[i])
		}
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, o)
		require.NoError(t, err)
		for i := range pods.Items {
			add("pod", ns, &pods.Items[i])
		}
	}
	return out
}

func kinds(inv map[objKey]types.UID) map[string]int {
	out := map[string]int{}
	for k := range inv {
		out[k.kind]++
	}
	return out
}

func TestRetireKeepsClaims(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID, agentID := uid("ns-retire"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	prepareUntilReady(t, d, rev)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	before := inventory(t, nsID, agentID)
	require.Equal(t, 2, kinds(before)["pvc"])

	require.NoError(t, d.RetireRevision(ctx, rev))
	require.NoError(t, d.RetireRevision(ctx, rev), "idempotent")
	after := inventory(t, nsID, agentID)
	for k, u := range before {
		if k.kind == "pvc" {
			require.Equal(t, u, after[k], "claim %s kept with the same UID", k.name)
		}
	}
	got := kinds(after)
	require.Zero(t, got["deployment"])
	require.Zero(t, got["pod"])
	require.Zero(t, got["configmap"], "revision ConfigMaps removed")
	// Agent-owned identity, Services and Secrets stay; revision ones go.
	require.Equal(t, 2, got["serviceaccount"])
	require.Equal(t, 3, got["service"], "the Gateway, its node route and the Harness Service")
	for k := range after {
		if k.kind == "secret" {
			require.False(t, strings.HasPrefix(k.name, "harness-secrets-") || strings.HasPrefix(k.name, "workspace-node-"), k.name)
		}
	}
}

// TestDeleteOnlyWhatTheAgentOwns: deleting one Agent's runtime removes
// exactly its objects in both namespaces and nothing of a second Agent in
// the same Namespace; the Namespace is deleted only once it is empty.
func TestDeleteOnlyWhatTheAgentOwns(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID := uid("ns-del")
	a1, a2 := uid("a"), uid("b")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	r1 := revision(nsID, a1, uid("r"), state.ModeDedicated)
	r2 := revision(nsID, a2, uid("r"), state.ModeEmbedded)
	prepareUntilReady(t, d, r1)
	prepareUntilReady(t, d, r2)
	require.NoError(t, d.ActivateRevision(ctx, r1))
	require.NoError(t, d.ActivateRevision(ctx, r2))
	inv2 := inventory(t, nsID, a2)
	require.NotEmpty(t, inventory(t, nsID, a1))

	// Before retirement the credentials cannot be deleted, and nothing is.
	err := d.DeleteAgentRuntimeCredentials(ctx, state.Agent{ID: a1, NamespaceID: nsID})
	require.Error(t, err)
	require.Equal(t, 2, kinds(inventory(t, nsID, a1))["pvc"])

	require.NoError(t, d.RetireRevision(ctx, r1))
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{ID: a1, NamespaceID: nsID, ExecutionMode: state.ModeEmbedded}),
		"both physical namespaces are checked whatever the current mode")
	require.Empty(t, inventory(t, nsID, a1))
	require.Equal(t, inv2, inventory(t, nsID, a2), "the second Agent is untouched")

	err = d.DeleteNamespace(ctx, state.Namespace{ID: nsID})
	code, _ := compute.ErrorCode(err, "")
	require.Equal(t, codes.NamespaceNotEmpty, code)
	require.ErrorIs(t, err, kdriver.ErrNotEmpty)

	require.NoError(t, d.RetireRevision(ctx, r2))
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{ID: a2, NamespaceID: nsID}))
	require.NoError(t, d.DeleteNamespace(ctx, state.Namespace{ID: nsID}))
	for _, n := range []string{kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)} {
		ns, err := env.Client.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
		if err == nil {
			require.NotNil(t, ns.DeletionTimestamp, "%s is terminating", n)
		}
	}
}

var _ = appsv1.RecreateDeploymentStrategyType
