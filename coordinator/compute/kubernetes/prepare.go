package kubernetes

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

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

// PrepareRevision implements compute.Driver. It creates, in order, the
// Agent's ServiceAccounts, Secrets, claims (never waited on for Bound) and
// Services (inactive selector), the revision's ConfigMaps, model Secret,
// policies and Harness, then the Gateway: for embedded only when the Agent
// has none yet (otherwise the replacement is staged and activation switches
// it); for dedicated once the candidate Harness Pod runs, keeping a healthy
// predecessor Gateway and replacing an unhealthy one.
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
	if err := d.requireDataPlaneNamespace(ctx, rev.NamespaceID); err != nil {
		return err
	}
	if p.topo == contract.DedicatedCodex {
		if err := d.requireGatewayNamespace(ctx, rev.NamespaceID); err != nil {
			return err
		}
	}
	creds, keys, err := d.credentials(ctx, rev)
	if err != nil {
		return err
	}
	d.markStopped(rev.ID, false)
	if d.preparedLevel(rev.ID) < levelObjects {
		if err := d.prepareObjects(ctx, p, creds, keys); err != nil {
			return err
		}
		d.setPrepared(rev.ID, levelObjects)
	}
	done, err := d.prepareGateway(ctx, p, keys)
	if err != nil || !done {
		return err
	}
	d.setPrepared(rev.ID, levelComplete)
	if p.topo == contract.DedicatedCodex {
		return d.ensureEnrollment(ctx, p)
	}
	return nil
}

// prepareObjects creates everything but the Gateway Deployment.
func (d *Driver) prepareObjects(ctx context.Context, p *plan, creds map[string][]byte, keys []string) error {
	rev := p.rev
	core := d.c.CoreV1()
	ao, ro := p.agentOwn, p.own

	// Agent-owned identity, credentials and storage.
	if _, err := ensure(ctx, core.ServiceAccounts(p.gw), serviceAccount(p.n.gateway, p.gw, ao), ao); err != nil {
		return err
	}
	if _, err := ensure(ctx, core.Secrets(p.gw), secret(p.n.password, p.gw, ao,
		map[string][]byte{contract.SecretGatewayPassword: randomToken(), contract.SecretStatusToken: randomToken()}), ao); err != nil {
		return err
	}
	if _, err := ensure(ctx, core.PersistentVolumeClaims(p.gw), claim(p.n.gatewayState, p.gw, ao, GatewayStateClaimSize, d.cfg.StorageClass), ao); err != nil {
		return err
	}
	if _, err := ensure(ctx, core.Services(p.gw), gatewayService(p, false), ao); err != nil {
		return err
	}
	if p.topo == contract.DedicatedCodex {
		if _, err := ensure(ctx, core.ServiceAccounts(p.dp), serviceAccount(p.n.agent, p.dp, ao), ao); err != nil {
			return err
		}
		if _, err := ensure(ctx, core.PersistentVolumeClaims(p.dp), claim(p.n.workspace, p.dp, ao, WorkspaceClaimSize, d.cfg.StorageClass), ao); err != nil {
			return err
		}
		// The transport Secret exists once per physical namespace with the
		// same values: the two sides share no Secret reference.
		gwT, err := ensure(ctx, core.Secrets(p.gw), secret(p.n.transport, p.gw, ao,
			map[string][]byte{contract.SecretAppServerToken: randomToken(), contract.SecretPluginStatusKey: randomToken()}), ao)
		if err != nil {
			return err
		}
		if _, err := ensure(ctx, core.Secrets(p.dp), secret(p.n.transport, p.dp, ao, gwT.Data), ao); err != nil {
			return err
		}
		if _, err := ensure(ctx, core.Services(p.dp), harnessService(p, false), ao); err != nil {
			return err
		}
		if _, err := ensure(ctx, core.Services(p.gw), nodeRouteService(p), ao); err != nil {
			return err
		}
	}

	// Revision-owned configuration, model credential and policies. The
	// Gateway gets the admitted document compiled for a custom endpoint;
	// the Harness its native document as admitted.
	gwDoc, err := admission.GatewayDocument(rev.Document)
	if err != nil {
		return compute.Permanent(codes.InvalidTarget, fmt.Errorf("%w: gateway configuration: %w", ErrInvalidTarget, err))
	}
	if _, err := ensure(ctx, core.ConfigMaps(p.gw), configMap(p.n.gatewayConfig, p.gw, ro, configKeyGateway, gwDoc), ro); err != nil {
		return err
	}
	if len(keys) > 0 {
		if _, err := ensure(ctx, core.Secrets(p.dp), secret(p.n.harnessSecrets, p.dp, ro, creds), ro); err != nil {
			return err
		}
	}
	for _, np := range d.revisionPolicies(p) {
		if _, err := ensure(ctx, d.c.NetworkingV1().NetworkPolicies(np.Namespace), np, ro); err != nil {
			return err
		}
	}
	if p.topo == contract.DedicatedCodex {
		if _, err := ensure(ctx, core.ConfigMaps(p.dp), configMap(p.n.harnessConfig, p.dp, ro, configKeyNative, rev.Document), ro); err != nil {
			return err
		}
		if _, err := ensure(ctx, core.Services(p.dp), harnessRevisionService(p), ro); err != nil {
			return err
		}
		// The one-use enrollment Secret starts empty: the setup code is
		// minted once the Gateway serving the bootstrap is ready.
		if _, err := d.enrollmentSecret(ctx, p); err != nil {
			return err
		}
		if _, err := ensure(ctx, d.c.AppsV1().Deployments(p.dp), d.harnessDeployment(p, keys), ro); err != nil {
			return err
		}
	}
	return nil
}

// stillPrepared reports whether the revision's workloads still exist as
// prepared (the Gateway Deployment of the Agent, and the Harness).
func (d *Driver) stillPrepared(ctx context.Context, p *plan) (bool, error) {
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

// prepareGateway reports done once the Gateway needs no further step.
func (d *Driver) prepareGateway(ctx context.Context, p *plan, keys []string) (bool, error) {
	deps := d.c.AppsV1().Deployments(p.gw)
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
			return true, nil // staged: activation switches the shared Gateway (Recreate)
		}
		_, err := ensure(ctx, deps, d.gatewayDeployment(p, keys, "", ""), p.own)
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
		_, err = ensure(ctx, deps, d.gatewayDeployment(p, keys, node, public), p.own)
		return err == nil, err
	}
	if deploymentHealthy(cur) {
		return true, nil // a healthy predecessor Gateway stays while the Harness enrolls
	}
	err = d.switchGateway(ctx, cur, p, keys)
	return err == nil, err
}

// nodeRouteURL is the Agent's node route as the setup codes name it
// (nodeRoutePublicURL), read from its exactly owned Service.
func (d *Driver) nodeRouteURL(ctx context.Context, p *plan) (string, error) {
	svc, err := d.c.CoreV1().Services(p.gw).Get(ctx, p.n.nodeRoute, metav1.GetOptions{})
	if err != nil {
		return "", transient(err)
	}
	if !p.agentOwn.owns(svc.Labels, svc.Annotations, false) {
		return "", foreign(p.gw, p.n.nodeRoute)
	}
	url, err := nodeRoutePublicURL(svc)
	if err != nil {
		return "", transient(err)
	}
	return url, nil
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

func deploymentHealthy(dep *appsv1.Deployment) bool {
	return dep.DeletionTimestamp == nil && dep.Status.ObservedGeneration >= dep.Generation && dep.Status.ReadyReplicas > 0
}

// switchGateway points the Agent's Gateway Deployment at p's revision (the
// Recreate strategy stops the old Pod first), conditional on the
// resourceVersion read.
func (d *Driver) switchGateway(ctx context.Context, cur *appsv1.Deployment, p *plan, keys []string) error {
	node, public := "", ""
	if p.topo == contract.DedicatedCodex {
		var err error
		if node, err = d.workspaceNode(ctx, p); err != nil {
			return err
		}
		if public, err = d.nodeRouteURL(ctx, p); err != nil {
			return err
		}
	}
	want := d.gatewayDeployment(p, keys, node, public)
	next := cur.DeepCopy()
	next.Labels = merge(cur.Labels, want.Labels)
	next.Annotations = merge(cur.Annotations, want.Annotations)
	next.Spec.Template = want.Spec.Template
	next.Spec.Strategy = want.Spec.Strategy
	next.Spec.Replicas = want.Spec.Replicas
	if _, err := d.c.AppsV1().Deployments(p.gw).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	return nil
}
