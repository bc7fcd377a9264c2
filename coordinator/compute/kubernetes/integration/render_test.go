package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

func secretNames(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, s.Secret.Name)
				}
			}
		}
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
	}
	return out
}

// requireRestricted checks the stored Pod spec against the security rules
// (the API server's PSS restricted admission already admitted the Pod).
func requireRestricted(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	sc := spec.SecurityContext
	require.Equal(t, int64(1000), *sc.RunAsUser)
	require.Equal(t, int64(1000), *sc.RunAsGroup)
	require.Equal(t, int64(1000), *sc.FSGroup)
	require.Equal(t, corev1.FSGroupChangeOnRootMismatch, *sc.FSGroupChangePolicy)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	require.False(t, *spec.AutomountServiceAccountToken)
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
		require.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
		require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
		for _, e := range c.Env {
			require.NotContains(t, e.Value, modelSecret, "secret in env of %s", c.Name)
		}
	}
	require.Len(t, spec.InitContainers, 1)
	require.Equal(t, "prepare-private-state", spec.InitContainers[0].Name)
	require.Contains(t, spec.InitContainers[0].Command[2], "chmod 0700")
	require.Contains(t, spec.InitContainers[0].Command[2], "/runtime-temporary/tmp")
	var tmp bool
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath == "/tmp" {
			tmp = m.Name == "runtime-temporary" && m.SubPath == "tmp"
		}
	}
	require.True(t, tmp, "/tmp is the prepared 0700 subdirectory")
}

func requireProbes(t *testing.T, c corev1.Container, bin string) {
	t.Helper()
	require.Equal(t, []string{bin, "ready"}, c.ReadinessProbe.Exec.Command)
	require.Equal(t, int32(2), c.ReadinessProbe.PeriodSeconds)
	// Startup ends when the supervisor says so, held or not: /startupz.
	require.Nil(t, c.StartupProbe.Exec)
	require.Equal(t, "/startupz", c.StartupProbe.HTTPGet.Path)
	require.Equal(t, "plugin-status", c.StartupProbe.HTTPGet.Port.StrVal)
	require.Equal(t, int32(2), c.StartupProbe.PeriodSeconds)
}

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

func TestEmbeddedRenderApplyObserve(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID, agentID := uid("ns-emb"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeEmbedded)
	prepareUntilReady(t, d, rev)

	dp := kdriver.DataPlaneNamespace(nsID)
	ns, err := env.Client.CoreV1().Namespaces().Get(ctx, dp, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])

	deps, err := env.Client.AppsV1().Deployments(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, deps.Items, 1, "embedded: one gateway Deployment")
	g := deps.Items[0]
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, g.Spec.Strategy.Type)
	require.Equal(t, agentID, g.Labels[kdriver.LabelAgent])
	require.Equal(t, rev.ID, g.Annotations[kdriver.AnnotationRevisionID])
	tpl := g.Spec.Template
	require.Equal(t, kdriver.NetworkProfileOrdinary, tpl.Labels[kdriver.LabelNetworkProfile])
	require.Equal(t, int64(330), *tpl.Spec.TerminationGracePeriodSeconds)
	requireRestricted(t, tpl.Spec)
	requireProbes(t, tpl.Spec.Containers[0], "gatewayd")
	var hasModel bool
	for _, s := range secretNames(tpl.Spec) {
		if len(s) > len("harness-secrets-") && s[:len("harness-secrets-")] == "harness-secrets-" {
			sec, err := env.Client.CoreV1().Secrets(dp).Get(ctx, s, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, modelSecret, string(sec.Data[contract.SecretModelAPIKey]))
			hasModel = true
		}
	}
	require.True(t, hasModel, "the embedded gateway holds the model credential")

	// The Pod exists (admitted under PSS restricted), scheduled and Ready.
	pods := podsOf(t, dp, sel(kdriver.LabelAgent, agentID, kdriver.LabelRole, kdriver.RoleGateway))
	require.Len(t, pods, 1)
	require.NotEmpty(t, pods[0].Spec.NodeName)

	// Claims: one gateway-state claim, requested 10Gi, created before the Pod.
	pvcs, err := env.Client.CoreV1().PersistentVolumeClaims(dp).List(ctx, metav1.ListOptions{LabelSelector: sel(kdriver.LabelAgent, agentID)})
	require.NoError(t, err)
	require.Len(t, pvcs.Items, 1)
	require.Equal(t, "10Gi", pvcs.Items[0].Spec.Resources.Requests.Storage().String())
	require.True(t, pvcs.Items[0].CreationTimestamp.Compare(pods[0].CreationTimestamp.Time) <= 0)

	// Service: inactive until activation, then the Agent's gateway labels.
	svc, err := env.Client.CoreV1().Services(dp).Get(ctx, g.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, g.Name+"-inactive", svc.Spec.Selector[kdriver.LabelName])
	require.NoError(t, d.ActivateRevision(ctx, rev))
	svc, err = env.Client.CoreV1().Services(dp).Get(ctx, g.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, g.Name, svc.Spec.Selector[kdriver.LabelName])
	require.Equal(t, agentID, svc.Spec.Selector[kdriver.LabelAgent])
	require.NotContains(t, svc.Spec.Selector, kdriver.LabelRevision)
	require.Eventually(t, func() bool { // the endpoint controller sees the Ready Pod
		l, err := env.Client.DiscoveryV1().EndpointSlices(dp).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc.Name})
		return err == nil && len(l.Items) == 1 && len(l.Items[0].Endpoints) == 1
	}, 30e9, 50e6)

	// Policies: default-deny + allow-dns + model egress (TCP 443, private ranges excluded).
	pols, err := env.Client.NetworkingV1().NetworkPolicies(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	byName := map[string]networkingv1.NetworkPolicy{}
	for _, p := range pols.Items {
		byName[p.Name] = p
	}
	require.Contains(t, byName, "default-deny")
	require.Contains(t, byName, "allow-dns")
	var egress *networkingv1.NetworkPolicy
	for _, p := range pols.Items {
		if p.Labels[kdriver.LabelAgent] == agentID && len(p.Spec.Egress) == 1 && p.Spec.Egress[0].To[0].IPBlock != nil {
			egress = &p
		}
	}
	require.NotNil(t, egress)
	require.Equal(t, "0.0.0.0/0", egress.Spec.Egress[0].To[0].IPBlock.CIDR)
	require.Contains(t, egress.Spec.Egress[0].To[0].IPBlock.Except, "10.0.0.0/8")
	require.Equal(t, int32(443), egress.Spec.Egress[0].Ports[0].Port.IntVal)
	require.Equal(t, kdriver.RoleGateway, egress.Spec.PodSelector.MatchLabels[kdriver.LabelRole])
	require.Equal(t, kdriver.NetworkProfileOrdinary, egress.Spec.PodSelector.MatchLabels[kdriver.LabelNetworkProfile])
}

func TestDedicatedRenderApplyObserve(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, env.Client)
	nsID, agentID := uid("ns-ded"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	dp, gw := kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)

	// The first pass creates the claims and returns without waiting for
	// Bound: with the WaitForFirstConsumer class the Gateway's claim stays
	// Pending until its Pod exists, and that Pod comes only after the Harness runs.
	require.NoError(t, d.PrepareRevision(ctx, rev))
	gpvc, err := env.Client.CoreV1().PersistentVolumeClaims(gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, gpvc.Items, 1)
	require.Equal(t, corev1.ClaimPending, gpvc.Items[0].Status.Phase)
	gdeps0, err := env.Client.AppsV1().Deployments(gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, gdeps0.Items, "the candidate Gateway waits for its Harness")

	prepareUntilReady(t, d, rev)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	require.Eventually(t, func() bool { // bound once consumed
		c, err := env.Client.CoreV1().PersistentVolumeClaims(gw).Get(ctx, gpvc.Items[0].Name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound
	}, 30*time.Second, 20*time.Millisecond)
	gns, err := env.Client.CoreV1().Namespaces().Get(ctx, gw, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, nsID, gns.Labels[kdriver.LabelGatewayNamespace])
	require.NotContains(t, gns.Labels, kdriver.LabelNamespace)

	gdeps, err := env.Client.AppsV1().Deployments(gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, gdeps.Items, 1)
	hdeps, err := env.Client.AppsV1().Deployments(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, hdeps.Items, 1)
	g, h := gdeps.Items[0], hdeps.Items[0]
	gs, hs := g.Spec.Template.Spec, h.Spec.Template.Spec
	requireRestricted(t, gs)
	requireRestricted(t, hs)
	requireProbes(t, gs.Containers[0], "gatewayd")
	requireProbes(t, hs.Containers[0], "harnessd")
	require.Equal(t, int64(330), *gs.TerminationGracePeriodSeconds)
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, h.Spec.Strategy.Type)
	require.NotEqual(t, gs.ServiceAccountName, hs.ServiceAccountName, "separate ServiceAccounts")
	for _, s := range secretNames(gs) {
		require.NotContains(t, s, "harness-secrets", "the dedicated Gateway holds no model credential")
		sec, err := env.Client.CoreV1().Secrets(gw).Get(ctx, s, metav1.GetOptions{})
		require.NoError(t, err)
		for k, v := range sec.Data {
			require.NotEqual(t, modelSecret, string(v), "gateway secret key %s", k)
		}
	}
	var harnessModel bool
	for _, s := range secretNames(hs) {
		sec, err := env.Client.CoreV1().Secrets(dp).Get(ctx, s, metav1.GetOptions{})
		if err == nil && string(sec.Data[contract.SecretOpenAIAPIKey]) == modelSecret {
			harnessModel = true
		}
	}
	require.True(t, harnessModel, "the Harness holds the model credential")
	// Separate claims: gateway state in the Gateway namespace, the 40Gi workspace in the data plane.
	gp, err := env.Client.CoreV1().PersistentVolumeClaims(gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	hp, err := env.Client.CoreV1().PersistentVolumeClaims(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, gp.Items, 1)
	require.Len(t, hp.Items, 1)
	require.Equal(t, "40Gi", hp.Items[0].Spec.Resources.Requests.Storage().String())
	require.Equal(t, "10Gi", gp.Items[0].Spec.Resources.Requests.Storage().String())
	// The transport token is the same value in two Secrets, one per namespace.
	var app string
	for _, e := range gs.Containers[0].Env {
		if e.Name == "OCE_APP_SERVER_URL" {
			app = e.Value
		}
	}
	require.Contains(t, app, "."+dp+".svc:18790", "app-server DNS names the Harness namespace")

	// Active Harness Service selects namespace, agent, revision and role + workload name.
	svcs, err := env.Client.CoreV1().Services(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, svcs.Items, 2, "the Agent's Harness Service and the revision's")
	var hsvc corev1.Service
	for _, s := range svcs.Items {
		if s.Name != h.Name {
			hsvc = s
		}
	}
	require.Equal(t, rev.ID, hsvc.Spec.Selector[kdriver.LabelRevision])
	require.Equal(t, agentID, hsvc.Spec.Selector[kdriver.LabelAgent])
	require.Equal(t, nsID, hsvc.Spec.Selector[kdriver.LabelNamespace])
	require.Equal(t, kdriver.RoleAgent, hsvc.Spec.Selector[kdriver.LabelRole])
	require.Equal(t, h.Name, hsvc.Spec.Selector[kdriver.LabelName])
	ports := map[string]int32{}
	for _, p := range hsvc.Spec.Ports {
		ports[p.Name] = p.Port
	}
	require.Equal(t, map[string]int32{"websocket": 18790, "plugin-status": 18791}, ports)

	// Peer policies combine a namespace selector AND exact Agent/revision/role labels.
	pols, err := env.Client.NetworkingV1().NetworkPolicies(dp).List(ctx, metav1.ListOptions{LabelSelector: sel(kdriver.LabelAgent, agentID)})
	require.NoError(t, err)
	var peerChecked bool
	for _, p := range pols.Items {
		for _, in := range p.Spec.Ingress {
			for _, from := range in.From {
				require.NotNil(t, from.NamespaceSelector)
				require.Equal(t, gw, from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				require.Equal(t, rev.ID, from.PodSelector.MatchLabels[kdriver.LabelRevision])
				require.Equal(t, agentID, from.PodSelector.MatchLabels[kdriver.LabelAgent])
				require.Equal(t, kdriver.RoleGateway, from.PodSelector.MatchLabels[kdriver.LabelRole])
				require.Equal(t, kdriver.NetworkProfileOrdinary, from.PodSelector.MatchLabels[kdriver.LabelNetworkProfile])
				peerChecked = true
			}
		}
	}
	require.True(t, peerChecked)
	require.Len(t, podsOf(t, gw, sel(kdriver.LabelAgent, agentID)), 1)
	require.Len(t, podsOf(t, dp, sel(kdriver.LabelAgent, agentID)), 1)
}
