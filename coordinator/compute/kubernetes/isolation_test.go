package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// policiesByName renders a revision's policies.
func policiesByName(t *testing.T, d *Driver, rev state.Revision) (*plan, map[string]*networkingv1.NetworkPolicy) {
	t.Helper()
	p, err := d.planFor(rev)
	require.NoError(t, err)
	out := map[string]*networkingv1.NetworkPolicy{}
	for _, np := range d.revisionPolicies(p) {
		out[np.Name] = np
	}
	return p, out
}

// ports lists a rule's TCP ports.
func ports(t *testing.T, ps []networkingv1.NetworkPolicyPort) []int {
	t.Helper()
	var out []int
	for _, p := range ps {
		require.Equal(t, corev1.ProtocolTCP, *p.Protocol)
		out = append(out, p.Port.IntValue())
	}
	return out
}

// No Gateway or Harness admits anyone but the peers the seeds name: every
// ingress rule names its sources (none is "from anywhere"); the embedded
// Gateway's port admits nobody until an ingress is configured, its status
// port only the coordinator; a dedicated Gateway's port admits its Agent's
// Harness of any revision (the node route) and the Harness only its own
// revision's Gateway; model egress is the configured block or public 443.
func TestPoliciesAdmitOnlyTheSeedsPeers(t *testing.T) {
	coordinator := CoordinatorPeer{Namespace: "oce-system", PodLabels: map[string]string{"app.kubernetes.io/name": "oce-coordinator"}}
	ingress := IngressPeer{NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "ingress"}, PodLabels: map[string]string{"app": "proxy"}}

	t.Run("embedded", func(t *testing.T) {
		d, _ := newFake(t)
		d.cfg.Coordinator = coordinator
		p, pols := policiesByName(t, d, embeddedRev("r1"))
		require.Len(t, pols, 2)
		gw := pols[p.n.policyGateway]
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, gw.Spec.PolicyTypes)
		require.Len(t, gw.Spec.Ingress, 1, "the status port only")
		require.Equal(t, []int{contract.StatusPort}, ports(t, gw.Spec.Ingress[0].Ports))
		require.Equal(t, "oce-system", gw.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])

		rt := pols[p.n.policyRuntime]
		require.Equal(t, p.gatewayWantLabels()[LabelRevision], rt.Spec.PodSelector.MatchLabels[LabelRevision])
		require.Equal(t, "0.0.0.0/0", rt.Spec.Egress[0].To[0].IPBlock.CIDR)
		require.Contains(t, rt.Spec.Egress[0].To[0].IPBlock.Except, "10.0.0.0/8")
		require.Equal(t, []int{443}, ports(t, rt.Spec.Egress[0].Ports))

		d.cfg.Ingress = ingress
		d.cfg.ModelEgress = []EgressPeer{{CIDR: "10.232.0.0/24", Port: 8080}, {CIDR: "203.0.113.7/32", Port: 443}}
		_, pols = policiesByName(t, d, embeddedRev("r1"))
		gw = pols[p.n.policyGateway]
		require.Len(t, gw.Spec.Ingress, 2)
		require.Equal(t, []int{contract.GatewayPort}, ports(t, gw.Spec.Ingress[0].Ports))
		require.Equal(t, ingress.NamespaceLabels, gw.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels)
		require.Equal(t, ingress.PodLabels, gw.Spec.Ingress[0].From[0].PodSelector.MatchLabels)
		rt = pols[p.n.policyRuntime]
		require.Len(t, rt.Spec.Egress, 2)
		require.Equal(t, "10.232.0.0/24", rt.Spec.Egress[0].To[0].IPBlock.CIDR)
		require.Empty(t, rt.Spec.Egress[0].To[0].IPBlock.Except)
		require.Equal(t, []int{8080}, ports(t, rt.Spec.Egress[0].Ports))
		require.Equal(t, []int{443}, ports(t, rt.Spec.Egress[1].Ports))
	})

	t.Run("dedicated", func(t *testing.T) {
		d, _ := newFake(t)
		d.cfg.Coordinator = coordinator
		p, pols := policiesByName(t, d, dedicatedRev("r1"))
		require.Len(t, pols, 3)
		gw := pols[p.n.policyGateway]
		require.Equal(t, p.gw, gw.Namespace)
		require.Len(t, gw.Spec.Ingress, 2)
		node := gw.Spec.Ingress[0]
		require.Equal(t, []int{contract.GatewayPort}, ports(t, node.Ports))
		require.Len(t, node.From, 1)
		require.Equal(t, p.dp, node.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
		require.Equal(t, map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: "ns1", LabelAgent: "a1", LabelRole: RoleAgent,
			LabelNetworkProfile: NetworkProfileOrdinary}, node.From[0].PodSelector.MatchLabels, "the Agent's Harness of any revision")
		require.Equal(t, []int{contract.StatusPort}, ports(t, gw.Spec.Ingress[1].Ports))
		require.Equal(t, []int{contract.AppServerPort, contract.StatusPort}, ports(t, gw.Spec.Egress[0].Ports))
		require.Equal(t, "r1", gw.Spec.Egress[0].To[0].PodSelector.MatchLabels[LabelRevision], "its own revision's Harness")

		h := pols[p.n.policyHarness]
		require.Equal(t, p.dp, h.Namespace)
		require.Len(t, h.Spec.Ingress, 1)
		require.Equal(t, []int{contract.AppServerPort, contract.StatusPort}, ports(t, h.Spec.Ingress[0].Ports))
		require.Equal(t, p.gw, h.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
		require.Equal(t, "r1", h.Spec.Ingress[0].From[0].PodSelector.MatchLabels[LabelRevision], "only its own revision's Gateway")
		require.Equal(t, []int{contract.GatewayPort}, ports(t, h.Spec.Egress[0].Ports))
		require.NotContains(t, h.Spec.Egress[0].To[0].PodSelector.MatchLabels, LabelRevision, "the node route: any Gateway revision of the Agent")
		require.Equal(t, "a1", h.Spec.Egress[0].To[0].PodSelector.MatchLabels[LabelAgent])

		rt := pols[p.n.policyRuntime]
		require.Equal(t, RoleAgent, rt.Spec.PodSelector.MatchLabels[LabelRole], "the Harness holds the model credential")
	})

	for _, rev := range []state.Revision{embeddedRev("r1"), dedicatedRev("r2")} {
		d, _ := newFake(t)
		d.cfg.Coordinator, d.cfg.Ingress = coordinator, ingress
		_, pols := policiesByName(t, d, rev)
		for _, np := range pols {
			for _, in := range np.Spec.Ingress {
				require.NotEmpty(t, in.From, "%s: an ingress rule from anywhere", np.Name)
				require.NotEmpty(t, in.Ports, "%s: an ingress rule on every port", np.Name)
				for _, from := range in.From {
					require.Nil(t, from.IPBlock, "%s admits Pods, not address blocks", np.Name)
					require.NotNil(t, from.NamespaceSelector, "%s: a peer of any namespace", np.Name)
				}
			}
		}
	}
}

// A malformed driver configuration of the new peers is refused at New.
func TestIsolationConfigValidated(t *testing.T) {
	base := Config{GatewayImage: "registry.invalid/g:1", HarnessImage: "registry.invalid/h:1"}
	for name, mut := range map[string]func(*Config){
		"egress cidr":   func(c *Config) { c.ModelEgress = []EgressPeer{{CIDR: "10.0.0.1", Port: 443}} },
		"egress port":   func(c *Config) { c.ModelEgress = []EgressPeer{{CIDR: "10.0.0.0/8", Port: 0}} },
		"ingress pods":  func(c *Config) { c.Ingress = IngressPeer{PodLabels: map[string]string{"a": "b"}} },
		"ingress label": func(c *Config) { c.Ingress = IngressPeer{NamespaceLabels: map[string]string{"a": "b c"}} },
	} {
		cfg := base
		mut(&cfg)
		_, err := New(cfg, newClientset())
		require.ErrorIs(t, err, ErrConfig, name)
	}
}

// Every runtime container carries requests and limits: the defaults, or
// the revision's frozen values over them; the init container small ones.
// A malformed quantity fails preparation closed.
func TestContainersCarryLimits(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := dedicatedRev("r1")
	rev.Resources = &state.AgentResources{Harness: state.ContainerResources{MemoryLimit: "5Gi"}}
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev))

	q := resource.MustParse
	h, err := cs.AppsV1().Deployments(p.dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	hc := h.Spec.Template.Spec.Containers[0].Resources
	require.True(t, q("5Gi").Equal(hc.Limits[corev1.ResourceMemory]), "the Agent's value")
	require.True(t, q(DefaultHarnessResources.CPULimit).Equal(hc.Limits[corev1.ResourceCPU]), "the default beside it")
	require.True(t, q(DefaultHarnessResources.MemoryRequest).Equal(hc.Requests[corev1.ResourceMemory]))
	gc := gatewayOf(t, cs, p.gw).Spec.Template.Spec
	require.True(t, q(DefaultGatewayResources.MemoryLimit).Equal(gc.Containers[0].Resources.Limits[corev1.ResourceMemory]))
	require.True(t, q(DefaultGatewayResources.MemoryRequest).Equal(gc.Containers[0].Resources.Requests[corev1.ResourceMemory]))
	for _, spec := range []corev1.PodSpec{h.Spec.Template.Spec, gc} {
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				require.Contains(t, c.Resources.Limits, r, "%s limit of %s", r, c.Name)
				require.Contains(t, c.Resources.Requests, r, "%s request of %s", r, c.Name)
			}
		}
	}

	bad := embeddedRev("r9")
	bad.Resources = &state.AgentResources{Gateway: state.ContainerResources{CPULimit: "lots"}}
	err = d.PrepareRevision(ctx, bad)
	var ce *compute.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, codes.InvalidTarget, ce.Code)
	require.True(t, ce.Permanent)
}

// A Namespace quota becomes a ResourceQuota and a LimitRange in both of
// its Kubernetes namespaces, follows a changed quota, and goes with it; a
// same-named object of another owner fails closed.
func TestQuotaRendered(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	q := &state.NamespaceQuota{Agents: 3, CPU: "6", Memory: "12Gi", Storage: "150Gi"}
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1", Quota: q}))
	for _, ns := range []string{DataPlaneNamespace("ns1"), GatewayNamespace("ns1")} {
		rq, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, QuotaName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "3", rq.Spec.Hard.Name(corev1.ResourcePersistentVolumeClaims, resource.DecimalSI).String())
		require.Equal(t, "6", rq.Spec.Hard.Name(corev1.ResourceLimitsCPU, resource.DecimalSI).String())
		require.Equal(t, "12Gi", rq.Spec.Hard.Name(corev1.ResourceLimitsMemory, resource.BinarySI).String())
		require.Equal(t, "150Gi", rq.Spec.Hard.Name(corev1.ResourceRequestsStorage, resource.BinarySI).String())
		lr, err := cs.CoreV1().LimitRanges(ns).Get(ctx, LimitRangeName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.LimitTypeContainer, lr.Spec.Limits[0].Type)
		require.Contains(t, lr.Spec.Limits[0].Default, corev1.ResourceMemory)
	}

	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1", Quota: &state.NamespaceQuota{Memory: "4Gi"}}))
	rq, err := cs.CoreV1().ResourceQuotas(DataPlaneNamespace("ns1")).Get(ctx, QuotaName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, rq.Spec.Hard, 1, "the changed quota")

	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	for _, ns := range []string{DataPlaneNamespace("ns1"), GatewayNamespace("ns1")} {
		l, err := cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, l.Items)
		lr, err := cs.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, lr.Items)
	}

	d2, cs2 := newFake(t)
	_, err = cs2.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DataPlaneNamespace("ns1"),
		Labels: nsOwnerLabels("ns1", false), Annotations: map[string]string{AnnotationNamespaceID: "ns1"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs2.CoreV1().ResourceQuotas(DataPlaneNamespace("ns1")).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: QuotaName}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	err = d2.EnsureNamespace(ctx, state.Namespace{ID: "ns1", Quota: q})
	var ce *compute.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, codes.ForeignWorkload, ce.Code)
}

// With its identity known, the driver binds the ClusterRole NamespaceRole
// to itself in both namespaces of a Namespace, and nowhere else; without,
// it binds nothing.
func TestNamespaceRoleBound(t *testing.T) {
	ctx := context.Background()
	d, cs := newFake(t)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	l, err := cs.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, l.Items)

	d, cs = newFake(t)
	me := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "oce-system", Name: "oce-coordinator"}
	d.cfg.Subject = me
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	l, err = cs.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, l.Items, 2)
	for _, rb := range l.Items {
		require.Contains(t, []string{DataPlaneNamespace("ns1"), GatewayNamespace("ns1")}, rb.Namespace)
		require.Equal(t, NamespaceRoleBinding, rb.Name)
		require.Equal(t, rbacv1.RoleRef{APIGroup: groupRBAC, Kind: "ClusterRole", Name: NamespaceRole}, rb.RoleRef)
		require.Equal(t, []rbacv1.Subject{me}, rb.Subjects)
		require.Equal(t, ManagedBy, rb.Labels[LabelManagedBy])
	}
	d.forgetNS("ns1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}), "an existing binding is kept")
}
