package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

func envValues(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// A configured model endpoint (the fake provider as an in-cluster Service,
// or an operator's model proxy) reaches every supervisor: the Gateway gets
// the provider's origin, the Codex Harness the /v1 base Codex appends
// /responses to. Without one nothing is rendered (the default endpoints).
func TestProviderBaseURLsRendered(t *testing.T) {
	d, cs, _ := newFakeStatus(t)
	d.cfg.ProviderBaseURLs = map[string]string{contract.ProviderOpenAI: "http://fake.models.svc:8080/",
		contract.ProviderAnthropic: "http://fake.models.svc:8080"}
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d.PrepareRevision(ctx, embeddedRev("r1")))
	gw := envValues(gatewayOf(t, cs, DataPlaneNamespace("ns1")).Spec.Template.Spec.Containers[0])
	require.Equal(t, "http://fake.models.svc:8080", gw[contract.EnvProviderBaseURLOpenAI])
	require.Equal(t, "http://fake.models.svc:8080", gw[contract.EnvProviderBaseURLAnthropic])

	rev := dedicatedRev("r2")
	rev.AgentID = "a2"
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	h, err := cs.AppsV1().Deployments(p.dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "http://fake.models.svc:8080/v1", envValues(h.Spec.Template.Spec.Containers[0])[contract.EnvProviderBaseURLOpenAI])

	d2, cs2, _ := newFakeStatus(t)
	require.NoError(t, d2.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d2.PrepareRevision(ctx, embeddedRev("r1")))
	for name := range envValues(gatewayOf(t, cs2, DataPlaneNamespace("ns1")).Spec.Template.Spec.Containers[0]) {
		require.NotContains(t, name, contract.EnvProviderBaseURLPrefix, "no override without one configured")
	}
}

// The coordinator reaches an active Agent's Gateway as an operator through
// its stable Service with the managed password of the Agent-owned Secret;
// a Secret it does not own is refused, an inactive Agent has no endpoint.
func TestGatewayOperator(t *testing.T) {
	d, cs, _ := newFakeStatus(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := embeddedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	agent := state.Agent{ID: "a1", NamespaceID: "ns1", Name: "bot", ExecutionMode: state.ModeEmbedded}
	_, err := d.GatewayOperator(ctx, agent)
	require.ErrorIs(t, err, compute.ErrNoEndpoint, "not active")
	agent.ActiveRevisionID = "r1"
	op, err := d.GatewayOperator(ctx, agent)
	require.NoError(t, err)
	n := namesFor("a1", "")
	dp := DataPlaneNamespace("ns1")
	require.Equal(t, "ws://"+n.gateway+"."+dp+".svc:18789", op.URL)
	require.Equal(t, "r1", op.RevisionID)
	s, err := cs.CoreV1().Secrets(dp).Get(ctx, n.password, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, string(s.Data[contract.SecretGatewayPassword]), op.Password)
	require.Len(t, op.Password, 64)

	s.Labels[LabelAgent] = "someone-else"
	_, err = cs.CoreV1().Secrets(dp).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = d.GatewayOperator(ctx, agent)
	require.ErrorIs(t, err, ErrForeignWorkload)
}
