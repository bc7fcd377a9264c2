package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/kubernetes/fakeapi"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

func newFake(t *testing.T) (*Driver, *fake.Clientset) {
	d, cs, _ := newFakeStatus(t)
	return d, cs
}

func newFakeStatus(t testing.TB) (*Driver, *fake.Clientset, *fakeStatus) {
	t.Helper()
	cs := newClientset()
	st := &fakeStatus{now: time.UnixMilli(1_000_000)}
	d, err := New(Config{GatewayStatus: st, Now: st.clock, GatewayImage: "registry.invalid/oce/gateway:test", HarnessImage: "registry.invalid/oce/harness:test",
		StorageClass: "kwok-volume", PollInterval: time.Millisecond, GatewayStopWait: time.Second, HarnessStopWait: time.Second,
		Credentials: CredentialsFunc(func(_ context.Context, rev state.Revision) (map[string][]byte, error) {
			if rev.Mode == state.ModeEmbedded {
				return map[string][]byte{contract.SecretModelAPIKey: []byte("sk-test-embedded")}, nil
			}
			return map[string][]byte{contract.SecretOpenAIAPIKey: []byte("sk-test-codex")}, nil
		})}, cs)
	require.NoError(t, err)
	return d, cs, st
}

// newCachedFake is newFakeStatus with the observation caches on, as the
// coordinator runs the driver.
func newCachedFake(t testing.TB) (*Driver, *fake.Clientset, *fakeStatus) {
	t.Helper()
	d, cs, st := newFakeStatus(t)
	d.cfg.ObserveCache = true
	t.Cleanup(d.Close)
	return d, cs, st
}

func embeddedRev(id string) state.Revision {
	return state.Revision{ID: id, AgentID: "a1", NamespaceID: "ns1", Mode: state.ModeEmbedded,
		Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"}, Document: []byte(`{"agents":{}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://ns1/model#key"}}
}

func dedicatedRev(id string) state.Revision {
	return state.Revision{ID: id, AgentID: "a1", NamespaceID: "ns1", Mode: state.ModeDedicated,
		Harness: state.HarnessIdentity{ID: state.HarnessCodex, Version: "0.169.0"}, Document: []byte(`{"agents":{}}`),
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://ns1/model#key"}}
}

func TestNamespaceNames(t *testing.T) {
	dp, gw := DataPlaneNamespace("ns1"), GatewayNamespace("ns1")
	require.Regexp(t, `^oce-[0-9a-f]{15}$`, dp)
	require.Regexp(t, `^oce-gateways-[0-9a-f]{24}$`, gw)
	require.NotEqual(t, DataPlaneNamespace("ns2"), dp)
}

func TestEnsureNamespaceLabelsAndForeign(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}), "idempotent")
	dp, err := cs.CoreV1().Namespaces().Get(ctx, DataPlaneNamespace("ns1"), metav1.GetOptions{})
	require.NoError(t, err)
	gw, err := cs.CoreV1().Namespaces().Get(ctx, GatewayNamespace("ns1"), metav1.GetOptions{})
	require.NoError(t, err)
	for _, n := range []*corev1.Namespace{dp, gw} {
		require.Equal(t, "restricted", n.Labels["pod-security.kubernetes.io/enforce"])
		require.Equal(t, "ns1", n.Annotations[AnnotationNamespaceID])
	}
	require.Equal(t, "ns1", dp.Labels[LabelNamespace])
	require.Equal(t, "ns1", gw.Labels[LabelGatewayNamespace])
	require.NotContains(t, gw.Labels, LabelNamespace, "the Gateway namespace has no openclaw.dev/namespace label")

	// A same-named namespace owned by someone else fails closed.
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: GatewayNamespace("ns9"), Labels: map[string]string{LabelManagedBy: ManagedBy, LabelGatewayNamespace: "other"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = d.EnsureNamespace(ctx, state.Namespace{ID: "ns9"})
	code, permanent := compute.ErrorCode(err, "")
	require.Equal(t, codes.ForeignWorkload, code)
	require.True(t, permanent)
	require.ErrorIs(t, err, ErrForeignNS)

	require.ErrorIs(t, d.EnsureNamespace(ctx, state.Namespace{ID: "not a label/value"}), ErrInvalidTarget)
}

func gatewayOf(t testing.TB, cs *fake.Clientset, ns string) *appsv1.Deployment {
	t.Helper()
	dep, err := cs.AppsV1().Deployments(ns).Get(context.Background(), namesFor("a1", "").gateway, metav1.GetOptions{})
	require.NoError(t, err)
	return dep
}

func projectedSecrets(spec corev1.PodSpec) []string {
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

func TestPrepareEmbeddedRendersOneGateway(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := embeddedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.NoError(t, d.PrepareRevision(ctx, rev), "idempotent")
	n := namesFor("a1", "r1")
	dp := DataPlaneNamespace("ns1")
	dep := gatewayOf(t, cs, dp)
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, dep.Spec.Strategy.Type)
	require.Equal(t, "r1", dep.Labels[LabelRevision])
	require.NotContains(t, dep.Spec.Selector.MatchLabels, LabelRevision, "the stable Gateway selector carries no revision")
	tpl := dep.Spec.Template
	require.Equal(t, NetworkProfileOrdinary, tpl.Labels[LabelNetworkProfile])
	require.Equal(t, int64(GatewayTerminationGraceSeconds), *tpl.Spec.TerminationGracePeriodSeconds)
	require.Contains(t, projectedSecrets(tpl.Spec), n.harnessSecrets, "embedded holds the model credential")
	c := tpl.Spec.Containers[0]
	require.Equal(t, []string{"gatewayd", "ready"}, c.ReadinessProbe.Exec.Command)
	require.Equal(t, int32(2), c.ReadinessProbe.PeriodSeconds)
	require.NotNil(t, c.StartupProbe)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.Equal(t, "prepare-private-state", tpl.Spec.InitContainers[0].Name)
	require.Equal(t, corev1.FSGroupChangeOnRootMismatch, *tpl.Spec.SecurityContext.FSGroupChangePolicy)
	for _, e := range c.Env {
		require.NotContains(t, e.Value, "sk-test", "no secret in env")
	}
	_, err := cs.AppsV1().Deployments(GatewayNamespace("ns1")).Get(ctx, n.gateway, metav1.GetOptions{})
	require.Error(t, err, "embedded uses no Gateway namespace workload")

	svc, err := cs.CoreV1().Services(dp).Get(ctx, n.gateway, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, n.inactiveGateway, svc.Spec.Selector[LabelName], "inactive until activation")

	// A replacement is staged: the Gateway keeps running r1 until activation.
	require.NoError(t, d.PrepareRevision(ctx, embeddedRev("r2")))
	require.Equal(t, "r1", gatewayOf(t, cs, dp).Labels[LabelRevision])
	obs, err := d.ObserveRevision(ctx, embeddedRev("r2"))
	require.NoError(t, err)
	require.True(t, obs.Ready)
	require.Equal(t, ReasonStaged, obs.Reason)
	require.True(t, obs.Staged, "ready to activate, not serving")
	require.NoError(t, d.ActivateRevision(ctx, embeddedRev("r2")))
	require.Equal(t, "r2", gatewayOf(t, cs, dp).Labels[LabelRevision])
	svc, err = cs.CoreV1().Services(dp).Get(ctx, n.gateway, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, n.gateway, svc.Spec.Selector[LabelName])
}

func addPod(t testing.TB, cs *fake.Clientset, ns, name string, lbl map[string]string, ready bool) {
	t.Helper()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name),
			Labels: merge(lbl, map[string]string{LabelNetworkProfile: NetworkProfileOrdinary})},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// rollGateway stands in for the Deployment controller and kubelet on the
// fake client: it replaces the Gateway Pods with one Ready Pod of the
// Deployment's current template (as Recreate does after an update).
func rollGateway(t *testing.T, cs *fake.Clientset, p *plan, name string) {
	t.Helper()
	ctx := context.Background()
	l, err := cs.CoreV1().Pods(p.gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, pod := range l.Items {
		require.NoError(t, cs.CoreV1().Pods(p.gw).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	}
	dep := gatewayOf(t, cs, p.gw)
	_, err = cs.CoreV1().Pods(p.gw).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.gw, UID: types.UID("uid-" + p.gw + "-" + name), Labels: dep.Spec.Template.Labels},
		Spec:       dep.Spec.Template.Spec,
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func TestPrepareDedicatedSplitsGatewayAndHarness(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := dedicatedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	dp, gw := p.dp, p.gw
	require.NotEqual(t, dp, gw)
	h, err := cs.AppsV1().Deployments(dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, projectedSecrets(h.Spec.Template.Spec), p.n.harnessSecrets)
	require.Equal(t, p.n.agent, h.Spec.Template.Spec.ServiceAccountName)
	require.Equal(t, []string{"harnessd", "ready"}, h.Spec.Template.Spec.Containers[0].ReadinessProbe.Exec.Command)
	_, err = cs.AppsV1().Deployments(gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
	require.Error(t, err, "the candidate Gateway waits for its Harness to run")
	obs, err := d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, obs.Ready)

	addPod(t, cs, dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	g := gatewayOf(t, cs, gw)
	require.Equal(t, p.n.gateway, g.Spec.Template.Spec.ServiceAccountName)
	require.NotEqual(t, h.Spec.Template.Spec.ServiceAccountName, g.Spec.Template.Spec.ServiceAccountName)
	require.NotContains(t, projectedSecrets(g.Spec.Template.Spec), p.n.harnessSecrets, "a dedicated Gateway holds no model credential")
	require.False(t, *g.Spec.Template.Spec.AutomountServiceAccountToken, "no Kubernetes credentials in the Gateway")
	for _, e := range g.Spec.Template.Spec.Containers[0].Env {
		require.NotContains(t, e.Name, "API_KEY")
	}
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, obs.Ready)
	require.Equal(t, ReasonNoCandidate, obs.Reason)
	addPod(t, cs, gw, "gateway-0", p.gatewayWantLabels(), true)
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.False(t, obs.Ready)
	require.Equal(t, ReasonNodeNotEnrolled, obs.Reason)
	require.NoError(t, d.PrepareRevision(ctx, rev)) // mints the setup code
	d.status.(*fakeStatus).enroll("node-1")
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, ReasonNodeNotPinned, obs.Reason, "the Gateway does not pin the node yet")
	require.NoError(t, d.PrepareRevision(ctx, rev)) // pins it: the Gateway restarts
	rollGateway(t, cs, p, "gateway-1")
	obs, err = d.ObserveRevision(ctx, rev)
	require.NoError(t, err)
	require.True(t, obs.Ready, obs.Reason)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	svc, err := cs.CoreV1().Services(dp).Get(ctx, p.n.agent, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, harnessServiceSelector(p, true), svc.Spec.Selector)
	require.Equal(t, "r1", svc.Spec.Selector[LabelRevision])

	caps := d.Capabilities()
	require.True(t, caps.RequiresStoppedPredecessors(state.ModeDedicated))
	require.False(t, caps.RequiresStoppedPredecessors(state.ModeEmbedded))
	require.False(t, caps.ActivateBeforeCommit)
}

func TestForeignGatewayFailsClosed(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	n := namesFor("a1", "r1")
	_, err := cs.AppsV1().Deployments(DataPlaneNamespace("ns1")).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Name: n.gateway, Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: "ns1", LabelAgent: "a1"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = d.PrepareRevision(ctx, embeddedRev("r1"))
	require.ErrorIs(t, err, ErrForeignWorkload, "labels without the exact owner annotations are not ours")
	_, err = d.StopRevision(ctx, embeddedRev("r1"))
	require.ErrorIs(t, err, ErrForeignWorkload)
	_, err = cs.AppsV1().Deployments(DataPlaneNamespace("ns1")).Get(ctx, n.gateway, metav1.GetOptions{})
	require.NoError(t, err, "never deleted")
}

func TestUnsupportedTopology(t *testing.T) {
	d, _ := newFake(t)
	rev := dedicatedRev("r1")
	rev.Harness.ID = state.HarnessOpenClaw
	err := d.PrepareRevision(context.Background(), rev)
	code, permanent := compute.ErrorCode(err, "")
	require.Equal(t, codes.ComputeDriverMismatch, code)
	require.True(t, permanent)
}

func TestInvalidIDsArePermanent(t *testing.T) {
	d, _ := newFake(t)
	rev := embeddedRev("bad/revision id")
	err := d.PrepareRevision(context.Background(), rev)
	require.ErrorIs(t, err, ErrInvalidTarget)
	code, permanent := compute.ErrorCode(err, "")
	require.Equal(t, codes.InvalidTarget, code)
	require.True(t, permanent)
}

// TestDeleteCredentialsNeedsExactOwner: an object with the Agent's labels
// but another owner annotation (or another Agent's) is never deleted.
func TestDeleteCredentialsNeedsExactOwner(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	dp := DataPlaneNamespace("ns1")
	mk := func(name string, l, a map[string]string) {
		_, err := cs.CoreV1().PersistentVolumeClaims(dp).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: dp, Labels: l, Annotations: a, UID: types.UID("uid-" + name)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	own := owner{NamespaceID: "ns1", AgentID: "a1"}
	mk("ours", own.labels(), own.annotations())
	mk("forged", own.labels(), map[string]string{AnnotationNamespaceID: "ns1", AnnotationAgentID: "a2"})
	other := owner{NamespaceID: "ns1", AgentID: "a2"}
	mk("other", other.labels(), other.annotations())
	require.NoError(t, d.DeleteAgentRuntimeCredentials(ctx, state.Agent{ID: "a1", NamespaceID: "ns1"}))
	l, err := cs.CoreV1().PersistentVolumeClaims(dp).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, c := range l.Items {
		left = append(left, c.Name)
	}
	require.ElementsMatch(t, []string{"forged", "other"}, left)
}

// A wrong image variable or node selector refuses to start with ErrConfig.
func TestNewRefusesBadConfig(t *testing.T) {
	cs := newClientset()
	for _, ok := range []string{"localhost/oce/gateway:0b487fc42a19413e", "registry.example:5000/team/oce-gateway:v1.2",
		"oce/gateway@sha256:" + strings.Repeat("a", 64), "gateway"} {
		require.True(t, ValidImageRef(ok), ok)
	}
	for _, cfg := range []Config{
		{GatewayImage: "", HarnessImage: "oce/harness:1"},
		{GatewayImage: "oce/gateway:1", HarnessImage: "Oce/Harness:latest"},
		{GatewayImage: "oce/gateway:1 ", HarnessImage: "oce/harness:1"},
		{GatewayImage: "oce/gateway:1", HarnessImage: "oce/harness:1", NodeSelector: map[string]string{"pool": "has space"}},
		{GatewayImage: "oce/gateway:1", HarnessImage: "oce/harness:1", GatewayNodeSelector: map[string]string{"-bad": "x"}},
	} {
		_, err := New(cfg, cs)
		require.ErrorIs(t, err, ErrConfig, "%+v", cfg)
	}
	_, err := New(Config{GatewayImage: "oce/gateway:1", HarnessImage: "oce/harness:1", NodeSelector: map[string]string{"oce.dev/pool": "agents"}}, cs)
	require.NoError(t, err)
}

// newClientset is a fake clientset that assigns cluster IPs like the API
// server.
func newClientset() *fake.Clientset { return fakeapi.NewClientset() }
