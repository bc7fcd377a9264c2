package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
