package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// plan is everything one revision renders to, in creation order.
type plan struct {
	rev       state.Revision
	topo      contract.Topology
	n         names
	dp, gw    string // data-plane and Gateway namespaces (equal for embedded)
	own       owner  // revision owner
	agentOwn  owner  // Agent owner
	gwPodSel  map[string]string
	harPodSel map[string]string
	// gwRes and harRes are the containers' requests and limits.
	gwRes, harRes corev1.ResourceRequirements
}

func (d *Driver) planFor(rev state.Revision) (*plan, error) {
	t, err := topologyOf(rev)
	if err != nil {
		return nil, err
	}
	o := revisionOwner(rev)
	if err := o.validate(); err != nil {
		return nil, compute.Permanent(codes.InvalidTarget, err)
	}
	p := &plan{rev: rev, topo: t, n: namesFor(rev.AgentID, rev.ID), dp: DataPlaneNamespace(rev.NamespaceID),
		gw: gatewayNamespaceOf(rev, t), own: o, agentOwn: o.agentOnly()}
	p.gwPodSel = merge(p.agentOwn.labels(), map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway})
	p.harPodSel = merge(p.own.labels(), map[string]string{LabelRole: RoleAgent, LabelName: p.n.harness})
	if p.gwRes, err = requirements(GatewayResources(rev)); err != nil {
		return nil, err
	}
	if p.harRes, err = requirements(HarnessResources(rev)); err != nil {
		return nil, err
	}
	return p, nil
}

// topologyOf is the revision's topology when the driver runs it.
func topologyOf(rev state.Revision) (contract.Topology, error) {
	switch t, _ := contract.Of(rev.Harness.ID, rev.Mode); t {
	case contract.Embedded, contract.DedicatedCodex:
		return t, nil
	}
	return "", compute.Permanent(codes.ComputeDriverMismatch, ErrUnsupported)
}

// gatewayNamespaceOf is where the revision's Gateway runs.
func gatewayNamespaceOf(rev state.Revision, t contract.Topology) string {
	if t == contract.Embedded {
		return DataPlaneNamespace(rev.NamespaceID)
	}
	return GatewayNamespace(rev.NamespaceID)
}

// gatewayPodLabels are the labels of the revision's Gateway Pods.
func (p *plan) gatewayPodLabels() map[string]string {
	return merge(p.own.labels(), map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway,
		LabelNetworkProfile: NetworkProfileOrdinary, LabelServiceAccount: p.n.gateway})
}

func (p *plan) harnessPodLabels() map[string]string {
	return merge(p.harPodSel, map[string]string{LabelNetworkProfile: NetworkProfileOrdinary, LabelServiceAccount: p.n.agent})
}

// gatewayWantLabels / harnessWantLabels are the exact labels readiness
// selects and requires (network profile checked separately).
func (p *plan) gatewayWantLabels() map[string]string {
	return merge(p.own.labels(), map[string]string{LabelRole: RoleGateway, LabelName: p.n.gateway})
}

func (p *plan) harnessWantLabels() map[string]string { return p.harPodSel }

// Label and annotation keys (docs/design/reference.md#s8-2).
const (
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	LabelName             = "app.kubernetes.io/name"
	LabelNamespace        = "openclaw.dev/namespace"
	LabelGatewayNamespace = "openclaw.dev/gateway-namespace"
	LabelAgent            = "openclaw.dev/agent"
	LabelRevision         = "openclaw.dev/revision"
	LabelServiceAccount   = "openclaw.dev/service-account"
	LabelRole             = "openclaw.dev/workload-role"
	LabelNetworkProfile   = "openclaw.dev/network-profile"

	AnnotationNamespaceID = "openclaw.dev/namespace-id"
	AnnotationAgentID     = "openclaw.dev/agent-id"
	AnnotationRevisionID  = "openclaw.dev/revision-id"

	// ManagedBy is the value of LabelManagedBy on everything the driver makes.
	ManagedBy = "oce"
	// NetworkProfileOrdinary is the ordinary network profile every Pod
	// template carries; policies and readiness require it.
	NetworkProfileOrdinary = "ordinary"

	RoleGateway = "gateway"
	RoleAgent   = "agent"
)

func hashHex(id string, n int) string {
	s := sha256.Sum256([]byte(id))
	return hex.EncodeToString(s[:])[:n]
}

// DataPlaneNamespace is the tenant data-plane namespace of a logical
// Namespace: oce-<first 15 hex of sha256(id)> (docs/design/reference.md#s8-1).
func DataPlaneNamespace(namespaceID string) string { return "oce-" + hashHex(namespaceID, 15) }

// GatewayNamespace is the managed Gateway runtime namespace of a logical
// Namespace: oce-gateways-<first 24 hex of sha256(id)>.
func GatewayNamespace(namespaceID string) string {
	return "oce-gateways-" + hashHex(namespaceID, 24)
}

// names are the resource names of one Agent revision (docs/design/reference.md#s8-2).
type names struct {
	a12, r12        string
	gateway         string // gateway-<a12>: Deployment, Service, ServiceAccount
	nodeRoute       string // gateway-<a12>-node: the Gateway's nonserving node bootstrap Service
	agent           string // agent-<a12>: Harness ServiceAccount and Service
	harness         string // agent-<a12>-rev-<r12>: Harness Deployment and the revision's Harness Service
	gatewayConfig   string // gateway-<a12>-rev-<r12>: immutable ConfigMap
	harnessConfig   string // agent-<a12>-rev-<r12>-config: immutable ConfigMap
	gatewayState    string // gateway-state-<a12>
	workspace       string // workspace-<a12>
	password        string // gateway-password-<a12>
	transport       string // app-server-<a12>
	harnessSecrets  string // harness-secrets-<a12>-<r12>
	enrollment      string // workspace-node-<a12>-<r12>
	policyGateway   string // gateway-<a12>-rev-<r12>
	policyHarness   string // agent-<a12>-rev-<r12>
	policyRuntime   string // allow-agent-runtime-<a12>-rev-<r12>
	inactiveGateway string
	inactiveAgent   string
}

func namesFor(agentID, revisionID string) names {
	a, r := hashHex(agentID, 12), ""
	if revisionID != "" {
		r = hashHex(revisionID, 12)
	}
	n := names{a12: a, r12: r,
		gateway: "gateway-" + a, nodeRoute: "gateway-" + a + "-node", agent: "agent-" + a, harness: "agent-" + a + "-rev-" + r,
		gatewayConfig: "gateway-" + a + "-rev-" + r, harnessConfig: "agent-" + a + "-rev-" + r + "-config",
		gatewayState: "gateway-state-" + a, workspace: "workspace-" + a,
		password: "gateway-password-" + a, transport: "app-server-" + a,
		harnessSecrets: "harness-secrets-" + a + "-" + r, enrollment: "workspace-node-" + a + "-" + r,
		policyGateway: "gateway-" + a + "-rev-" + r, policyHarness: "agent-" + a + "-rev-" + r,
		policyRuntime: "allow-agent-runtime-" + a + "-rev-" + r,
	}
	n.inactiveGateway = n.gateway + "-inactive"
	n.inactiveAgent = n.agent + "-inactive"
	return n
}

// owner is the exact owner an object carries in labels and annotations.
type owner struct {
	NamespaceID string
	AgentID     string
	RevisionID  string // empty for Agent-owned objects
}

func revisionOwner(rev state.Revision) owner {
	return owner{NamespaceID: rev.NamespaceID, AgentID: rev.AgentID, RevisionID: rev.ID}
}

func (o owner) agentOnly() owner { return owner{NamespaceID: o.NamespaceID, AgentID: o.AgentID} }

// validate rejects ids that cannot be label values, so the exact owner is
// always expressible as a label selector.
func (o owner) validate() error {
	for k, v := range map[string]string{"namespace": o.NamespaceID, "agent": o.AgentID, "revision": o.RevisionID} {
		if v == "" && k == "revision" {
			continue
		}
		if v == "" {
			return fmt.Errorf("%w: empty %s id", ErrInvalidTarget, k)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("%w: %s id %q is not a label value", ErrInvalidTarget, k, v)
		}
	}
	return nil
}

// labels are the owner labels (plus managed-by).
func (o owner) labels() map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: o.NamespaceID, LabelAgent: o.AgentID}
	if o.RevisionID != "" {
		l[LabelRevision] = o.RevisionID
	}
	return l
}

func (o owner) annotations() map[string]string {
	a := map[string]string{AnnotationNamespaceID: o.NamespaceID, AnnotationAgentID: o.AgentID}
	if o.RevisionID != "" {
		a[AnnotationRevisionID] = o.RevisionID
	}
	return a
}

// selector is the label selector of everything o owns (for an Agent-only
// owner: every revision of the Agent too).
func (o owner) selector() string {
	s := LabelManagedBy + "=" + ManagedBy + "," + LabelNamespace + "=" + o.NamespaceID + "," + LabelAgent + "=" + o.AgentID
	if o.RevisionID != "" {
		s += "," + LabelRevision + "=" + o.RevisionID
	}
	return s
}

// owns reports whether an object's labels and annotations name exactly o. An
// Agent-only owner also owns the Agent's revision-scoped objects when
// anyRevision is set.
func (o owner) owns(labels, annotations map[string]string, anyRevision bool) bool {
	if labels[LabelManagedBy] != ManagedBy || labels[LabelNamespace] != o.NamespaceID || labels[LabelAgent] != o.AgentID ||
		annotations[AnnotationNamespaceID] != o.NamespaceID || annotations[AnnotationAgentID] != o.AgentID {
		return false
	}
	if anyRevision && o.RevisionID == "" {
		return labels[LabelRevision] == annotations[AnnotationRevisionID]
	}
	return labels[LabelRevision] == o.RevisionID && annotations[AnnotationRevisionID] == o.RevisionID
}

func meta(name, ns string, o owner, extra map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: merge(o.labels(), extra), Annotations: o.annotations()}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
