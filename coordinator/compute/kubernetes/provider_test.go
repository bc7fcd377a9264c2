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

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// requireUniqueEnv fails when a container names a variable twice (the API
// server's server-side apply refuses a list-map with duplicate keys).
func requireUniqueEnv(t *testing.T, c corev1.Container) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range c.Env {
		require.False(t, seen[e.Name], "container %s names %s twice", c.Name, e.Name)
		seen[e.Name] = true
	}
}

// TestProviderBaseURLsRendered: the endpoint the coordinator's credential
// check calls is the one the runtimes are rendered with — the provider's
// origin for gatewayd, the /v1 base for the Codex Harness — and no endpoint
// is rendered when none is configured.
func TestProviderBaseURLsRendered(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d.PrepareRevision(ctx, embeddedRev("r1")))
	e := envOf(gatewayOf(t, cs, DataPlaneNamespace("ns1")).Spec.Template.Spec.Containers[0])
	require.NotContains(t, e, contract.EnvProviderBaseURLOpenAI)

	d, cs = newFake(t)
	d.cfg.ProviderBaseURLs = map[string]string{contract.ProviderOpenAI: "http://fake-provider.oce-test.svc:8080/",
		contract.ProviderAnthropic: "http://fake-provider.oce-test.svc:8080"}
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	require.NoError(t, d.PrepareRevision(ctx, embeddedRev("r1")))
	gw := gatewayOf(t, cs, DataPlaneNamespace("ns1")).Spec.Template.Spec.Containers[0]
	requireUniqueEnv(t, gw)
	e = envOf(gw)
	require.Equal(t, "http://fake-provider.oce-test.svc:8080", e[contract.EnvProviderBaseURLOpenAI])
	require.Equal(t, "http://fake-provider.oce-test.svc:8080", e[contract.EnvProviderBaseURLAnthropic])

	rev := dedicatedRev("r2")
	rev.AgentID = "a2"
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	h, err := cs.AppsV1().Deployments(p.dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	requireUniqueEnv(t, h.Spec.Template.Spec.Containers[0])
	require.Equal(t, "http://fake-provider.oce-test.svc:8080/v1", envOf(h.Spec.Template.Spec.Containers[0])[contract.EnvProviderBaseURLOpenAI])
}
