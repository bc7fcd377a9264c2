package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/state"
)

// gets counts the GETs cs served since action from, by resource.
func gets(cs *fake.Clientset, from int) map[string]int {
	n := map[string]int{}
	for _, a := range cs.Actions()[from:] {
		if a.GetVerb() == "get" {
			n[a.GetResource().Resource]++
		}
	}
	return n
}

// A revision prepared where the namespace's caches run creates the cached
// kinds its caches do not hold without reading them first (the Gateway
// Deployment is read once, for its staging decision, whatever the
// caches); without caches
// every object is read, then created. A foreign object the caches cannot
// hold is still found: its create fails AlreadyExists and the read that
// follows refuses it.
func TestPrepareCreatesWhatTheCacheLacksWithoutReading(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache bool
		want  map[string]int // GETs of the cached kinds
	}{
		{"caches running", true, map[string]int{"deployments": 1}},
		{"no caches", false, map[string]int{"deployments": 1, "services": 1, "configmaps": 1, "networkpolicies": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, cs := newFake(t)
			d.cfg.ObserveCache = tc.cache
			t.Cleanup(d.Close)
			r1 := embeddedRev("r1")
			require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: r1.NamespaceID}))
			require.NoError(t, d.PrepareRevision(ctx, r1))
			p1, err := d.planFor(r1)
			require.NoError(t, err)
			if tc.cache {
				watching(t, d, cs, p1.gw)
			}

			// another Agent of the same Namespace: every object is new
			r2 := embeddedRev("r2")
			r2.AgentID = "a2"
			from := len(cs.Actions())
			require.NoError(t, d.PrepareRevision(ctx, r2))
			got := gets(cs, from)
			for _, kind := range []string{"deployments", "services", "configmaps", "networkpolicies"} {
				require.Equal(t, tc.want[kind], got[kind], "GETs of %s", kind)
			}
			p2, err := d.planFor(r2)
			require.NoError(t, err)
			_, err = cs.AppsV1().Deployments(p2.gw).Get(ctx, p2.n.gateway, metav1.GetOptions{})
			require.NoError(t, err, "the Gateway Deployment was created")

			// a foreign ConfigMap where a third Agent's goes
			r3 := embeddedRev("r3")
			r3.AgentID = "a3"
			p3, err := d.planFor(r3)
			require.NoError(t, err)
			cm, err := gatewayConfigMap(p3)
			require.NoError(t, err)
			_, err = cs.CoreV1().ConfigMaps(p3.gw).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace}}, metav1.CreateOptions{})
			require.NoError(t, err)
			require.ErrorIs(t, d.PrepareRevision(ctx, r3), ErrForeignWorkload)
		})
	}
}
