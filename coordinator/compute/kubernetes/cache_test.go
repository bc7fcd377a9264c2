package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// real API server resumes from the list's version). Sentinels of every
// cached kind, made until the cache sees one of each, prove the watches
// run; they are deleted again, and seen gone.
func watching(t testing.TB, d *Driver, cs *fake.Clientset, nss ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range nss {
		c := d.cacheFor(ns)
		require.NotNil(t, c)
		require.True(t, d.WaitForCaches(ctx))
		lbl := map[string]string{LabelManagedBy: ManagedBy, LabelAgent: "sentinel"}
		om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl} }
		kinds := []struct {
			inf     cache.SharedIndexInformer
			create  func(name string) error
			destroy func(name string) error
		}{
			{c.pods, func(n string) error {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: om(n)}, metav1.CreateOptions{})
				return err
			}, func(n string) error { return cs.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{}) }},
			{c.deploys, func(n string) error {
				_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: om(n)}, metav1.CreateOptions{})
				return err
			}, func(n string) error { return cs.AppsV1().Deployments(ns).Delete(ctx, n, metav1.DeleteOptions{}) }},
			{c.services, func(n string) error {
				_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: om(n)}, metav1.CreateOptions{})
				return err
			}, func(n string) error { return cs.CoreV1().Services(ns).Delete(ctx, n, metav1.DeleteOptions{}) }},
			{c.configs, func(n string) error {
				_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: om(n)}, metav1.CreateOptions{})
				return err
			}, func(n string) error { return cs.CoreV1().ConfigMaps(ns).Delete(ctx, n, metav1.DeleteOptions{}) }},
			{c.policies, func(n string) error {
				_, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: om(n)}, metav1.CreateOptions{})
				return err
			}, func(n string) error {
				return cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, n, metav1.DeleteOptions{})
			}},
		}
		arrived := make(chan int, 1024) // the index of the kind whose cache added a sentinel
		for i, k := range kinds {
			_, err := k.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
				if m, ok := obj.(metav1.Object); ok && m.GetLabels()[LabelAgent] == "sentinel" {
					arrived <- i
				}
			}})
			require.NoError(t, err)
		}
		var names []string
		seen := make([]bool, len(kinds))
		all := func() bool {
			for _, s := range seen {
				if !s {
					return false
				}
			}
			return true
		}
		for i := 0; !all(); i++ {
			require.Less(t, i, 50, "the caches of %s never saw a sentinel", ns)
			name := fmt.Sprintf("sentinel-%d", i)
			for _, k := range kinds {
				require.NoError(t, k.create(name))
			}
			names = append(names, name)
			// a sentinel made in a watch's blind moment never arrives: the
			// next one, after this wait, will
			timeout := time.After(200 * time.Millisecond)
		wait:
			for !all() {
				select {
				case k := <-arrived:
					seen[k] = true
				case <-timeout:
					break wait
				}
			}
		}
		for _, name := range names {
			for _, k := range kinds {
				require.NoError(t, k.destroy(name))
			}
		}
		require.Eventually(t, func() bool {
			for _, k := range kinds {
				for _, o := range k.inf.GetStore().List() {
					if m, ok := o.(metav1.Object); ok && m.GetLabels()[LabelAgent] == "sentinel" {
						return false
					}
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond, "the sentinels gone from the caches of %s", ns)
	}
}

// cachesHold returns once the caches of nss hold exactly what the fake API
// server does (every cached kind, by resource version): no event is still
// on its way.
func cachesHold(t *testing.T, d *Driver, cs *fake.Clientset, nss ...string) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy}
	versions := func(objs []metav1.Object) map[string]string {
		m := map[string]string{}
		for _, o := range objs {
			m[o.GetName()] = o.GetResourceVersion()
		}
		return m
	}
	stored := func(inf cache.SharedIndexInformer) map[string]string {
		var objs []metav1.Object
		for _, o := range inf.GetStore().List() {
			objs = append(objs, o.(metav1.Object))
		}
		return versions(objs)
	}
	require.Eventually(t, func() bool {
		for _, ns := range nss {
			c := d.cacheFor(ns)
			pods, err1 := cs.CoreV1().Pods(ns).List(ctx, sel)
			deps, err2 := cs.AppsV1().Deployments(ns).List(ctx, sel)
			svcs, err3 := cs.CoreV1().Services(ns).List(ctx, sel)
			cms, err4 := cs.CoreV1().ConfigMaps(ns).List(ctx, sel)
			nps, err5 := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
			if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
				return false
			}
			live := [][]metav1.Object{{}, {}, {}, {}, {}}
			for i := range pods.Items {
				live[0] = append(live[0], &pods.Items[i])
			}
			for i := range deps.Items {
				live[1] = append(live[1], &deps.Items[i])
			}
			for i := range svcs.Items {
				live[2] = append(live[2], &svcs.Items[i])
			}
			for i := range cms.Items {
				live[3] = append(live[3], &cms.Items[i])
			}
			for i := range nps.Items {
				live[4] = append(live[4], &nps.Items[i])
			}
			for i, inf := range c.informers() {
				if !maps.Equal(versions(live[i]), stored(inf)) {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the caches hold what the API server does")
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
	d, cs, st := newCachedFake(t)
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
	cachesHold(t, d, cs, p.gw, p.dp)
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
// burst of Pod updates is told at most once per ChangeCoalesce, naming the
// Agent whose Pods changed.
func TestCacheChangesNotify(t *testing.T) {
	ctx := context.Background()
	d, cs, _ := newCachedFake(t)
	var told atomic.Int64
	wake := make(chan struct{}, 64)
	var mu sync.Mutex
	agents := map[string]int{}
	d.NotifyChanges(func(ids []string) {
		mu.Lock()
		for _, id := range ids {
			agents[id]++
		}
		if ids == nil {
			agents["<any>"]++
		}
		mu.Unlock()
		told.Add(1)
		wake <- struct{}{}
	})
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
	mu.Lock()
	clear(agents)
	mu.Unlock()

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
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{r1.AgentID: int(n)}, agents, "each notice names the Agent, and only it")
}

// An activation under way is answered from the caches: no candidate yet,
// or one not Ready whose containers have not started, is a deferral
// without a request, and so is the "still prepared" check; a stale
// negative and unusable caches go to the API server.
func TestPendingFromCache(t *testing.T) {
	ctx := context.Background()
	d, cs, _ := newCachedFake(t)
	reads := countReads(cs)
	r1, r2 := embeddedRev("r1"), embeddedRev("r2")
	p, err := d.planFor(r2)
	require.NoError(t, err)
	watching(t, d, cs, p.gw, p.dp)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: r1.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, r1))
	p1, err := d.planFor(r1)
	require.NoError(t, err)
	addPod(t, cs, p.gw, "gateway-r1", p1.gatewayWantLabels(), true)
	require.NoError(t, d.ActivateRevision(ctx, r1))
	require.NoError(t, d.PrepareRevision(ctx, r2))
	require.NoError(t, d.ActivateRevision(ctx, r2)) // the Gateway now runs r2; no Pod of it yet
	c := d.cacheFor(p.gw)
	require.Eventually(t, func() bool {
		dep, ok := c.deployment(p.gw, p.n.gateway)
		return ok && dep.Labels[LabelRevision] == "r2"
	}, 5*time.Second, 5*time.Millisecond)

	observe := func(reason string) {
		t.Helper()
		obs, err := d.ObserveRevision(ctx, r2)
		require.NoError(t, err)
		require.False(t, obs.Ready)
		require.Equal(t, reason, obs.Reason)
		require.Empty(t, obs.HeldCode)
	}
	before := reads.Load()
	observe(ReasonNoCandidate)
	require.NoError(t, d.PrepareRevision(ctx, r2)) // still prepared: from the cache
	require.Equal(t, before, reads.Load(), "no candidate yet, still prepared: no request")

	// a stale cache missing the Deployment: the API server says prepared
	dep, ok := c.deployment(p.gw, p.n.gateway)
	require.True(t, ok)
	require.NoError(t, c.deploys.GetIndexer().Delete(dep))
	n := len(cs.Actions())
	require.NoError(t, d.PrepareRevision(ctx, r2))
	require.True(t, did(cs, n, "get", "deployments"), "a negative answer is the API server's")
	require.Empty(t, writes(cs, n), "and it found the revision prepared")
	require.NoError(t, c.deploys.GetIndexer().Add(dep))

	// its Pod created, not Ready, no container running yet
	addPod(t, cs, p.gw, "gateway-r2", p.gatewayWantLabels(), false)
	require.Eventually(t, func() bool {
		obs, err := d.ObserveRevision(ctx, r2)
		return err == nil && obs.Reason == ReasonPodNotReady
	}, 5*time.Second, 5*time.Millisecond)
	before = reads.Load()
	observe(ReasonPodNotReady)
	require.Equal(t, before, reads.Load(), "a Pod starting: no request")

	// unusable caches: the API server answers the same
	c.mu.Lock()
	c.watchErr = time.Now()
	c.mu.Unlock()
	before = reads.Load()
	observe(ReasonPodNotReady)
	require.Greater(t, reads.Load(), before, "after a watch error the API server answers")
}

// The caches' lists select the driver's objects; their watches last
// WatchTimeoutStretch times what the reflector asks (re-watches are
// requests at rest).
func TestCacheListOptions(t *testing.T) {
	five := int64(300)
	for name, tc := range map[string]struct {
		in      metav1.ListOptions
		timeout *int64
	}{
		"list":  {in: metav1.ListOptions{ResourceVersion: "0"}},
		"watch": {in: metav1.ListOptions{ResourceVersion: "7", TimeoutSeconds: &five}, timeout: ptr(int64(300 * WatchTimeoutStretch))},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.in
			cacheListOptions(&o)
			require.Equal(t, LabelManagedBy+"="+ManagedBy, o.LabelSelector)
			require.Equal(t, tc.timeout, o.TimeoutSeconds)
			require.Equal(t, int64(300), five, "the reflector's value is not written through")
		})
	}
}

// BenchmarkObserveFromCache is one resync observation of an embedded Agent at
// rest, answered from the caches (10,000 Agents ÷ the 30 s resync: ~330 a
// second at rest).
func BenchmarkObserveFromCache(b *testing.B) {
	ctx := context.Background()
	d, cs := firstAgentPrepared(b, true)
	r1 := embeddedRev("r1")
	p, err := d.planFor(r1)
	require.NoError(b, err)
	addPod(b, cs, p.gw, "gateway-r1", p.gatewayPodLabels(), true)
	require.NoError(b, d.ActivateRevision(ctx, r1))
	require.Eventually(b, func() bool { _, ok := d.readyFromCache(p); return ok }, 5*time.Second, 5*time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		obs, err := d.ObserveRevision(ctx, r1)
		if err != nil || !obs.Ready || !obs.Watched {
			b.Fatalf("not a watched ready verdict: %+v %v", obs, err)
		}
	}
}
