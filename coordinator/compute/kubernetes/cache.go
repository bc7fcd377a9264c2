package kubernetes

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listersappsv1 "k8s.io/client-go/listers/apps/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"oce.dev/oce/shared/contract"
)

// Why caches (issue 27): the health watcher observes every active Agent
// every few seconds; read through the API server, that is two requests per
// Agent per pass, which at hundreds of Agents saturates any sane client
// rate limit and starves deploys. The driver instead keeps, per managed
// namespace it observes, watch-fed caches of oce's Pods and Deployments, and
// answers the at-rest question — "is this revision's own workload Ready?" —
// from them without a request. Everything else (a revision not yet ready,
// staged, held, probed, a cache not synced or whose watch just broke) is
// read from the API server as before: a cache can only ever confirm what a
// direct read moments earlier would have said, never invent a verdict.

// CacheDistrust is how long after a watch error a namespace's caches are
// not trusted: the reflector relists and rewatches meanwhile, and a cache
// whose watch is broken may be arbitrarily stale.
const CacheDistrust = 30 * time.Second

// nsCache is the watch-fed view of one managed namespace's oce Pods and
// Deployments.
type nsCache struct {
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	deploys cache.SharedIndexInformer
	podL    listerscorev1.PodLister
	depL    listersappsv1.DeploymentLister
	stop    chan struct{}

	mu        sync.Mutex
	watchErr  time.Time // the last watch error of either informer
	startedAt time.Time
}

// cacheFor returns ns's caches, starting them on first use. Nil when the
// driver observes without caches (Config.ObserveCache off).
func (d *Driver) cacheFor(ns string) *nsCache {
	if !d.cfg.ObserveCache {
		return nil
	}
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	if c, ok := d.caches[ns]; ok {
		return c
	}
	// Only what the driver made: its label is on every Pod and Deployment.
	f := informers.NewSharedInformerFactoryWithOptions(d.watchClient(), 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()
		}),
		// Readiness reads labels, annotations, spec and status; the field
		// managers' bookkeeping is the largest part nobody reads.
		// A shallow copy: the object may be shared with its decoder.
		informers.WithTransform(func(obj any) (any, error) {
			switch o := obj.(type) {
			case *corev1.Pod:
				c := *o
				c.ManagedFields = nil
				return &c, nil
			case *appsv1.Deployment:
				c := *o
				c.ManagedFields = nil
				return &c, nil
			}
			return obj, nil
		}))
	c := &nsCache{factory: f, stop: make(chan struct{}), startedAt: time.Now()}
	c.pods = f.Core().V1().Pods().Informer()
	c.deploys = f.Apps().V1().Deployments().Informer()
	c.podL = listerscorev1.NewPodLister(c.pods.GetIndexer())
	c.depL = listersappsv1.NewDeploymentLister(c.deploys.GetIndexer())
	for _, inf := range []cache.SharedIndexInformer{c.pods, c.deploys} {
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			c.mu.Lock()
			c.watchErr = time.Now() // the connection's health: wall time, not the driver's clock
			c.mu.Unlock()
			d.log.Warn("kubernetes cache: watch broken; reading through the API server meanwhile",
				"namespace", ns, "error", err.Error())
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	for _, inf := range []cache.SharedIndexInformer{c.pods, c.deploys} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { d.changed() },
			UpdateFunc: func(any, any) { d.changed() },
			DeleteFunc: func(any) { d.changed() },
		})
	}
	f.Start(c.stop)
	d.caches[ns] = c
	return c
}

// ChangeCoalesce is the longest a cache change waits before the function
// NotifyChanges set hears of it; changes meanwhile are told once (kubelet
// updates a starting Pod's status several times a second).
const ChangeCoalesce = 200 * time.Millisecond

// NotifyChanges implements compute.ChangeNotifier: fn runs at most
// ChangeCoalesce after any change the caches see, at most once per
// ChangeCoalesce.
func (d *Driver) NotifyChanges(fn func()) {
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	d.onChange = fn
}

// changed schedules the change notification unless one is pending.
func (d *Driver) changed() {
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	if d.onChange == nil || d.changePending {
		return
	}
	d.changePending = true
	fn := d.onChange
	time.AfterFunc(ChangeCoalesce, func() {
		d.cacheMu.Lock()
		d.changePending = false
		d.cacheMu.Unlock()
		fn()
	})
}

// usable reports whether the caches may answer: synced, and no watch error
// within CacheDistrust.
func (c *nsCache) usable(now time.Time) bool {
	if c == nil || !c.pods.HasSynced() || !c.deploys.HasSynced() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watchErr.IsZero() || now.Sub(c.watchErr) > CacheDistrust
}

// dropCache stops and forgets ns's caches (the namespace is being deleted).
func (d *Driver) dropCache(ns string) {
	d.cacheMu.Lock()
	c, ok := d.caches[ns]
	delete(d.caches, ns)
	d.cacheMu.Unlock()
	if ok {
		close(c.stop)
		c.factory.Shutdown()
	}
}

// Close stops every cache the driver started.
func (d *Driver) Close() {
	d.cacheMu.Lock()
	names := make([]string, 0, len(d.caches))
	for ns := range d.caches {
		names = append(names, ns)
	}
	d.cacheMu.Unlock()
	for _, ns := range names {
		d.dropCache(ns)
	}
}

// WaitForCaches blocks until the caches of every namespace the driver
// observed so far are synced, or ctx ends (tests and benchmarks: a
// deterministic point after which at-rest observations need no request).
func (d *Driver) WaitForCaches(ctx context.Context) bool {
	d.cacheMu.Lock()
	var syncs []cache.InformerSynced
	for _, c := range d.caches {
		syncs = append(syncs, c.pods.HasSynced, c.deploys.HasSynced)
	}
	d.cacheMu.Unlock()
	return cache.WaitForCacheSync(ctx.Done(), syncs...)
}

// cachedDeployment is the cached Deployment ns/name; found false when the
// cache does not hold it.
func (c *nsCache) deployment(ns, name string) (*appsv1.Deployment, bool) {
	dep, err := c.depL.Deployments(ns).Get(name)
	if err != nil {
		return nil, false
	}
	return dep, true
}

// podList renders the cached Pods of ns carrying want as the list a LIST
// with that selector returns.
func (c *nsCache) podList(ns string, want map[string]string) *corev1.PodList {
	pods, _ := c.podL.Pods(ns).List(labels.SelectorFromSet(want))
	l := &corev1.PodList{Items: make([]corev1.Pod, 0, len(pods))}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	return l
}

// readyFromCache answers "is this revision's own workload Ready?" from the
// caches alone: ok only for a positive verdict the caches fully support
// (the Agent's Gateway Deployment runs this very revision and its single
// candidate Pod is Ready; for dedicated, the Harness too, and the serving
// Gateway's Pod for the node check that follows). Anything else — not
// ready, staged, held, a probe, a foreign object, unsynced caches — is for
// the API server to answer.
func (d *Driver) readyFromCache(p *plan) (ep Endpoint, ok bool) {
	gc := d.cacheFor(p.gw)
	now := time.Now()
	if !gc.usable(now) {
		return Endpoint{}, false
	}
	dep, found := gc.deployment(p.gw, p.n.gateway)
	if !found || dep.Labels[LabelRevision] != p.rev.ID || !p.agentOwn.owns(dep.Labels, dep.Annotations, true) {
		return Endpoint{}, false
	}
	want := p.gatewayWantLabels()
	r := ProviderHarnessReady(gc.podList(p.gw, want), p.gw, want)
	if !r.Ready {
		return Endpoint{}, false
	}
	pod, err := gc.podL.Pods(p.gw).Get(r.Pod)
	if err != nil {
		return Endpoint{}, false
	}
	ep = Endpoint{Namespace: p.gw, Service: p.n.gateway, RevisionID: p.rev.ID, Pod: pod.Name,
		PodIP: pod.Status.PodIP, TokenSecret: p.n.password, NodeID: podEnv(pod.Spec, contract.EnvWorkspaceNodeID)}
	if p.topo != contract.DedicatedCodex {
		return ep, true
	}
	hc := d.cacheFor(p.dp)
	if !hc.usable(now) {
		return Endpoint{}, false
	}
	if hr := ProviderHarnessReady(hc.podList(p.dp, p.harPodSel), p.dp, p.harPodSel); !hr.Ready {
		return Endpoint{}, false
	}
	return ep, true
}
