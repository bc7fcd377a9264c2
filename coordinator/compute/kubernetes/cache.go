package kubernetes

import (
	"context"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listersappsv1 "k8s.io/client-go/listers/apps/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersnetworkingv1 "k8s.io/client-go/listers/networking/v1"
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

// nsCache is the watch-fed view of one managed namespace's oce Pods,
// Deployments, Services, ConfigMaps and NetworkPolicies.
type nsCache struct {
	factory  informers.SharedInformerFactory
	pods     cache.SharedIndexInformer
	deploys  cache.SharedIndexInformer
	services cache.SharedIndexInformer
	configs  cache.SharedIndexInformer
	policies cache.SharedIndexInformer
	podL     listerscorev1.PodLister
	depL     listersappsv1.DeploymentLister
	svcL     listerscorev1.ServiceLister
	cmL      listerscorev1.ConfigMapLister
	npL      listersnetworkingv1.NetworkPolicyLister
	stop     chan struct{}

	mu        sync.Mutex
	watchErr  time.Time // the last watch error of any informer
	startedAt time.Time
	// keys memoizes, per Agent, the credential keys its last repaired
	// revision resolved to (repairKeys): an in-sync check from the caches
	// then needs no credential read either.
	keys map[string]revisionKeys
}

// revisionKeys are the credential keys revision resolved to.
type revisionKeys struct {
	revision string
	keys     []string
}

// informers are all of c's informers.
func (c *nsCache) informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{c.pods, c.deploys, c.services, c.configs, c.policies}
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
	// Only what the driver made: its label is on every object it makes.
	client := d.watchClient()
	if !d.cfg.StreamingLists {
		client = listThenWatch{client}
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(cacheListOptions),
		// Readiness and repair read labels, annotations, spec, data and
		// status; the field managers' bookkeeping is the largest part
		// nobody reads. ConfigMap data stays: repair compares it.
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
			case *corev1.Service:
				c := *o
				c.ManagedFields = nil
				return &c, nil
			case *corev1.ConfigMap:
				c := *o
				c.ManagedFields = nil
				return &c, nil
			case *networkingv1.NetworkPolicy:
				c := *o
				c.ManagedFields = nil
				return &c, nil
			}
			return obj, nil
		}))
	c := &nsCache{factory: f, stop: make(chan struct{}), startedAt: time.Now(), keys: map[string]revisionKeys{}}
	c.pods = f.Core().V1().Pods().Informer()
	_ = c.pods.AddIndexers(cache.Indexers{agentIndex: indexByAgent}) // before it starts: cannot fail (podindex.go)
	c.deploys = f.Apps().V1().Deployments().Informer()
	c.services = f.Core().V1().Services().Informer()
	c.configs = f.Core().V1().ConfigMaps().Informer()
	c.policies = f.Networking().V1().NetworkPolicies().Informer()
	c.podL = listerscorev1.NewPodLister(c.pods.GetIndexer())
	c.depL = listersappsv1.NewDeploymentLister(c.deploys.GetIndexer())
	c.svcL = listerscorev1.NewServiceLister(c.services.GetIndexer())
	c.cmL = listerscorev1.NewConfigMapLister(c.configs.GetIndexer())
	c.npL = listersnetworkingv1.NewNetworkPolicyLister(c.policies.GetIndexer())
	for _, inf := range c.informers() {
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			c.mu.Lock()
			c.watchErr = time.Now() // the connection's health: wall time, not the driver's clock
			c.mu.Unlock()
			d.log.Warn("kubernetes cache: watch broken; reading through the API server meanwhile",
				"namespace", ns, "error", err.Error())
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	// Only Pods and Deployments decide readiness: a change of the others
	// (a policy edited) waits for the next repair pass, not a round.
	for _, inf := range []cache.SharedIndexInformer{c.pods, c.deploys} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.objectChanged(obj) },
			UpdateFunc: func(_, obj any) { d.objectChanged(obj) },
			DeleteFunc: func(obj any) { d.objectChanged(obj) },
		})
	}
	f.Start(c.stop)
	d.caches[ns] = c
	return c
}

// WatchTimeoutStretch lengthens the caches' watches: client-go's reflector
// asks for 5–10 minutes, after which it lists nothing but watches again —
// a request per kind and managed namespace, which with 5 kinds in 200
// namespaces is ~1.5 requests/s however quiet the Agents. Stretched, the
// watches last 30–60 minutes (the API server's own range for watches
// without a timeout, --min-request-timeout 1800 s); bookmarks keep their
// resume points current meanwhile.
const WatchTimeoutStretch = 6

// cacheListOptions selects only what the driver made (its label is on
// every object it makes) and stretches watch timeouts.
func cacheListOptions(o *metav1.ListOptions) {
	o.LabelSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()
	if o.TimeoutSeconds != nil { // a watch: lists carry none
		t := *o.TimeoutSeconds * WatchTimeoutStretch
		o.TimeoutSeconds = &t
	}
}

// ChangeCoalesce is the longest a cache change waits before the function
// NotifyChanges set hears of it; changes meanwhile are told once (kubelet
// updates a starting Pod's status several times a second).
const ChangeCoalesce = 200 * time.Millisecond

// NotifyChanges implements compute.ChangeNotifier: fn runs at most
// ChangeCoalesce after any change the caches see, at most once per
// ChangeCoalesce, with the Agents whose Pods or Deployments changed.
func (d *Driver) NotifyChanges(fn func(agentIDs []string)) {
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	d.onChange = fn
}

// objectChanged schedules the change notification for obj's Agent (every
// object the driver makes carries LabelAgent; a deleted object may come as
// its last known state).
func (d *Driver) objectChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	agent := ""
	if m, ok := obj.(metav1.Object); ok {
		agent = m.GetLabels()[LabelAgent]
	}
	d.cacheMu.Lock()
	defer d.cacheMu.Unlock()
	if d.onChange == nil {
		return
	}
	if agent == "" {
		d.changedAny = true
	}
	if d.changed != nil { // a notification waits: it tells this one too
		if agent != "" {
			d.changed[agent] = true
		}
		return
	}
	d.changed = map[string]bool{}
	if agent != "" {
		d.changed[agent] = true
	}
	fn := d.onChange
	time.AfterFunc(ChangeCoalesce, func() {
		d.cacheMu.Lock()
		var ids []string
		if !d.changedAny {
			ids = make([]string, 0, len(d.changed))
			for id := range d.changed {
				ids = append(ids, id)
			}
			sort.Strings(ids)
		}
		d.changed, d.changedAny = nil, false
		d.cacheMu.Unlock()
		fn(ids)
	})
}

// usable reports whether the caches may answer: running (a stopped cache
// keeps its last contents and its synced state), all synced, and no watch
// error within CacheDistrust.
func (c *nsCache) usable(now time.Time) bool {
	if c == nil {
		return false
	}
	select {
	case <-c.stop:
		return false
	default:
	}
	for _, inf := range c.informers() {
		if !inf.HasSynced() {
			return false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watchErr.IsZero() || now.Sub(c.watchErr) > CacheDistrust
}

// dropCache stops and forgets ns's caches (the namespace is being deleted,
// or a follower's Agents no longer run there).
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
		for _, inf := range c.informers() {
			syncs = append(syncs, inf.HasSynced)
		}
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

// usableCache is ns's cache when it may answer now, else nil: the caller
// then reads through the API server.
func (d *Driver) usableCache(ns string) *nsCache {
	if c := d.cacheFor(ns); c.usable(time.Now()) {
		return c
	}
	return nil
}

// absentInCache reports whether obj's namespace has usable caches of its
// kind (Services, ConfigMaps, NetworkPolicies, Deployments) that hold no
// object of its name. The caches hold only oce's objects, so a foreign
// object is "absent" here: its create then fails AlreadyExists and the
// read that follows finds it foreign.
func (d *Driver) absentInCache(obj metav1.Object) bool {
	// Only caches already running: a write never starts one (the first
	// observation of a namespace does).
	d.cacheMu.Lock()
	c := d.caches[obj.GetNamespace()]
	d.cacheMu.Unlock()
	if !c.usable(time.Now()) {
		return false
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	var err error
	switch obj.(type) {
	case *corev1.Service:
		_, err = c.svcL.Services(ns).Get(name)
	case *corev1.ConfigMap:
		_, err = c.cmL.ConfigMaps(ns).Get(name)
	case *networkingv1.NetworkPolicy:
		_, err = c.npL.NetworkPolicies(ns).Get(name)
	case *appsv1.Deployment:
		_, err = c.depL.Deployments(ns).Get(name)
	default:
		return false
	}
	return apierrors.IsNotFound(err)
}

// cached adapts a lister's Get to (object, found).
func cached[T any](obj T, err error) (T, bool) {
	return obj, err == nil
}

// podList renders the cached Pods of ns carrying want as the list a LIST
// with that selector returns.
func (c *nsCache) podList(ns string, want map[string]string) *corev1.PodList {
	pods := podsMatching(c.pods.GetIndexer(), ns, want)
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

// pendingFromCache answers "not ready yet" from the caches alone, for a
// revision whose own workload is still starting: the Agent's Gateway
// Deployment runs this very revision and its candidate Pod is missing, or
// not Ready with a container not yet running — so kubelet can have
// reported no held failure for it (heldFromProbe reads Events only once
// every container runs). Dedicated: the Harness is judged that way first,
// and a Ready Harness with such a Gateway too. It is a deferral only: ok
// is false for everything else (held, failed, staged, multiple or foreign
// Pods, started containers, the workspace node check, unusable caches),
// which the API server answers.
func (d *Driver) pendingFromCache(p *plan) (r Readiness, ok bool) {
	gc := d.usableCache(p.gw)
	if gc == nil {
		return Readiness{}, false
	}
	if p.topo == contract.DedicatedCodex {
		hc := d.usableCache(p.dp)
		if hc == nil {
			return Readiness{}, false
		}
		hr, pending := startingReadiness(hc, p.dp, p.harnessWantLabels())
		if pending {
			hr.Reason = ReasonHarnessNotReady + ":" + hr.Reason
			return hr, true
		}
		if !hr.Ready {
			return Readiness{}, false
		}
	}
	dep, found := gc.deployment(p.gw, p.n.gateway)
	if !found || dep.Labels[LabelRevision] != p.rev.ID || !p.agentOwn.owns(dep.Labels, dep.Annotations, true) {
		return Readiness{}, false
	}
	return startingReadiness(gc, p.gw, p.gatewayWantLabels())
}

// startingReadiness applies ProviderHarnessReady to the cached Pods of ns
// carrying want; pending is true when the verdict is a start still under
// way (no candidate, or a candidate not Ready whose containers have not
// all started).
func startingReadiness(c *nsCache, ns string, want map[string]string) (r Readiness, pending bool) {
	r = ProviderHarnessReady(c.podList(ns, want), ns, want)
	switch r.Reason {
	case ReasonNoCandidate:
		return r, true
	case ReasonPodNotReady:
		pod, err := c.podL.Pods(ns).Get(r.Pod)
		if err != nil {
			return r, false
		}
		_, started := containersStarted(pod)
		return r, !started
	}
	return r, false
}

// preparedFromCache is stillPrepared's positive answer from the caches:
// ok only when they show the revision's workloads as prepared (the
// Agent's Gateway Deployment and, dedicated, a running predecessor
// Gateway healthy and the Harness). A negative answer is the API
// server's: it triggers preparation's writes.
func (d *Driver) preparedFromCache(p *plan) bool {
	gc := d.usableCache(p.gw)
	if gc == nil {
		return false
	}
	gw, found := gc.deployment(p.gw, p.n.gateway)
	if !found || !p.agentOwn.owns(gw.Labels, gw.Annotations, true) || gw.DeletionTimestamp != nil {
		return false
	}
	if p.topo == contract.Embedded {
		return true
	}
	if gw.Labels[LabelRevision] != p.rev.ID && !deploymentHealthy(gw) {
		return false
	}
	hc := d.usableCache(p.dp)
	if hc == nil {
		return false
	}
	h, found := hc.deployment(p.dp, p.n.harness)
	return found && p.own.owns(h.Labels, h.Annotations, false) && h.DeletionTimestamp == nil
}
