package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"oce.dev/oce/coordinator/state"
)

// countReads counts the GETs and LISTs cs serves from now on.
func countReads(cs *fake.Clientset) *atomic.Int64 {
	var reads atomic.Int64
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); v == "get" || v == "list" {
			reads.Add(1)
		}
		return false, nil, nil
	})
	return &reads
}

// listed reports whether cs served a LIST of resource since action from.
func listed(cs *fake.Clientset, from int, resource string) bool {
	for _, a := range cs.Actions()[from:] {
		if a.GetVerb() == "list" && a.GetResource().Resource == resource {
			return true
		}
	}
	return false
}

// watching starts the caches of nss and returns once their watches
// deliver: the fake clientset's watch starts at its call, so a change
// between a cache's first list and its watch would be lost for good (the
// real API server resumes from the list's version). A sentinel Pod and
// Deployment, made until the cache sees one of each, prove the watches
// run; they are deleted again, and seen gone.
func watching(t *testing.T, d *Driver, cs *fake.Clientset, nss ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range nss {
		c := d.cacheFor(ns)
		require.NotNil(t, c)
		require.True(t, d.WaitForCaches(ctx))
		lbl := map[string]string{LabelManagedBy: ManagedBy, LabelAgent: "sentinel"}
		arrived := make(chan string, 256) // "pod/NAME", "deployment/NAME" as the caches add them
		for kind, inf := range map[string]cache.SharedIndexInformer{"pod": c.pods, "deployment": c.deploys} {
			_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
				if m, ok := obj.(metav1.Object); ok && m.GetLabels()[LabelAgent] == "sentinel" {
					arrived <- kind + "/" + m.GetName()
				}
			}})
			require.NoError(t, err)
		}
		var pods, deps []string
		gotPod, gotDep := false, false
		for i := 0; !gotPod || !gotDep; i++ {
			require.Less(t, i, 50, "the caches of %s never saw a sentinel", ns)
			name := fmt.Sprintf("sentinel-%d", i)
			_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl}}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl}}, metav1.CreateOptions{})
			require.NoError(t, err)
			pods, deps = append(pods, name), append(deps, name)
			// a sentinel made in a watch's blind moment never arrives: the
			// next one, after this wait, will
			timeout := time.After(200 * time.Millisecond)
		wait:
			for !gotPod || !gotDep {
				select {
				case a := <-arrived:
					gotPod = gotPod || strings.HasPrefix(a, "pod/")
					gotDep = gotDep || strings.HasPrefix(a, "deployment/")
				case <-timeout:
					break wait
				}
			}
		}
		for i := range pods {
			require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, pods[i], metav1.DeleteOptions{}))
			require.NoError(t, cs.AppsV1().Deployments(ns).Delete(ctx, deps[i], metav1.DeleteOptions{}))
		}
		require.Eventually(t, func() bool {
			l, _ := c.podL.Pods(ns).List(labels.SelectorFromSet(lbl))
			d, _ := c.depL.Deployments(ns).List(labels.SelectorFromSet(lbl))
			return len(l) == 0 && len(d) == 0
		}, 10*time.Second, 5*time.Millisecond, "the sentinels gone from the caches of %s", ns)
	}
}

// The observation cache answers an at-rest Agent without a request, yields
// every other verdict to the API server, and stops being trusted after a
// watch error; off, every observation reads through the API server.
func TestObserveCache(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cache         bool
		wantAtRestReq bool
	}{
		{name: "cache on: at rest without requests", cache: true},
		{name: "cache off: requests every pass", cache: false, wantAtRestReq: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, cs, _ := newFakeStatus(t)
			d.cfg.ObserveCache = tc.cache
			t.Cleanup(d.Close)
			reads := countReads(cs)
			r1 := embeddedRev("r1")
			require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: r1.NamespaceID}))
			require.NoError(t, d.PrepareRevision(ctx, r1))
			p, err := d.planFor(r1)
			require.NoError(t, err)
			if tc.cache {
				watching(t, d, cs, p.gw)
			}
			addPod(t, cs, p.gw, "gateway-r1", p.gatewayPodLabels(), true)
			require.NoError(t, d.ActivateRevision(ctx, r1))
			if tc.cache {
				require.True(t, d.WaitForCaches(ctx))
				// the cache holds what the API server does once its
				// watch delivered the Pod and the Deployment
				require.Eventually(t, func() bool { _, ok := d.readyFromCache(p); return ok }, 5*time.Second, 5*time.Millisecond)
			}
			obs, err := d.ObserveRevision(ctx, r1)
			require.NoError(t, err)
			require.True(t, obs.Ready, obs.Reason)

			before := reads.Load()
			for range 10 {
				obs, err := d.ObserveRevision(ctx, r1)
				require.NoError(t, err)
				require.True(t, obs.Ready, obs.Reason)
			}
			require.Equal(t, tc.wantAtRestReq, reads.Load() > before, "API reads for 10 at-rest observations: %d", reads.Load()-before)
			if !tc.cache {
				return
			}

			// not ready, its container not started (restarting): a start
			// under way, deferred from the cache without a request
			pod, err := cs.CoreV1().Pods(p.gw).Get(ctx, "gateway-r1", metav1.GetOptions{})
			require.NoError(t, err)
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			_, err = cs.CoreV1().Pods(p.gw).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				obs, err := d.ObserveRevision(ctx, r1)
				return err == nil && !obs.Ready && obs.Reason == ReasonPodNotReady
			}, 5*time.Second, 5*time.Millisecond)
			before = reads.Load()
			obs, err = d.ObserveRevision(ctx, r1)
			require.NoError(t, err)
			require.Equal(t, ReasonPodNotReady, obs.Reason)
			require.Equal(t, before, reads.Load(), "a start under way is deferred from the cache")

			// every container running: kubelet may have reported it held,
			// so the API server answers, its Events included
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "gateway",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
			pod, err = cs.CoreV1().Pods(p.gw).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			require.NoError(t, err)
			n := len(cs.Actions())
			require.Eventually(t, func() bool {
				obs, err := d.ObserveRevision(ctx, r1)
				return err == nil && !obs.Ready && obs.Reason == ReasonPodNotReady && listed(cs, n, "events")
			}, 5*time.Second, 5*time.Millisecond, "a started candidate's Events are read")

			// Ready again; then a watch error: distrusted for CacheDistrust
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			_, err = cs.CoreV1().Pods(p.gw).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool { _, ok := d.readyFromCache(p); return ok }, 5*time.Second, 5*time.Millisecond)
			c := d.cacheFor(p.gw)
			c.mu.Lock()
			c.watchErr = time.Now()
			c.mu.Unlock()
			before = reads.Load()
			obs, err = d.ObserveRevision(ctx, r1)
			require.NoError(t, err)
			require.True(t, obs.Ready, obs.Reason)
			require.Greater(t, reads.Load(), before, "after a watch error the API server answers")
			c.mu.Lock()
			c.watchErr = time.Now().Add(-CacheDistrust - time.Second)
			c.mu.Unlock()
			before = reads.Load()
			_, err = d.ObserveRevision(ctx, r1)
			require.NoError(t, err)
			require.Equal(t, before, reads.Load(), "trusted again once the distrust window passed")

			// a successor revision is never confirmed by its predecessor's
			// cached Pod
			r2 := embeddedRev("r2")
			p2, err := d.planFor(r2)
			require.NoError(t, err)
			_, ok := d.readyFromCache(p2)
			require.False(t, ok, "the cache confirms only the revision its Deployment runs")

			// deleting the Namespace stops its caches
			d.forgetNS(r1.NamespaceID)
			d.cacheMu.Lock()
			require.Empty(t, d.caches)
			d.cacheMu.Unlock()
		})
	}
}

// A dedicated Agent at rest: its Harness and pinned Gateway from the
// caches, its node from the Gateway — no API request once a full check
// recorded the node; a node that disconnects sends it back to the full
// check.
func TestObserveCacheDedicated(t *testing.T) {
	ctx := context.Background()
	d, cs, st := newFakeStatus(t)
	d.cfg.ObserveCache = true
	t.Cleanup(d.Close)
	reads := countReads(cs)
	rd := dedicatedRev("d1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rd.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rd))
	p, err := d.planFor(rd)
	require.NoError(t, err)
	watching(t, d, cs, p.gw, p.dp)
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rd))
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rd)) // mints the setup code
	st.enroll("node-1")
	obs, err := d.ObserveRevision(ctx, rd)
	require.NoError(t, err)
	require.Equal(t, ReasonNodeNotPinned, obs.Reason)
	require.NoError(t, d.PrepareRevision(ctx, rd)) // pins the node: the Gateway restarts
	rollGateway(t, cs, p, "gateway-1")
	require.NoError(t, d.ActivateRevision(ctx, rd))
	require.True(t, d.WaitForCaches(ctx))
	require.Eventually(t, func() bool {
		before := reads.Load()
		obs, err := d.ObserveRevision(ctx, rd)
		return err == nil && obs.Ready && reads.Load() == before
	}, 5*time.Second, 5*time.Millisecond, "a dedicated Agent at rest is observed without a request")

	st.disconnect("node-1")
	before := reads.Load()
	obs, err = d.ObserveRevision(ctx, rd)
	require.NoError(t, err)
	require.False(t, obs.Ready)
	require.Equal(t, ReasonNodeNotEnrolled, obs.Reason)
	require.Greater(t, reads.Load(), before, "a disconnected node is the full check's to judge")
}

// A change the caches see reaches NotifyChanges's function, coalesced: a
// burst of Pod updates is told at most once per ChangeCoalesce.
func TestCacheChangesNotify(t *testing.T) {
	ctx := context.Background()
	d, cs, _ := newFakeStatus(t)
	d.cfg.ObserveCache = true
	t.Cleanup(d.Close)
	var told atomic.Int64
	wake := make(chan struct{}, 64)
	d.NotifyChanges(func() { told.Add(1); wake <- struct{}{} })
	r1 := embeddedRev("r1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: r1.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, r1))
	p, err := d.planFor(r1)
	require.NoError(t, err)
	watching(t, d, cs, p.gw) // starts the caches
	drain := func() {
		for {
			select {
			case <-wake:
			case <-time.After(3 * ChangeCoalesce):
				return
			}
		}
	}
	drain() // the initial list's additions
	told.Store(0)

	start := time.Now()
	for i := range 20 {
		addPod(t, cs, p.gw, fmt.Sprintf("gateway-%d", i), p.gatewayPodLabels(), i%2 == 0)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("a Pod added was never told")
	}
	drain()
	n := told.Load()
	require.GreaterOrEqual(t, n, int64(1))
	// at most one notification per ChangeCoalesce since the burst began
	require.LessOrEqual(t, n, int64(time.Since(start)/ChangeCoalesce)+1, "coalesced")
}
