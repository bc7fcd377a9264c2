package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// PrepareRevision implements compute.Driver. It creates, in order, the
// Agent's ServiceAccounts, Secrets, claims (never waited on for Bound) and
// dedicated Services (inactive selector), the revision's ConfigMaps, model
// Secret, policies and Harness, then the Gateway — alongside the Agent's
// Gateway Service (inactive selector), which no Pod waits for: for embedded
// only when the Agent has none yet (otherwise the replacement is staged and
// activation switches it); for dedicated once the candidate Harness Pod
// runs, keeping a healthy predecessor Gateway and replacing an unhealthy one.
func (d *Driver) PrepareRevision(ctx context.Context, rev state.Revision) error {
	p, err := d.planFor(rev)
	if err != nil {
		return err
	}
	if d.preparedLevel(rev.ID) == levelComplete {
		// Engine passes repeat preparation on every readiness poll: once
		// everything exists, only check that the workloads are still there.
		ok, err := d.stillPrepared(ctx, p)
		if err != nil {
			return err
		}
		if ok {
			if p.topo == contract.DedicatedCodex {
				return d.ensureEnrollment(ctx, p)
			}
			return nil
		}
	}
	// The namespaces' checks and the credential's resolution are reads of
	// their own: one wave. Nothing is written before both pass.
	var creds map[string][]byte
	var keys []string
	checks := []func() error{
		func() error { return d.requireNamespace(ctx, rev.NamespaceID, false) },
		func() (err error) { creds, keys, err = d.credentials(ctx, rev); return err },
	}
	if p.topo == contract.DedicatedCodex {
		checks = append(checks, func() error { return d.requireNamespace(ctx, rev.NamespaceID, true) })
	}
	if err := wave(checks...); err != nil {
		return err
	}
	if d.preparedLevel(rev.ID) < levelObjects {
		routed := d.gatewayServiceFirst()
		if err := d.prepareObjects(ctx, p, creds, keys, routed); err != nil {
			return err
		}
		level := levelObjects
		if routed {
			level = levelRouted
		}
		d.setPrepared(rev.ID, level)
	}
	done, err := d.prepareRoutedGateway(ctx, p, keys)
	if err != nil || !done {
		return err
	}
	d.setPrepared(rev.ID, levelComplete)
	if p.topo == contract.DedicatedCodex {
		return d.ensureEnrollment(ctx, p)
	}
	return nil
}

// Preparation levels a revision reaches (kept in memory only: a new
// process re-checks everything once).
const (
	levelObjects  = 1 // identity, Secrets, claims, ConfigMaps, policies, Harness and its Services
	levelRouted   = 2 // and the Agent's Gateway Service
	levelComplete = 3 // and the Gateway needs no further step
)

func (d *Driver) setPrepared(revID string, level int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if level == 0 {
		delete(d.prepared, revID)
		delete(d.nodeSeen, revID)
	} else {
		d.prepared[revID] = level
	}
}

func (d *Driver) preparedLevel(revID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prepared[revID]
}

// stillPrepared reports whether the revision's workloads still exist as
// prepared (the Gateway Deployment of the Agent, and the Harness).
func (d *Driver) stillPrepared(ctx context.Context, p *plan) (bool, error) {
	if d.preparedFromCache(p) {
		return true, nil // a readiness pass of an activation: no request
	}
	gw, err := d.c.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, transient(err)
	}
	if !p.agentOwn.owns(gw.Labels, gw.Annotations, true) {
		return false, foreign(p.gw, p.n.gateway)
	}
	if gw.DeletionTimestamp != nil {
		return false, nil
	}
	if p.topo == contract.Embedded {
		return true, nil
	}
	if gw.Labels[LabelRevision] != p.rev.ID && !deploymentHealthy(gw) {
		return false, nil // the kept predecessor Gateway failed: repair
	}
	h, err := d.c.AppsV1().Deployments(p.dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, transient(err)
	}
	return p.own.owns(h.Labels, h.Annotations, false) && h.DeletionTimestamp == nil, nil
}

func deploymentHealthy(dep *appsv1.Deployment) bool {
	return dep.DeletionTimestamp == nil && dep.Status.ObservedGeneration >= dep.Generation && dep.Status.ReadyReplicas > 0
}

// modelKeys are the only Secret keys a model credential may use; each is
// projected as a file. contract.SecretCodexWorkspaceID may come with them
// (chatgpt_service_account): it is rendered as an environment variable.
var modelKeys = map[string]bool{contract.SecretModelAPIKey: true, contract.SecretOpenAIAPIKey: true, contract.SecretCodexAccessToken: true, "anthropic-api-key": true}

// credentials resolves the revision's binding; keys are the file keys to
// project (sorted), data also holds contract.SecretCodexWorkspaceID when the login needs it.
func (d *Driver) credentials(ctx context.Context, rev state.Revision) (map[string][]byte, []string, error) {
	if d.cfg.Credentials == nil {
		return nil, nil, nil
	}
	data, err := d.cfg.Credentials.Resolve(ctx, rev)
	if err != nil {
		return nil, nil, compute.Transient(codes.HarnessAuthRequired, fmt.Errorf("resolve harness auth: %w", err))
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		if k == contract.SecretCodexWorkspaceID {
			continue
		}
		if !modelKeys[k] {
			return nil, nil, compute.Permanent(codes.HarnessAuthRequired, fmt.Errorf("%w: credential key %q", ErrUnsupported, k))
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if loginMode(rev) == contract.LoginServiceAccount && len(data[contract.SecretCodexWorkspaceID]) == 0 {
		return nil, nil, compute.Permanent(codes.HarnessAuthRequired,
			fmt.Errorf("%w: %s needs the ChatGPT workspace id (credential key %s)", ErrUnsupported, contract.LoginServiceAccount, contract.SecretCodexWorkspaceID))
	}
	if _, ok := data[contract.SecretCodexWorkspaceID]; ok && loginMode(rev) != contract.LoginServiceAccount {
		return nil, nil, compute.Permanent(codes.HarnessAuthRequired, fmt.Errorf("%w: credential key %q outside %s", ErrUnsupported, contract.SecretCodexWorkspaceID, contract.LoginServiceAccount))
	}
	return data, keys, nil
}

// loginMode is the revision's Codex login mode (api_key when unbound).
func loginMode(rev state.Revision) string {
	if a := rev.HarnessAuth; a != nil && a.Method != "" {
		return a.Method
	}
	return contract.LoginAPIKey
}

// prepareObjects creates everything but the Gateway Deployment and, unless
// withService, the Agent's Gateway Service.
func (d *Driver) prepareObjects(ctx context.Context, p *plan, creds map[string][]byte, keys []string, withService bool) error {
	core := d.c.CoreV1()
	ao, ro := p.agentOwn, p.own
	gwConfig, err := gatewayConfigMap(p)
	if err != nil {
		return err
	}
	// Agent-owned identity, credentials, storage and routes; revision-owned
	// configuration, model credential and policies (the Gateway gets the
	// admitted document compiled for a custom endpoint, the Harness its
	// native document as admitted). None reads another, so they are
	// created in one wave (wave.go); the policies are among them, so no
	// workload starts before its policies exist.
	//
	// Kinds no cache holds are read before they are created, unless the
	// object is most likely new: the Agent's when the synced cache holds
	// no Gateway of it (a new Agent), the revision's on its first
	// preparation in this process. A wrong guess costs an AlreadyExists
	// and then the read and owner check; a right one, a round trip.
	newAgent := d.gatewayAbsent(p)
	steps := []func() error{
		func() error {
			return ensureKnownStep(ctx, core.ServiceAccounts(p.gw), serviceAccount(p.n.gateway, p.gw, ao), ao, newAgent)
		},
		func() error {
			return ensureKnownStep(ctx, core.Secrets(p.gw), secret(p.n.password, p.gw, ao,
				map[string][]byte{contract.SecretGatewayPassword: randomToken(), contract.SecretStatusToken: randomToken()}), ao, newAgent)
		},
		func() error {
			return ensureKnownStep(ctx, core.PersistentVolumeClaims(p.gw), claim(p.n.gatewayState, p.gw, ao, GatewayStateClaimSize, d.cfg.StorageClass), ao, newAgent)
		},
		func() error { return ensureCachedStep(ctx, d, core.ConfigMaps(p.gw), gwConfig, ro) },
	}
	if withService {
		steps = append(steps, func() error { return d.ensureGatewayService(ctx, p) })
	}
	if len(keys) > 0 {
		steps = append(steps, func() error {
			return ensureKnownStep(ctx, core.Secrets(p.dp), secret(p.n.harnessSecrets, p.dp, ro, creds), ro, true) // new with its revision
		})
	}
	for _, np := range d.revisionPolicies(p) {
		steps = append(steps, func() error {
			return ensureCachedStep(ctx, d, d.c.NetworkingV1().NetworkPolicies(np.Namespace), np, ro)
		})
	}
	if p.topo == contract.DedicatedCodex {
		steps = append(steps,
			func() error {
				return ensureKnownStep(ctx, core.ServiceAccounts(p.dp), serviceAccount(p.n.agent, p.dp, ao), ao, newAgent)
			},
			func() error {
				return ensureKnownStep(ctx, core.PersistentVolumeClaims(p.dp), claim(p.n.workspace, p.dp, ao, WorkspaceClaimSize, d.cfg.StorageClass), ao, newAgent)
			},
			func() error {
				// The transport Secret exists once per physical namespace
				// with the same values: the two sides share no Secret
				// reference, so the Harness side copies the Gateway side.
				gwT, err := ensureKnown(ctx, core.Secrets(p.gw), secret(p.n.transport, p.gw, ao,
					map[string][]byte{contract.SecretAppServerToken: randomToken(), contract.SecretPluginStatusKey: randomToken()}), ao, newAgent)
				if err != nil {
					return err
				}
				return ensureKnownStep(ctx, core.Secrets(p.dp), secret(p.n.transport, p.dp, ao, gwT.Data), ao, newAgent)
			},
			func() error { return ensureCachedStep(ctx, d, core.Services(p.dp), harnessService(p, false), ao) },
			func() error { return ensureCachedStep(ctx, d, core.Services(p.gw), nodeRouteService(p), ao) },
			func() error { return ensureCachedStep(ctx, d, core.ConfigMaps(p.dp), harnessConfigMap(p), ro) },
			func() error { return ensureCachedStep(ctx, d, core.Services(p.dp), harnessRevisionService(p), ro) },
		)
	}
	run := wave
	if d.oneByOne.Load() {
		run = oneAfterAnother
	}
	if err := run(steps...); err != nil {
		return err
	}
	if p.topo == contract.DedicatedCodex {
		// The one-use enrollment Secret: the node's identity when the
		// Agent has no node yet (so the Gateway starts pinned); the setup
		// code is minted once the Gateway serving the bootstrap is ready.
		if err := d.provisionNode(ctx, p); err != nil {
			return err
		}
		return ensureCachedStep(ctx, d, d.c.AppsV1().Deployments(p.dp), d.harnessDeployment(p, keys), ro)
	}
	return nil
}

// prepareRoutedGateway is prepareGateway with, until the revision is routed,
// the Agent's Gateway Service created at the same time: no Pod needs a
// Service, and a Service create is the API server's slowest write (its
// ClusterIP is allocated behind one lock, docs/PERFORMANCE.md), so it is
// kept off the way to the Gateway Pod. The revision is not prepared while
// the Service is missing: its activation routes through it.
func (d *Driver) prepareRoutedGateway(ctx context.Context, p *plan, keys []string) (bool, error) {
	if d.preparedLevel(p.rev.ID) >= levelRouted {
		return d.prepareGateway(ctx, p, keys)
	}
	var done bool
	var routeErr error
	err := wave(
		func() error { routeErr = d.ensureGatewayService(ctx, p); return routeErr },
		func() (err error) { done, err = d.prepareGateway(ctx, p, keys); return err },
	)
	if routeErr == nil {
		d.setPrepared(p.rev.ID, levelRouted)
	}
	return done && err == nil, err
}

// ensureGatewayService ensures the Agent's Gateway Service, its selector
// inactive until activation routes it.
func (d *Driver) ensureGatewayService(ctx context.Context, p *plan) error {
	return ensureCachedStep(ctx, d, d.c.CoreV1().Services(p.gw), gatewayService(p, false), p.agentOwn)
}

// gatewayAbsent reports whether the Agent's synced Gateway cache holds no
// Gateway Deployment of it: a new Agent, most likely.
func (d *Driver) gatewayAbsent(p *plan) bool {
	return d.absentInCache(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: p.n.gateway, Namespace: p.gw}})
}

// ensureKnownStep is ensureKnown for a step that needs only its error.
func ensureKnownStep[T metav1.Object](ctx context.Context, c getCreator[T], obj T, o owner, absent bool) error {
	_, err := ensureKnown(ctx, c, obj, o, absent)
	return err
}

// ensureCachedStep is ensureCached for a step that needs only its error.
func ensureCachedStep[T metav1.Object](ctx context.Context, d *Driver, c getCreator[T], obj T, o owner) error {
	_, err := ensureCached(ctx, d, c, obj, o)
	return err
}

// prepareGateway reports done once the Gateway needs no further step.
func (d *Driver) prepareGateway(ctx context.Context, p *plan, keys []string) (bool, error) {
	deps := d.c.AppsV1().Deployments(p.gw)
	if p.topo == contract.Embedded && d.gatewayAbsent(p) {
		// A new Agent's Gateway: what the synced cache lacks is created
		// without a read first (one round trip less before the Pod); were
		// the cache stale, AlreadyExists leads to the read below.
		dep := d.gatewayDeployment(p, keys, "", "")
		stamp(dep)
		_, err := deps.Create(ctx, dep, metav1.CreateOptions{})
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, transient(err)
		}
	}
	cur, err := deps.Get(ctx, p.n.gateway, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, transient(err)
	}
	if err == nil && !p.agentOwn.owns(cur.Labels, cur.Annotations, true) {
		return false, foreign(p.gw, p.n.gateway)
	}
	exists := err == nil
	if exists && cur.DeletionTimestamp != nil {
		return false, nil // a stopped Gateway is still going away
	}
	if exists && cur.Labels[LabelRevision] == p.rev.ID {
		return true, nil
	}
	if p.topo == contract.Embedded {
		if exists {
			// staged: activation switches the shared Gateway (Recreate); the
			// model probe runs before that, in a probe Pod
			return true, d.ensureProbe(ctx, p, keys)
		}
		_, err := ensureKnown(ctx, deps, d.gatewayDeployment(p, keys, "", ""), p.own, true) // read NotFound above
		return err == nil, err
	}
	// Dedicated: the candidate Gateway starts only once its Harness runs.
	running, err := d.harnessRunning(ctx, p)
	if err != nil || !running {
		return false, err
	}
	if !exists {
		node, err := d.workspaceNode(ctx, p)
		if err != nil {
			return false, err
		}
		public, err := d.nodeRouteURL(ctx, p)
		if err != nil {
			return false, err
		}
		_, err = ensureKnown(ctx, deps, d.gatewayDeployment(p, keys, node, public), p.own, true) // read NotFound above
		return err == nil, err
	}
	if deploymentHealthy(cur) {
		return true, nil // a healthy predecessor Gateway stays while the Harness enrolls
	}
	err = d.switchGateway(ctx, cur, p, keys)
	return err == nil, err
}

// harnessRunning reports whether the candidate Harness has a live Pod whose
// containers run (it is "otherwise ready": enrollment needs a Gateway).
func (d *Driver) harnessRunning(ctx context.Context, p *plan) (bool, error) {
	l, err := d.c.CoreV1().Pods(p.dp).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(p.harnessWantLabels()).String()})
	if err != nil {
		return false, transient(err)
	}
	for _, pod := range l.Items {
		if pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
			return true, nil
		}
	}
	return false, nil
}

// getCreator is the part of a typed client-go resource client ensure uses.
type getCreator[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// ensure creates obj unless an object of its name exists; an existing one
// must carry exactly obj's owner, or the call fails closed with
// FOREIGN_WORKLOAD. It returns the stored object.
func ensure[T metav1.Object](ctx context.Context, c getCreator[T], obj T, o owner) (T, error) {
	return ensureKnown(ctx, c, obj, o, false)
}

// ensureCached is ensure for a kind the driver's caches hold: an object
// the usable cache does not hold is created without reading it first.
func ensureCached[T metav1.Object](ctx context.Context, d *Driver, c getCreator[T], obj T, o owner) (T, error) {
	return ensureKnown(ctx, c, obj, o, d.absentInCache(obj))
}

// ensureKnown is ensure; absent says the caller already knows no object of
// obj's name exists (its watch-fed cache holds none, or it just read
// NotFound), so the object is created without reading it first. Were that
// knowledge stale, the create's AlreadyExists leads to the read ensure
// makes, and the owner check: a cache can cost a request, never skip a
// check.
func ensureKnown[T metav1.Object](ctx context.Context, c getCreator[T], obj T, o owner, absent bool) (T, error) {
	if !absent {
		cur, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil {
			if !o.owns(cur.GetLabels(), cur.GetAnnotations(), false) {
				return cur, foreign(obj.GetNamespace(), obj.GetName())
			}
			return cur, nil
		}
		if !apierrors.IsNotFound(err) {
			return cur, transient(err)
		}
	}
	stamp(obj) // what was rendered, for drift repair (repair.go)
	created, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return ensure(ctx, c, obj, o) // lost a race: verify the winner's owner
	}
	if err != nil {
		return created, transient(err)
	}
	return created, nil
}

func randomToken() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return []byte(hex.EncodeToString(b))
}

func serviceAccount(name, ns string, o owner) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: meta(name, ns, o, map[string]string{LabelServiceAccount: name}),
		AutomountServiceAccountToken: ptr(false)}
}

func secret(name, ns string, o owner, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: meta(name, ns, o, nil), Type: corev1.SecretTypeOpaque, Data: data}
}

func claim(name, ns string, o owner, size, class string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: meta(name, ns, o, nil),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if class != "" {
		c.Spec.StorageClassName = ptr(class)
	}
	return c
}

// gatewayConfigMap is the revision's Gateway configuration: the admitted
// document compiled for a custom endpoint.
func gatewayConfigMap(p *plan) (*corev1.ConfigMap, error) {
	doc, err := admission.GatewayDocument(p.rev.Document)
	if err != nil {
		return nil, compute.Permanent(codes.InvalidTarget, fmt.Errorf("%w: gateway configuration: %w", ErrInvalidTarget, err))
	}
	return configMap(p.n.gatewayConfig, p.gw, p.own, configKeyGateway, doc), nil
}

// harnessConfigMap is the revision's Harness configuration: its native
// document as admitted.
func harnessConfigMap(p *plan) *corev1.ConfigMap {
	return configMap(p.n.harnessConfig, p.dp, p.own, configKeyNative, p.rev.Document)
}

func configMap(name, ns string, o owner, key string, doc []byte) *corev1.ConfigMap {
	if len(doc) == 0 {
		doc = []byte("{}")
	}
	return &corev1.ConfigMap{ObjectMeta: meta(name, ns, o, nil), Immutable: ptr(true), Data: map[string]string{key: string(doc)}}
}

// gatewayService is the Agent's stable Gateway Service. Until activation
// its selector carries the non-matching <name>-inactive value.
func gatewayService(p *plan, active bool) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.gateway, p.gw, p.agentOwn, map[string]string{LabelRole: RoleGateway}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: gatewayServiceSelector(p, active),
			Ports: []corev1.ServicePort{{Name: "http", Port: contract.GatewayPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}},
	}
}

// gatewayServiceSelector carries the Namespace, Agent and gateway role
// labels without a revision, so the stable route is not tied to one.
func gatewayServiceSelector(p *plan, active bool) map[string]string {
	s := merge(p.gwPodSel)
	if !active {
		s[LabelName] = p.n.inactiveGateway
	}
	return s
}

// harnessService is the Agent's dedicated Harness Service; its active
// selector carries the Namespace, Agent, revision and role labels plus the
// Compute-owned workload name (docs/design/seed-000.md#step-2).
func harnessService(p *plan, active bool) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.agent, p.dp, p.agentOwn, map[string]string{LabelRole: RoleAgent}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: harnessServiceSelector(p, active),
			Ports: []corev1.ServicePort{
				{Name: "websocket", Port: contract.AppServerPort, TargetPort: intstr.FromString("websocket"), Protocol: corev1.ProtocolTCP},
				{Name: "plugin-status", Port: contract.StatusPort, TargetPort: intstr.FromString("plugin-status"), Protocol: corev1.ProtocolTCP},
			}},
	}
}

func harnessServiceSelector(p *plan, active bool) map[string]string {
	if !active {
		return merge(p.agentOwn.labels(), map[string]string{LabelRole: RoleAgent, LabelName: p.n.inactiveAgent})
	}
	return merge(p.harPodSel)
}

// nodeRouteService is the Agent's nonserving node bootstrap route in the
// Gateway namespace: only the Gateway port, selecting the Agent's Gateway
// Pods (no revision). It is never published; workspace nodes use it.
func nodeRouteService(p *plan) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.nodeRoute, p.gw, p.agentOwn, map[string]string{LabelRole: RoleGateway}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: merge(p.gwPodSel),
			Ports: []corev1.ServicePort{{Name: "http", Port: contract.GatewayPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}},
	}
}

// harnessRevisionService is the revision's own Harness Service (revision
// owned, retired with it): the exact revision's Harness Pods, for that
// revision's Gateway only.
func harnessRevisionService(p *plan) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(p.n.harness, p.dp, p.own, map[string]string{LabelRole: RoleAgent}),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: merge(p.harPodSel),
			Ports: []corev1.ServicePort{
				{Name: "websocket", Port: contract.AppServerPort, TargetPort: intstr.FromString("websocket"), Protocol: corev1.ProtocolTCP},
				{Name: "plugin-status", Port: contract.StatusPort, TargetPort: intstr.FromString("plugin-status"), Protocol: corev1.ProtocolTCP},
			}},
	}
}

// privateRanges are excluded from model egress (docs/design/reference.md#s8-3).
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"}

// ModelProviderPort is the port of the default model egress rule.
const ModelProviderPort = 443

// modelEgress is the model-holding Pod's egress: Config.ModelEgress, or
// (unset) any public address on TCP 443 — the providers' own endpoints.
func (d *Driver) modelEgress() []networkingv1.NetworkPolicyEgressRule {
	if len(d.cfg.ModelEgress) == 0 {
		return []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: privateRanges}}},
			Ports: tcpPorts(ModelProviderPort),
		}}
	}
	out := make([]networkingv1.NetworkPolicyEgressRule, 0, len(d.cfg.ModelEgress))
	for _, e := range d.cfg.ModelEgress {
		out = append(out, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: e.CIDR}}}, Ports: tcpPorts(e.Port)})
	}
	return out
}

// revisionPolicies renders the revision's allow policies; with the
// namespaces' default-deny and allow-dns they are everything a Pod may
// send or receive (docs/kubernetes.md, "Network isolation"):
//   - the model-holding Pod (embedded Gateway, dedicated Harness) may reach
//     the model provider (modelEgress);
//   - a Gateway's port admits the Agent's own Harness (its workspace node,
//     of any revision: a candidate node enrolls with the kept predecessor
//     Gateway) and the configured ingress (Config.Ingress: the published
//     route's proxy); its status port admits the coordinator's Pods
//     (Config.Coordinator: setup codes, node lists, relayed turns);
//   - a dedicated Gateway may reach its own revision's Harness (app-server,
//     plugin status), which admits that Gateway only; the Harness may reach
//     its Agent's Gateways' port (the node route).
//
// Every peer is named by its namespace AND the exact Namespace/Agent
// (revision) role labels with the ordinary network profile, so neither
// another Agent of the same namespace nor any Pod elsewhere matches.
func (d *Driver) revisionPolicies(p *plan) []*networkingv1.NetworkPolicy {
	gwSel := merge(p.gatewayWantLabels(), map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})
	harSel := merge(p.harnessWantLabels(), map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})
	runtimeSel := harSel
	if p.topo == contract.Embedded {
		runtimeSel = gwSel
	}
	out := []*networkingv1.NetworkPolicy{{
		ObjectMeta: meta(p.n.policyRuntime, p.dp, p.own, nil),
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: runtimeSel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: d.modelEgress()},
	}}
	var gatewayPortFrom []networkingv1.NetworkPolicyPeer
	if p.topo == contract.DedicatedCodex {
		gatewayPortFrom = append(gatewayPortFrom, peer(p.dp, merge(p.agentOwn.labels(), map[string]string{LabelRole: RoleAgent})))
	}
	gatewayPortFrom = append(gatewayPortFrom, d.ingressPeers()...)
	var ingress []networkingv1.NetworkPolicyIngressRule
	if len(gatewayPortFrom) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{From: gatewayPortFrom, Ports: tcpPorts(contract.GatewayPort)})
	}
	ingress = append(ingress, d.coordinatorIngress()...)
	gatewayPolicy := &networkingv1.NetworkPolicy{
		ObjectMeta: meta(p.n.policyGateway, p.gw, p.own, nil),
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: gwSel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: ingress},
	}
	out = append(out, gatewayPolicy)
	if p.topo == contract.Embedded {
		return out
	}
	harPeer := peer(p.dp, p.harnessWantLabels())
	gatewayPolicy.Spec.PolicyTypes = append(gatewayPolicy.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	gatewayPolicy.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{harPeer},
		Ports: tcpPorts(contract.AppServerPort, contract.StatusPort)}}
	out = append(out, &networkingv1.NetworkPolicy{ // allow-gateway-agent, Harness side
		ObjectMeta: meta(p.n.policyHarness, p.dp, p.own, nil),
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: harSel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{peer(p.gw, p.gatewayWantLabels())},
				Ports: tcpPorts(contract.AppServerPort, contract.StatusPort)}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{peer(p.gw, p.gwPodSel)},
				Ports: tcpPorts(contract.GatewayPort)}}},
	})
	return out
}

// peer selects exactly the other side: its namespace by name AND its Pods
// by the exact owner and role labels plus the network profile.
func peer(ns string, podLabels map[string]string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: merge(podLabels, map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})},
	}
}

func tcpPorts(ports ...int) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt(p))})
	}
	return out
}

// ingressPeers is the configured ingress (the published route's proxy),
// admitted to the Gateway port; none when unconfigured.
func (d *Driver) ingressPeers() []networkingv1.NetworkPolicyPeer {
	in := d.cfg.Ingress
	if len(in.NamespaceLabels) == 0 {
		return nil
	}
	p := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: merge(in.NamespaceLabels)}}
	if len(in.PodLabels) > 0 {
		p.PodSelector = &metav1.LabelSelector{MatchLabels: merge(in.PodLabels)}
	}
	return []networkingv1.NetworkPolicyPeer{p}
}

// coordinatorIngress admits the coordinator to a Gateway's status port
// (setup codes, node lists and relayed turns go to gatewayd there), when
// the driver knows where the coordinator's Pods are.
func (d *Driver) coordinatorIngress() []networkingv1.NetworkPolicyIngressRule {
	c := d.cfg.Coordinator
	if c.Namespace == "" || len(c.PodLabels) == 0 {
		return nil
	}
	return []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": c.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: merge(c.PodLabels)},
		}},
		Ports: tcpPorts(contract.StatusPort),
	}}
}
