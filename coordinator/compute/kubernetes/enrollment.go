package kubernetes

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
)

// One-use enrollment Secret keys (docs/design/seed-000.md#step-2, docs/design/reference.md#s4-2). The
// Harness Pod mounts only KeySetupCode, as the file
// OCE_NODEHOST_ENROLLMENT_FILE names, mode 0600.
const (
	KeySetupCode   = "setupCode"
	KeyExpiresAtMs = "expiresAtMs"
	KeySetupID     = "setupId"
	// AnnotationWorkspaceNode records the enrolled node's device id on the
	// revision's enrollment Secret.
	AnnotationWorkspaceNode = "oce.dev/workspace-node-id"
	// ReasonNodeNotEnrolled: the Gateway lists no connected workspace node.
	ReasonNodeNotEnrolled = "workspace node not enrolled"
	// ReasonNodeNotPinned: the node enrolled, and the revision's Gateway is
	// being restarted pinned to it (OCE_WORKSPACE_NODE_ID).
	ReasonNodeNotPinned = "workspace node not pinned"
	// KeyNodeIdentity is the device identity provisioned for an Agent that
	// has no workspace node yet (ocproto.Identity.Marshal), delivered to the
	// Harness as contract.NodeIdentityFile; AnnotationProvisionedNode is its
	// device id, which the revision's Gateway pins from its first start.
	KeyNodeIdentity           = "nodeIdentity"
	AnnotationProvisionedNode = "oce.dev/provisioned-node-id"
)

// ensureEnrollment delivers the workspace node's one-use setup code: once
// the serving Gateway is ready it records an already connected node, or
// mints a code through that Gateway into the enrollment Secret, never
// re-minting while a stored code is unexpired; once a node is recorded the
// code is removed.
func (d *Driver) ensureEnrollment(ctx context.Context, p *plan) error {
	s, err := d.enrollmentSecret(ctx, p)
	if err != nil {
		return err
	}
	if id := s.Annotations[AnnotationWorkspaceNode]; id != "" {
		if err := d.recordNode(ctx, p, s, id); err != nil {
			return err
		}
		return d.pinNode(ctx, p, id)
	}
	ep, r, err := d.servingGateway(ctx, p)
	if err != nil || !r.Ready {
		return err
	}
	nodes, err := d.status.Nodes(ctx, p.rev, ep)
	if err != nil {
		return statusErr("nodes", err)
	}
	if id := connectedNode(nodes, ""); id != "" {
		if err := d.recordNode(ctx, p, s, id); err != nil {
			return err
		}
		return d.pinNode(ctx, p, id)
	}
	if exp, err := strconv.ParseInt(string(s.Data[KeyExpiresAtMs]), 10, 64); err == nil &&
		len(s.Data[KeySetupCode]) > 0 && d.now().UnixMilli() < exp {
		return nil // a valid code is out there: never mint a second one
	}
	code, exp, err := d.status.SetupCode(ctx, p.rev, ep)
	if err != nil {
		return statusErr("setup-code", err)
	}
	next := s.DeepCopy()
	next.Data = map[string][]byte{KeySetupCode: []byte(code), KeyExpiresAtMs: []byte(strconv.FormatInt(exp, 10)),
		KeySetupID: randomToken()[:16]}
	if id, ok := s.Data[KeyNodeIdentity]; ok {
		next.Data[KeyNodeIdentity] = id // the node adopts it when it enrolls
	}
	if _, err := d.c.CoreV1().Secrets(p.dp).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	d.log.Info("minted workspace node setup code", "revision", p.rev.ID, "gatewayRevision", ep.RevisionID, "expiresAtMs", exp)
	return nil
}

// enrollmentSecret returns the revision's exactly owned enrollment Secret,
// creating an empty one when it is missing.
func (d *Driver) enrollmentSecret(ctx context.Context, p *plan) (*corev1.Secret, error) {
	return ensure(ctx, d.c.CoreV1().Secrets(p.dp), secret(p.n.enrollment, p.dp, p.own, nil), p.own)
}

// provisionNode gives a dedicated Agent that has no workspace node yet a
// device identity before its Gateway first starts (issue 23): the
// revision's enrollment Secret carries it for the Harness and names its
// device id, which the Gateway pins from its first start (workspaceNode),
// so enrolling the node no longer restarts the Gateway. An Agent whose node
// is known keeps it (its identity lives on the Agent's workspace claim).
func (d *Driver) provisionNode(ctx context.Context, p *plan) error {
	s, err := d.enrollmentSecret(ctx, p)
	if err != nil {
		return err
	}
	if s.Annotations[AnnotationProvisionedNode] != "" || s.Annotations[AnnotationWorkspaceNode] != "" {
		return nil
	}
	if node, err := d.agentNode(ctx, p); err != nil || node != "" {
		return err
	}
	id, err := ocproto.NewIdentity()
	if err != nil {
		return transient(err)
	}
	b, err := id.Marshal()
	if err != nil {
		return transient(err)
	}
	next := s.DeepCopy()
	next.Annotations = merge(s.Annotations, map[string]string{AnnotationProvisionedNode: id.DeviceID})
	if next.Data == nil {
		next.Data = map[string][]byte{}
	}
	next.Data[KeyNodeIdentity] = b
	if _, err := d.c.CoreV1().Secrets(p.dp).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	d.log.Info("provisioned the workspace node's identity", "revision", p.rev.ID, "node", id.DeviceID)
	return nil
}

// recordNode annotates the enrollment Secret with the enrolled node and
// removes the consumed setup code and provisioned identity (conditional
// update).
func (d *Driver) recordNode(ctx context.Context, p *plan, s *corev1.Secret, nodeID string) error {
	_, hasCode := s.Data[KeySetupCode]
	_, hasIdentity := s.Data[KeyNodeIdentity]
	if s.Annotations[AnnotationWorkspaceNode] == nodeID && !hasCode && !hasIdentity {
		return nil
	}
	next := s.DeepCopy()
	next.Annotations = merge(s.Annotations, map[string]string{AnnotationWorkspaceNode: nodeID})
	delete(next.Data, KeySetupCode)
	delete(next.Data, KeyNodeIdentity)
	if _, err := d.c.CoreV1().Secrets(p.dp).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return transient(err)
	}
	return nil
}

// connectedNode picks want when it is connected, or (want empty) the first
// connected node by id.
func connectedNode(nodes []Node, want string) string {
	ids := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Connected && n.NodeID != "" {
			ids = append(ids, n.NodeID)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if want == "" || id == want {
			return id
		}
	}
	return ""
}

// pinNode records the Agent's node on its node route and, when the Agent's
// Gateway runs this revision without the node pinned, updates its template
// (the Recreate strategy restarts it; the node reconnects with its device
// token).
func (d *Driver) pinNode(ctx context.Context, p *plan, nodeID string) error {
	svc, err := d.c.CoreV1().Services(p.gw).Get(ctx, p.n.nodeRoute, metav1.GetOptions{})
	if err != nil {
		return transient(err)
	}
	if !p.agentOwn.owns(svc.Labels, svc.Annotations, false) {
		return foreign(p.gw, p.n.nodeRoute)
	}
	if svc.Annotations[AnnotationWorkspaceNode] != nodeID {
		next := svc.DeepCopy()
		next.Annotations = merge(svc.Annotations, map[string]string{AnnotationWorkspaceNode: nodeID})
		if _, err := d.c.CoreV1().Services(p.gw).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return transient(err)
		}
	}
	gw, err := d.c.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return transient(err)
	}
	if !p.agentOwn.owns(gw.Labels, gw.Annotations, true) {
		return foreign(p.gw, p.n.gateway)
	}
	if gw.Labels[LabelRevision] != p.rev.ID || gw.DeletionTimestamp != nil || podEnv(gw.Spec.Template.Spec, contract.EnvWorkspaceNodeID) == nodeID {
		return nil // another revision's Gateway: activation renders the pin
	}
	_, keys, err := d.credentials(ctx, p.rev)
	if err != nil {
		return err
	}
	d.log.Info("workspace node enrolled; pinning it in the Gateway", "revision", p.rev.ID, "node", nodeID)
	return d.switchGateway(ctx, gw, p, keys)
}

// workspaceNode is the node the revision's Gateway pins: the one its own
// enrollment recorded, else the Agent's (its identity lives on the Agent's
// workspace claim, so a later revision's Gateway starts pinned at once),
// else the one provisioned for this revision (provisionNode).
func (d *Driver) workspaceNode(ctx context.Context, p *plan) (string, error) {
	s, err := d.c.CoreV1().Secrets(p.dp).Get(ctx, p.n.enrollment, metav1.GetOptions{})
	var provisioned string
	switch {
	case err == nil && p.own.owns(s.Labels, s.Annotations, false) && s.Annotations[AnnotationWorkspaceNode] != "":
		return s.Annotations[AnnotationWorkspaceNode], nil
	case err == nil && p.own.owns(s.Labels, s.Annotations, false):
		provisioned = s.Annotations[AnnotationProvisionedNode]
	case err != nil && !apierrors.IsNotFound(err):
		return "", transient(err)
	}
	node, err := d.agentNode(ctx, p)
	if err != nil || node != "" {
		return node, err
	}
	return provisioned, nil
}

// agentNode is the Agent's recorded workspace node (its node route's
// annotation), "" when none.
func (d *Driver) agentNode(ctx context.Context, p *plan) (string, error) {
	svc, err := d.c.CoreV1().Services(p.gw).Get(ctx, p.n.nodeRoute, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", transient(err)
	}
	if !p.agentOwn.owns(svc.Labels, svc.Annotations, false) {
		return "", foreign(p.gw, p.n.nodeRoute)
	}
	return svc.Annotations[AnnotationWorkspaceNode], nil
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

// nodeRoutePublicURL is the node route as a setup code names it: by the
// Service's cluster IP. The pinned OpenClaw mints ws:// setup codes only
// for loopback, private-LAN addresses and .local hosts (its device-pair
// plugin refuses "x.ns.svc" names: found on real Pods, where every
// setup-code call failed INVALID_REQUEST); a cluster IP is a private
// address whatever the cluster domain. The node itself dials its
// configured route (OCE_NODEHOST_GATEWAY_URL), which overrides the code's.
func nodeRoutePublicURL(svc *corev1.Service) (string, error) {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		return "", fmt.Errorf("%w: node route %s/%s has no cluster IP yet", ErrNotReady, svc.Namespace, svc.Name)
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(contract.GatewayPort)), nil
}

// nodeReadiness is the dedicated Codex enrollment check of observation and
// activation: the serving Gateway must list a connected workspace node
// (the recorded one, once recorded), which is then recorded.
func (d *Driver) nodeReadiness(ctx context.Context, p *plan, ep Endpoint) (Readiness, error) {
	s, err := d.c.CoreV1().Secrets(p.dp).Get(ctx, p.n.enrollment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Readiness{Reason: ReasonNodeNotEnrolled}, nil
	}
	if err != nil {
		return Readiness{}, transient(err)
	}
	if !p.own.owns(s.Labels, s.Annotations, false) {
		return Readiness{}, foreign(p.dp, p.n.enrollment)
	}
	nodes, err := d.status.Nodes(ctx, p.rev, ep)
	if err != nil {
		return Readiness{}, statusErr("nodes", err)
	}
	id := connectedNode(nodes, s.Annotations[AnnotationWorkspaceNode])
	if id == "" {
		return Readiness{Reason: ReasonNodeNotEnrolled}, nil
	}
	if err := d.recordNode(ctx, p, s, id); err != nil {
		return Readiness{}, err
	}
	if ep.RevisionID == p.rev.ID && ep.NodeID != id {
		// The serving Gateway is this revision's and does not pin the node
		// yet: preparation restarts it pinned (the Pod's own spec tells).
		return Readiness{Reason: ReasonNodeNotPinned, Pod: ep.Pod}, nil
	}
	d.mu.Lock()
	d.nodeSeen[p.rev.ID] = id
	d.mu.Unlock()
	return Readiness{Ready: true, Reason: ReasonReady, Pod: ep.Pod}, nil
}

// pinnedNodeReady is nodeReadiness for a revision at rest, without the
// enrollment Secret's read: ok when the serving Gateway (this revision's,
// from the caches) pins the node a full check recorded, and the Gateway
// says that node is connected. Anything else is for nodeReadiness.
func (d *Driver) pinnedNodeReady(ctx context.Context, p *plan, ep Endpoint) (Readiness, bool) {
	d.mu.Lock()
	seen := d.nodeSeen[p.rev.ID]
	d.mu.Unlock()
	if seen == "" || ep.RevisionID != p.rev.ID || ep.NodeID != seen {
		return Readiness{}, false
	}
	nodes, err := d.status.Nodes(ctx, p.rev, ep)
	if err != nil || connectedNode(nodes, seen) != seen {
		return Readiness{}, false
	}
	return Readiness{Ready: true, Reason: ReasonReady, Pod: ep.Pod}, true
}

func statusErr(op string, err error) error {
	return compute.Transient(codes.TransientDependency, fmt.Errorf("gateway status %s: %w", op, err))
}
