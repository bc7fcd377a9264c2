package kubernetes

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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

// firstAgentPrepared is a driver whose Namespace ns1 holds one prepared
// embedded Agent (a1, revision r1), the namespace's caches running when
// cache is set.
func firstAgentPrepared(t testing.TB, cache bool) (*Driver, *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	d, cs, _ := newFakeStatus(t)
	d.cfg.ObserveCache = cache
	t.Cleanup(d.Close)
	r1 := embeddedRev("r1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: r1.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, r1))
	p1, err := d.planFor(r1)
	require.NoError(t, err)
	if cache {
		watching(t, d, cs, p1.gw)
	}
	return d, cs
}

// A revision prepared where the namespace's caches run creates the cached
// kinds its caches do not hold without reading them first, a new Agent's
// Gateway Deployment among them — and, the cache holding no Gateway of the
// Agent, its identity, password Secret and claim too; without caches every
// object is read, then created, but the revision's own credential Secret
// (new with its revision). A later revision of the same Agent reads the
// Agent's objects it finds. A foreign object the caches cannot
// hold is still found: its create fails AlreadyExists and the read that
// follows refuses it.
func TestPrepareCreatesWhatTheCacheLacksWithoutReading(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache bool
		want  map[string]int // GETs of the cached kinds
	}{
		{"caches running", true, map[string]int{}},
		{"no caches", false, map[string]int{"deployments": 1, "services": 1, "configmaps": 1, "networkpolicies": 2,
			"serviceaccounts": 1, "secrets": 1, "persistentvolumeclaims": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, cs := firstAgentPrepared(t, tc.cache)

			// another Agent of the same Namespace: every object is new
			r2 := embeddedRev("r2")
			r2.AgentID = "a2"
			from := len(cs.Actions())
			require.NoError(t, d.PrepareRevision(ctx, r2))
			got := gets(cs, from)
			for _, kind := range agentKinds {
				require.Equal(t, tc.want[kind], got[kind], "GETs of %s", kind)
			}
			p2, err := d.planFor(r2)
			require.NoError(t, err)
			_, err = cs.AppsV1().Deployments(p2.gw).Get(ctx, p2.n.gateway, metav1.GetOptions{})
			require.NoError(t, err, "the Gateway Deployment was created")

			// the Agent's next revision: its Agent-owned objects exist
			// and are read, not created
			r2b := r2
			r2b.ID = "r2b"
			if tc.cache {
				pb, err := d.planFor(r2b)
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					return !d.gatewayAbsent(pb)
				},
					5*time.Second, 5*time.Millisecond, "the cache holds the Gateway")
			}
			from = len(cs.Actions())
			require.NoError(t, d.PrepareRevision(ctx, r2b))
			got = gets(cs, from)
			for _, kind := range []string{"serviceaccounts", "persistentvolumeclaims"} {
				require.Equal(t, 1, got[kind], "GETs of %s", kind)
			}
			for _, a := range cs.Actions()[from:] {
				if a.GetVerb() == "create" {
					require.NotContains(t, []string{"serviceaccounts", "persistentvolumeclaims"}, a.GetResource().Resource, "an existing Agent object created again")
				}
			}

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

// agentKinds are the kinds whose reads TestPrepareCreatesWhatTheCacheLacksWithoutReading counts.
var agentKinds = []string{"deployments", "services", "configmaps", "networkpolicies", "serviceaccounts", "secrets", "persistentvolumeclaims"}

// A Gateway Deployment the synced cache does not hold yet (a stale cache)
// is still found: the create fails AlreadyExists, the read that follows
// takes the usual path — a Deployment of the Agent's other revision is
// staged (a probe, not replaced), a foreign one is refused.
func TestPrepareGatewayStaleCacheFallsBackToRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		foreign bool
		want    error
	}{
		{"the Agent's other revision", false, nil},
		{"a foreign Deployment", true, ErrForeignWorkload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, cs := firstAgentPrepared(t, true)

			// a second Agent whose Gateway Deployment exists in the API
			// server only: the cache has not seen it
			r2 := embeddedRev("r2")
			r2.AgentID = "a2"
			p2, err := d.planFor(r2)
			require.NoError(t, err)
			r0 := r2
			r0.ID = "r0"
			p0, err := d.planFor(r0)
			require.NoError(t, err)
			existing := d.gatewayDeployment(p0, nil, "", "")
			if tc.foreign {
				existing.Labels, existing.Annotations = nil, nil
			}
			require.Equal(t, p2.n.gateway, existing.Name)
			creates := 0
			cs.PrependReactor("create", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() != existing.Name {
					return false, nil, nil
				}
				creates++
				return true, nil, apierrors.NewAlreadyExists(appsv1.Resource("deployments"), existing.Name)
			})
			cs.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.GetAction).GetName() != existing.Name {
					return false, nil, nil
				}
				return true, existing.DeepCopy(), nil
			})
			from := len(cs.Actions())
			err = d.PrepareRevision(ctx, r2)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, 1, creates, "the create was tried once, the cache lacking the Deployment")
			require.Equal(t, 1, gets(cs, from)["deployments"], "then the Deployment was read")
		})
	}
}
