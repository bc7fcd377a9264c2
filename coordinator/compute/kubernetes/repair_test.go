package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// repairedAgent prepares and activates an embedded revision on the fake
// client, its Gateway Pod Ready.
func repairedAgent(t *testing.T) (*Driver, *fake.Clientset, state.Revision, *plan) {
	t.Helper()
	d, cs := newFake(t)
	ctx := context.Background()
	rev := embeddedRev("r1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	return d, cs, rev, p
}

// writes are the create, update, patch and delete actions the client saw
// from index from on.
func writes(cs *fake.Clientset, from int) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range cs.Actions()[from:] {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete", "deletecollection":
			out = append(out, a)
		}
	}
	return out
}

// quiet asserts that a repair pass finds nothing and writes nothing.
func quiet(t *testing.T, d *Driver, cs *fake.Clientset, rev state.Revision) {
	t.Helper()
	n := len(cs.Actions())
	rs, err := d.RepairRevision(context.Background(), rev)
	require.NoError(t, err)
	require.Empty(t, rs, "nothing drifted")
	require.Empty(t, writes(cs, n), "an in-sync Agent costs no write")
}

func TestRepairEmbedded(t *testing.T) {
	ctx := context.Background()
	type fixture struct {
		d   *Driver
		cs  *fake.Clientset
		p   *plan
		dep func() *appsv1.Deployment
	}
	editDep := func(f fixture, edit func(*appsv1.Deployment)) {
		dep := f.dep()
		edit(dep)
		_, err := f.cs.AppsV1().Deployments(f.p.gw).Update(ctx, dep, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	gwDep := func(p *plan) compute.Repair {
		return compute.Repair{Kind: "Deployment", Namespace: p.gw, Name: p.n.gateway}
	}
	for _, tc := range []struct {
		name   string
		drift  func(f fixture)
		want   func(p *plan) []compute.Repair // actions set below
		action string
	}{
		{name: "nothing drifted", drift: func(fixture) {}},
		{name: "deployment deleted", action: compute.RepairRecreated,
			drift: func(f fixture) {
				require.NoError(t, f.cs.AppsV1().Deployments(f.p.gw).Delete(ctx, f.p.n.gateway, metav1.DeleteOptions{}))
			},
			want: func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "replicas edited", action: compute.RepairRestored,
			drift: func(f fixture) { editDep(f, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(0)) }) },
			want:  func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "image edited", action: compute.RepairRestored,
			drift: func(f fixture) {
				editDep(f, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "evil.invalid/gw:1" })
			},
			want: func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "env added", action: compute.RepairRestored,
			drift: func(f fixture) {
				editDep(f, func(d *appsv1.Deployment) {
					c := &d.Spec.Template.Spec.Containers[0]
					c.Env = append(c.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
				})
			},
			want: func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "node selector added", action: compute.RepairRestored,
			drift: func(f fixture) {
				editDep(f, func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "other"} })
			},
			want: func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "host network added", action: compute.RepairRestored,
			drift: func(f fixture) { editDep(f, func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }) },
			want:  func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "service selector edited", action: compute.RepairRestored,
			drift: func(f fixture) {
				svc, err := f.cs.CoreV1().Services(f.p.gw).Get(ctx, f.p.n.gateway, metav1.GetOptions{})
				require.NoError(t, err)
				svc.Spec.Selector[LabelName] = "elsewhere"
				_, err = f.cs.CoreV1().Services(f.p.gw).Update(ctx, svc, metav1.UpdateOptions{})
				require.NoError(t, err)
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "Service", Namespace: p.gw, Name: p.n.gateway}}
			}},
		{name: "configmap deleted", action: compute.RepairRecreated,
			drift: func(f fixture) {
				require.NoError(t, f.cs.CoreV1().ConfigMaps(f.p.gw).Delete(ctx, f.p.n.gatewayConfig, metav1.DeleteOptions{}))
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "ConfigMap", Namespace: p.gw, Name: p.n.gatewayConfig}}
			}},
		{name: "immutable configmap replaced by hand", action: compute.RepairRestored,
			drift: func(f fixture) {
				cm, err := f.cs.CoreV1().ConfigMaps(f.p.gw).Get(ctx, f.p.n.gatewayConfig, metav1.GetOptions{})
				require.NoError(t, err)
				cm.Data = map[string]string{configKeyGateway: `{"gateway":{"mode":"evil"}}`}
				require.NoError(t, f.cs.CoreV1().ConfigMaps(f.p.gw).Delete(ctx, cm.Name, metav1.DeleteOptions{}))
				cm.ResourceVersion = ""
				_, err = f.cs.CoreV1().ConfigMaps(f.p.gw).Create(ctx, cm, metav1.CreateOptions{})
				require.NoError(t, err)
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "ConfigMap", Namespace: p.gw, Name: p.n.gatewayConfig}}
			}},
		{name: "policy rules edited", action: compute.RepairRestored,
			drift: func(f fixture) {
				np, err := f.cs.NetworkingV1().NetworkPolicies(f.p.dp).Get(ctx, f.p.n.policyRuntime, metav1.GetOptions{})
				require.NoError(t, err)
				np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{}) // allow all
				_, err = f.cs.NetworkingV1().NetworkPolicies(f.p.dp).Update(ctx, np, metav1.UpdateOptions{})
				require.NoError(t, err)
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "NetworkPolicy", Namespace: p.dp, Name: p.n.policyRuntime}}
			}},
		{name: "policy deleted", action: compute.RepairRecreated,
			drift: func(f fixture) {
				require.NoError(t, f.cs.NetworkingV1().NetworkPolicies(f.p.gw).Delete(ctx, f.p.n.policyGateway, metav1.DeleteOptions{}))
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "NetworkPolicy", Namespace: p.gw, Name: p.n.policyGateway}}
			}},
		{name: "fields the API server defaults or others add", drift: func(f fixture) {
			editDep(f, func(d *appsv1.Deployment) {
				d.Spec.RevisionHistoryLimit, d.Spec.ProgressDeadlineSeconds = ptr(int32(10)), ptr(int32(600))
				d.Labels["team.example/cost-center"] = "42"
				d.Annotations["deployment.kubernetes.io/revision"] = "3"
				tpl := &d.Spec.Template
				tpl.Annotations = merge(tpl.Annotations, map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-04T10:00:00Z"})
				tpl.Spec.DNSPolicy, tpl.Spec.RestartPolicy, tpl.Spec.SchedulerName = corev1.DNSClusterFirst, corev1.RestartPolicyAlways, "default-scheduler"
				tpl.Spec.DeprecatedServiceAccount = tpl.Spec.ServiceAccountName
				c := &tpl.Spec.Containers[0]
				c.ImagePullPolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
				c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
				for i := range c.Ports {
					c.Ports[i].Protocol = corev1.ProtocolTCP
				}
				c.ReadinessProbe.InitialDelaySeconds = 0
			})
			svc, err := f.cs.CoreV1().Services(f.p.gw).Get(ctx, f.p.n.gateway, metav1.GetOptions{})
			require.NoError(t, err)
			svc.Spec.SessionAffinity, svc.Spec.IPFamilies = corev1.ServiceAffinityNone, []corev1.IPFamily{corev1.IPv4Protocol}
			svc.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
			_, err = f.cs.CoreV1().Services(f.p.gw).Update(ctx, svc, metav1.UpdateOptions{})
			require.NoError(t, err)
		}},
		{name: "foreign object in the way", action: compute.RepairForeign,
			drift: func(f fixture) {
				require.NoError(t, f.cs.AppsV1().Deployments(f.p.gw).Delete(ctx, f.p.n.gateway, metav1.DeleteOptions{}))
				_, err := f.cs.AppsV1().Deployments(f.p.gw).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
					Name: f.p.n.gateway, Namespace: f.p.gw, Labels: map[string]string{"app": "theirs"}}}, metav1.CreateOptions{})
				require.NoError(t, err)
			},
			want: func(p *plan) []compute.Repair { return []compute.Repair{gwDep(p)} }},
		{name: "written from an earlier rendering", drift: func(f fixture) {
			// An earlier release rendered another image: not an edit.
			editDep(f, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/oce/gateway:old"
				d.Annotations[AnnotationRenderedHash] = "0123456789abcdef0123456789abcdef"
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, cs, rev, p := repairedAgent(t)
			f := fixture{d: d, cs: cs, p: p, dep: func() *appsv1.Deployment { return gatewayOf(t, cs, p.gw) }}
			before := f.dep()
			tc.drift(f)
			n := len(cs.Actions())
			rs, err := d.RepairRevision(ctx, rev)
			require.NoError(t, err)
			var want []compute.Repair
			if tc.want != nil {
				want = tc.want(p)
			}
			for i := range want {
				want[i].Action = tc.action
			}
			require.Equal(t, want, rs)
			for _, a := range writes(cs, n) {
				require.NotEqual(t, "persistentvolumeclaims", a.GetResource().Resource, "claims are never touched")
				require.NotEqual(t, "secrets", a.GetResource().Resource, "secrets are never touched")
			}
			if tc.action == compute.RepairForeign {
				require.Equal(t, "theirs", f.dep().Labels["app"], "a foreign object is not overwritten")
				return
			}
			if tc.action != "" {
				require.NotEmpty(t, writes(cs, n))
				// What was repaired is the rendering again.
				after := f.dep()
				require.Equal(t, before.Spec, after.Spec, "the Gateway is activation's rendering")
				require.Equal(t, before.Labels, after.Labels)
				require.True(t, inSync(after, before))
				svc, err := cs.CoreV1().Services(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
				require.NoError(t, err)
				require.Equal(t, gatewayServiceSelector(p, true), svc.Spec.Selector)
				cm, err := cs.CoreV1().ConfigMaps(p.gw).Get(ctx, p.n.gatewayConfig, metav1.GetOptions{})
				require.NoError(t, err)
				wantCM, err := gatewayConfigMap(p)
				require.NoError(t, err)
				require.Equal(t, wantCM.Data, cm.Data)
				for _, np := range d.revisionPolicies(p) {
					live, err := cs.NetworkingV1().NetworkPolicies(np.Namespace).Get(ctx, np.Name, metav1.GetOptions{})
					require.NoError(t, err)
					require.Equal(t, np.Spec, live.Spec)
				}
			}
			quiet(t, d, cs, rev) // a second pass changes nothing
		})
	}
}

// TestRepairRecreatesTheRendering: a recreated Gateway is exactly what
// activation rendered, stamped. (A stopped revision is never repaired: the
// engine repairs only an active revision with no work open.)
func TestRepairRecreatesTheRendering(t *testing.T) {
	ctx := context.Background()
	d, cs, rev, p := repairedAgent(t)
	require.NoError(t, cs.AppsV1().Deployments(p.gw).Delete(ctx, p.n.gateway, metav1.DeleteOptions{}))
	_, err := d.RepairRevision(ctx, rev)
	require.NoError(t, err)
	_, keys, err := d.credentials(ctx, rev)
	require.NoError(t, err)
	want := d.gatewayDeployment(p, keys, "", "")
	stamp(want)
	got := gatewayOf(t, cs, p.gw)
	require.Equal(t, want.Spec, got.Spec)
	require.Equal(t, want.Labels, got.Labels)
	require.Equal(t, want.Annotations, got.Annotations)
}

// TestRepairLeavesAnotherRevisionsGateway: while a newer revision's
// activation switched the Gateway, the older one's repair does not switch
// it back.
func TestRepairLeavesAnotherRevisionsGateway(t *testing.T) {
	ctx := context.Background()
	d, cs, r1, p := repairedAgent(t)
	r2 := embeddedRev("r2")
	require.NoError(t, d.PrepareRevision(ctx, r2))
	require.NoError(t, d.ActivateRevision(ctx, r2))
	require.Equal(t, "r2", gatewayOf(t, cs, p.gw).Labels[LabelRevision])
	n := len(cs.Actions())
	_, err := d.RepairRevision(ctx, r1)
	require.NoError(t, err)
	require.Equal(t, "r2", gatewayOf(t, cs, p.gw).Labels[LabelRevision])
	for _, a := range writes(cs, n) {
		require.NotEqual(t, "deployments", a.GetResource().Resource, "r2's Gateway is not r1's to repair")
	}
	quiet(t, d, cs, r2)
}

func TestRepairDedicated(t *testing.T) {
	ctx := context.Background()
	d, cs, st := newFakeStatus(t)
	rev := dedicatedRev("d1")
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev)) // mints the setup code
	st.enroll("node-1")
	require.NoError(t, d.PrepareRevision(ctx, rev)) // pins the node
	rollGateway(t, cs, p, "gateway-1")
	require.NoError(t, d.ActivateRevision(ctx, rev))
	quiet(t, d, cs, rev)

	gw, h := gatewayOf(t, cs, p.gw), harnessOf(t, cs, p)
	require.Equal(t, "node-1", podEnv(gw.Spec.Template.Spec, contract.EnvWorkspaceNodeID))
	require.NoError(t, cs.AppsV1().Deployments(p.gw).Delete(ctx, p.n.gateway, metav1.DeleteOptions{}))
	require.NoError(t, cs.AppsV1().Deployments(p.dp).Delete(ctx, p.n.harness, metav1.DeleteOptions{}))
	require.NoError(t, cs.CoreV1().Services(p.dp).Delete(ctx, p.n.harness, metav1.DeleteOptions{}))
	rs, err := d.RepairRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, []compute.Repair{
		{Kind: "Service", Namespace: p.dp, Name: p.n.harness, Action: compute.RepairRecreated},
		{Kind: "Deployment", Namespace: p.dp, Name: p.n.harness, Action: compute.RepairRecreated},
		{Kind: "Deployment", Namespace: p.gw, Name: p.n.gateway, Action: compute.RepairRecreated},
	}, rs)
	require.Equal(t, gw.Spec, gatewayOf(t, cs, p.gw).Spec, "recreated pinned to the enrolled node")
	require.Equal(t, h.Spec, harnessOf(t, cs, p).Spec)
	quiet(t, d, cs, rev)
}

func harnessOf(t *testing.T, cs *fake.Clientset, p *plan) *appsv1.Deployment {
	t.Helper()
	dep, err := cs.AppsV1().Deployments(p.dp).Get(context.Background(), p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	return dep
}

// TestCarries pins the comparison rules: what the API server adds is not
// drift; what oce renders, and selectors and data exactly, are.
func TestCarries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		live, want any
		ok         bool
	}{
		{"added field", map[string]any{"a": "x", "b": "y"}, map[string]any{"a": "x", "n": map[string]any{"k": 1.0}}, false},
		{"server default", map[string]any{"a": "x", "b": "y", "n": map[string]any{"k": 1.0, "z": true}}, map[string]any{"a": "x", "n": map[string]any{"k": 1.0}}, true},
		{"changed value", map[string]any{"a": "y"}, map[string]any{"a": "x"}, false},
		{"longer list", []any{"a", "b"}, []any{"a"}, false},
		{"selector key added", map[string]any{"selector": map[string]any{"a": "1", "b": "2"}}, map[string]any{"selector": map[string]any{"a": "1"}}, false},
		{"label added", map[string]any{"labels": map[string]any{"a": "1", "b": "2"}}, map[string]any{"labels": map[string]any{"a": "1"}}, true},
		{"unset by oce", map[string]any{"a": "x"}, map[string]any{"a": "x", "p": nil}, true},
		{"empty rendered map", map[string]any{}, map[string]any{"m": map[string]any{}}, true},
		{"must stay empty", map[string]any{"m": map[string]any{"a": "1"}}, map[string]any{"m": map[string]any{}}, false},
		{"false omitted", map[string]any{}, map[string]any{"b": false}, true},
		{"false set true", map[string]any{"b": true}, map[string]any{"b": false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, carries(tc.live, tc.want, ""))
		})
	}
}
