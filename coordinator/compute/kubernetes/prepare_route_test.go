package kubernetes

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"oce.dev/oce/coordinator/state"
)

// The Agent's Gateway Service is off the way to the Gateway Pod: when its
// create fails, the new Agent's Gateway Deployment is created in the same
// pass all the same, and the revision is not prepared — the pass fails,
// and the next one creates the Service and completes it (activation routes
// through the Service). The baseline that created the Service first
// (SetPrepareServiceFirst, and one after another) creates no Deployment
// while the Service is missing. Both for embedded and dedicated Agents, a
// dedicated one's Gateway waiting on its Harness as before.
func TestGatewayServiceIsOffThePodsWay(t *testing.T) {
	for _, tc := range []struct {
		name            string
		rev             state.Revision
		serviceFirst    bool
		oneByOne        bool
		deploymentFirst bool // the failed pass created the Gateway Deployment
	}{
		{"embedded", embeddedRev("r1"), false, false, true},
		{"embedded, service first", embeddedRev("r1"), true, false, false},
		{"embedded, one by one", embeddedRev("r1"), false, true, false},
		{"dedicated", dedicatedRev("r1"), false, false, false}, // its Gateway waits for the Harness Pod
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, cs := newFake(t)
			d.SetPrepareServiceFirst(tc.serviceFirst)
			d.SetPrepareOneByOne(tc.oneByOne)
			p, err := d.planFor(tc.rev)
			require.NoError(t, err)
			require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: tc.rev.NamespaceID}))

			refused := errors.New("service create refused")
			failing := true
			cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if failing && a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() == p.n.gateway {
					return true, nil, apierrors.NewInternalError(refused)
				}
				return false, nil, nil
			})
			require.Error(t, d.PrepareRevision(ctx, tc.rev), "a missing Gateway Service fails the pass")
			_, err = cs.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
			if tc.deploymentFirst {
				require.NoError(t, err, "the Gateway Deployment did not wait for its Service")
			} else {
				require.True(t, apierrors.IsNotFound(err), "%v", err)
			}
			require.Less(t, d.preparedLevel(tc.rev.ID), levelRouted)
			_, err = cs.CoreV1().Services(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "%v", err)

			failing = false
			require.NoError(t, d.PrepareRevision(ctx, tc.rev))
			svc, err := cs.CoreV1().Services(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
			require.NoError(t, err, "the next pass created the Gateway Service")
			require.Equal(t, gatewayServiceSelector(p, false), svc.Spec.Selector, "inactive until activation")
			require.GreaterOrEqual(t, d.preparedLevel(tc.rev.ID), levelRouted)
			if tc.rev.Mode == state.ModeEmbedded {
				require.Equal(t, levelComplete, d.preparedLevel(tc.rev.ID))
				gatewayOf(t, cs, p.gw)
			}
		})
	}
}
