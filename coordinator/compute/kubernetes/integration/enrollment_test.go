package integration

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
)

// fakeGateway stands in for the dedicated Gateways' status routes (kwok
// runs no containers). Per Agent Gateway (namespace/service) it counts the
// setup codes minted; with auto set, a node connects as soon as a code was
// minted for its Gateway, and stays enrolled across revisions (its device
// token lives on the workspace claim).
type fakeGateway struct {
	mu       sync.Mutex
	auto     bool
	mints    map[string]int
	enrolled map[string]bool
}

func newFakeGateway(auto bool) *fakeGateway {
	return &fakeGateway{auto: auto, mints: map[string]int{}, enrolled: map[string]bool{}}
}

func gwKey(gw kdriver.Endpoint) string { return gw.Namespace + "/" + gw.Service }

func (f *fakeGateway) SetupCode(_ context.Context, _ state.Revision, gw kdriver.Endpoint) (string, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mints[gwKey(gw)]++
	if f.auto {
		f.enrolled[gwKey(gw)] = true
	}
	return "setup-" + strconv.Itoa(f.mints[gwKey(gw)]), time.Now().Add(10 * time.Minute).UnixMilli(), nil
}

func (f *fakeGateway) Nodes(_ context.Context, _ state.Revision, gw kdriver.Endpoint) ([]kdriver.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.enrolled[gwKey(gw)] {
		return nil, nil
	}
	return []kdriver.Node{{NodeID: "node-" + gw.Service, Connected: true}}, nil
}

func (f *fakeGateway) enroll(ns, svc string) {
	f.mu.Lock()
	f.enrolled[ns+"/"+svc] = true
	f.mu.Unlock()
}

func (f *fakeGateway) minted(ns, svc string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mints[ns+"/"+svc]
}

func newDriverWith(t testing.TB, cs kubernetes.Interface, st kdriver.GatewayStatus) *kdriver.Driver {
	t.Helper()
	d, err := kdriver.New(driverConfig(st), cs)
	require.NoError(t, err)
	return d
}

// TestDedicatedEnrollmentFlow drives a dedicated revision through the
// workspace node enrollment against the real API server: a single setup
// code in the revision-owned Secret, not ready until the node connects,
// then ready with the node recorded and the code removed.
func TestDedicatedEnrollmentFlow(t *testing.T) {
	ctx := context.Background()
	st := newFakeGateway(false)
	d := newDriverWith(t, env.Client, st)
	nsID, agentID := uid("ns-enr"), uid("a")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
	rev := revision(nsID, agentID, uid("r"), state.ModeDedicated)
	dp, gw := kdriver.DataPlaneNamespace(nsID), kdriver.GatewayNamespace(nsID)

	var obs string
	require.Eventually(t, func() bool {
		if err := d.PrepareRevision(ctx, rev); err != nil {
			obs = err.Error()
			return false
		}
		o, err := d.ObserveRevision(ctx, rev)
		if err != nil {
			obs = err.Error()
			return false
		}
		obs = o.Reason
		return o.Reason == kdriver.ReasonNodeNotEnrolled
	}, 60*time.Second, 20*time.Millisecond, "last: %s", obs)
	gws, err := env.Client.AppsV1().Deployments(gw).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, gws.Items, 1)
	gwSvc := gws.Items[0].Name
	require.NoError(t, d.PrepareRevision(ctx, rev)) // the Gateway is ready: this pass mints
	require.Equal(t, 1, st.minted(gw, gwSvc))
	for range 3 {
		require.NoError(t, d.PrepareRevision(ctx, rev))
	}
	require.Equal(t, 1, st.minted(gw, gwSvc), "no second code while the first is valid")
	require.ErrorIs(t, d.ActivateRevision(ctx, rev), kdriver.ErrNotReady)

	secrets, err := env.Client.CoreV1().Secrets(dp).List(ctx, metav1.ListOptions{LabelSelector: sel(kdriver.LabelRevision, rev.ID)})
	require.NoError(t, err)
	var name string
	for _, s := range secrets.Items {
		if len(s.Data[kdriver.KeySetupCode]) > 0 {
			name = s.Name
			require.Equal(t, "setup-1", string(s.Data[kdriver.KeySetupCode]))
			require.NotEmpty(t, s.Data[kdriver.KeyExpiresAtMs])
			require.NotEmpty(t, s.Data[kdriver.KeySetupID])
		}
	}
	require.NotEmpty(t, name, "the revision-owned enrollment Secret holds the code")

	st.enroll(gw, gwSvc)
	prepareUntilReady(t, d, rev)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	s, err := env.Client.CoreV1().Secrets(dp).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, s.Data, kdriver.KeySetupCode, "the consumed code is removed")
	require.Equal(t, "node-"+gwSvc, s.Annotations[kdriver.AnnotationWorkspaceNode])
	require.Equal(t, 1, st.minted(gw, gwSvc))
}
