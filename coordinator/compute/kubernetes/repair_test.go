package kubernetes

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

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

// cachedAgent is repairedAgent with the caches on (started before any
// object, so no write falls in a fake watch's blind moment), returned once
// a repair pass needs no request; resolves counts credential resolutions.
func cachedAgent(t *testing.T) (*Driver, *fake.Clientset, state.Revision, *plan, *atomic.Int64) {
	t.Helper()
	d, cs, _ := newCachedFake(t)
	var resolves atomic.Int64
	inner := d.cfg.Credentials
	d.cfg.Credentials = CredentialsFunc(func(ctx context.Context, rev state.Revision) (map[string][]byte, error) {
		resolves.Add(1)
		return inner.Resolve(ctx, rev)
	})
	ctx := context.Background()
	rev := embeddedRev("r1")
	p, err := d.planFor(rev)
	require.NoError(t, err)
	watching(t, d, cs, p.gw, p.dp)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	require.NoError(t, d.ActivateRevision(ctx, rev))
	cachesHold(t, d, cs, p.gw, p.dp)
	rs, err := d.RepairRevision(ctx, rev) // settled from the caches alone (liveKeys)
	require.NoError(t, err)
	require.Empty(t, rs)
	return d, cs, rev, p, &resolves
}

// did reports whether cs saw verb on resource since action from.
func did(cs *fake.Clientset, from int, verb, resource string) bool {
	for _, a := range cs.Actions()[from:] {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			return true
		}
	}
	return false
}

// Repair reads from usable caches: an Agent in sync costs no request and
// no credential read; an object the caches show drifted is read again
// through the API server, which decides — a stale cache entry writes
// nothing; unusable caches send every read to the API server.
func TestRepairFromCache(t *testing.T) {
	ctx := context.Background()
	editSelector := func(svc *corev1.Service) *corev1.Service {
		svc = svc.DeepCopy()
		svc.Spec.Selector = merge(svc.Spec.Selector, map[string]string{LabelName: "elsewhere"})
		return svc
	}
	for _, tc := range []struct {
		name string
		// drift changes the cluster or the cache; it returns once the
		// caches show the change
		drift func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan)
		want  func(p *plan) []compute.Repair
		// reads: the resource read again through the API server; "":
		// no request at all
		reads      string
		writes     bool
		resolved   bool // the credential was resolved afresh
		noCacheAll bool // every object read through the API server
	}{
		{name: "in sync: no request", drift: func(*testing.T, *Driver, *fake.Clientset, *plan) {}},
		{name: "edited service seen in the cache: re-read, restored", reads: "services", writes: true,
			drift: func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) {
				svc, err := cs.CoreV1().Services(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
				require.NoError(t, err)
				_, err = cs.CoreV1().Services(p.gw).Update(ctx, editSelector(svc), metav1.UpdateOptions{})
				require.NoError(t, err)
				c := d.cacheFor(p.gw)
				require.Eventually(t, func() bool {
					s, err := c.svcL.Services(p.gw).Get(p.n.gateway)
					return err == nil && s.Spec.Selector[LabelName] == "elsewhere"
				}, 5*time.Second, 5*time.Millisecond)
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "Service", Namespace: p.gw, Name: p.n.gateway, Action: compute.RepairRestored}}
			}},
		{name: "deleted deployment seen in the cache: re-read, recreated", reads: "deployments", writes: true, resolved: true,
			drift: func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) {
				require.NoError(t, cs.AppsV1().Deployments(p.gw).Delete(ctx, p.n.gateway, metav1.DeleteOptions{}))
				c := d.cacheFor(p.gw)
				require.Eventually(t, func() bool { _, ok := c.deployment(p.gw, p.n.gateway); return !ok }, 5*time.Second, 5*time.Millisecond)
			},
			want: func(p *plan) []compute.Repair {
				return []compute.Repair{{Kind: "Deployment", Namespace: p.gw, Name: p.n.gateway, Action: compute.RepairRecreated}}
			}},
		{name: "stale cache shows an edit the API server does not: no write", reads: "services",
			drift: func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) {
				c := d.cacheFor(p.gw)
				caughtUp(t, func() (any, any) {
					s, _ := c.svcL.Services(p.gw).Get(p.n.gateway)
					api, _ := cs.CoreV1().Services(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
					return s, api
				})
				s, err := c.svcL.Services(p.gw).Get(p.n.gateway)
				require.NoError(t, err)
				require.NoError(t, c.services.GetIndexer().Update(editSelector(s)))
			}},
		{name: "stale cache misses a policy the API server has: no write", reads: "networkpolicies",
			drift: func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) {
				c := d.cacheFor(p.dp)
				caughtUp(t, func() (any, any) {
					np, _ := c.npL.NetworkPolicies(p.dp).Get(p.n.policyRuntime)
					api, _ := cs.NetworkingV1().NetworkPolicies(p.dp).Get(ctx, p.n.policyRuntime, metav1.GetOptions{})
					return np, api
				})
				np, err := c.npL.NetworkPolicies(p.dp).Get(p.n.policyRuntime)
				require.NoError(t, err)
				require.NoError(t, c.policies.GetIndexer().Delete(np))
			}},
		{name: "stale cache shows a deployment edited: no write", reads: "deployments", resolved: true,
			drift: func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) {
				c := d.cacheFor(p.gw)
				caughtUp(t, func() (any, any) {
					dep, _ := c.deployment(p.gw, p.n.gateway)
					api, _ := cs.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
					return dep, api
				})
				dep, ok := c.deployment(p.gw, p.n.gateway)
				require.True(t, ok)
				dep = dep.DeepCopy()
				dep.Spec.Template.Spec.Containers[0].Image = "evil.invalid/gw:1"
				require.NoError(t, c.deploys.GetIndexer().Update(dep))
			}},
		{name: "unusable cache: the API server answers", noCacheAll: true, resolved: true,
			drift: func(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) {
				c := d.cacheFor(p.dp)
				c.mu.Lock()
				c.watchErr = time.Now()
				c.mu.Unlock()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, cs, rev, p, resolves := cachedAgent(t)
			tc.drift(t, d, cs, p)
			n, r := len(cs.Actions()), resolves.Load()
			rs, err := d.RepairRevision(ctx, rev)
			require.NoError(t, err)
			var want []compute.Repair
			if tc.want != nil {
				want = tc.want(p)
			}
			require.Equal(t, want, rs)
			require.Equal(t, tc.writes, len(writes(cs, n)) > 0, "writes: %v", writes(cs, n))
			require.Equal(t, tc.resolved, resolves.Load() > r, "credential resolved afresh")
			switch {
			case tc.noCacheAll:
				for _, res := range []string{"services", "configmaps", "networkpolicies", "deployments"} {
					require.True(t, did(cs, n, "get", res), "get %s through the API server", res)
				}
			case tc.reads == "":
				require.Len(t, cs.Actions(), n, "no request: %v", cs.Actions()[n:])
			default:
				require.True(t, did(cs, n, "get", tc.reads), "the drifted-looking %s re-read", tc.reads)
				for _, a := range cs.Actions()[n:] {
					if a.GetVerb() == "get" {
						require.Equal(t, tc.reads, a.GetResource().Resource, "only what looks drifted is read")
					}
				}
			}
		})
	}
}

// A dedicated Agent in sync is repaired from the caches without a request
// (its pinned node from the cached node route); its Harness deleted is
// recreated through the API server.
func TestRepairDedicatedFromCache(t *testing.T) {
	ctx := context.Background()
	d, cs, st := newCachedFake(t)
	rev := dedicatedRev("d1")
	p, err := d.planFor(rev)
	require.NoError(t, err)
	watching(t, d, cs, p.gw, p.dp)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.Eventually(t, func() bool { return d.PrepareRevision(ctx, rev) == nil }, 5*time.Second, 5*time.Millisecond)
	addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	require.Eventually(t, func() bool { return d.PrepareRevision(ctx, rev) == nil }, 5*time.Second, 5*time.Millisecond) // mints the setup code
	st.enroll("node-1")
	require.NoError(t, d.PrepareRevision(ctx, rev)) // pins the node
	rollGateway(t, cs, p, "gateway-1")
	require.Eventually(t, func() bool { return d.ActivateRevision(ctx, rev) == nil }, 5*time.Second, 5*time.Millisecond)
	cachesHold(t, d, cs, p.gw, p.dp)
	_, err = d.RepairRevision(ctx, rev) // settled from the caches alone (liveKeys)
	require.NoError(t, err)
	n := len(cs.Actions())
	rs, err := d.RepairRevision(ctx, rev)
	require.NoError(t, err)
	require.Empty(t, rs)
	require.Len(t, cs.Actions(), n, "a dedicated Agent in sync costs no request: %v", cs.Actions()[n:])

	// its Gateway written from an earlier rendering (a coordinator
	// upgrade): left alone from the caches while the node a full check
	// recorded is the one the cached node route names; read through the
	// API server (and still left alone) otherwise
	gw := gatewayOf(t, cs, p.gw)
	gw.Spec.Template.Spec.Containers[0].Image = "registry.invalid/oce/gateway:old"
	gw.Annotations[AnnotationRenderedHash] = "0123456789abcdef0123456789abcdef"
	_, err = cs.AppsV1().Deployments(p.gw).Update(ctx, gw, metav1.UpdateOptions{})
	require.NoError(t, err)
	// the fake API server keeps no resource versions, so cachesHold cannot
	// tell the edit arrived: compare the objects
	gc := d.cacheFor(p.gw)
	caughtUp(t, func() (any, any) {
		c, _ := gc.depL.Deployments(p.gw).Get(p.n.gateway)
		api, _ := cs.AppsV1().Deployments(p.gw).Get(ctx, p.n.gateway, metav1.GetOptions{})
		return c, api
	})
	n = len(cs.Actions())
	rs, err = d.RepairRevision(ctx, rev)
	require.NoError(t, err)
	require.Empty(t, rs)
	require.Len(t, cs.Actions(), n, "another rendering, the node known: no request: %v", cs.Actions()[n:])
	d.mu.Lock()
	seen := d.nodeSeen[rev.ID]
	delete(d.nodeSeen, rev.ID)
	d.mu.Unlock()
	require.Equal(t, "node-1", seen)
	n = len(cs.Actions())
	rs, err = d.RepairRevision(ctx, rev)
	require.NoError(t, err)
	require.Empty(t, rs)
	require.True(t, did(cs, n, "get", "deployments"), "the node unknown: the API server decides: %v", cs.Actions()[n:])
	require.Empty(t, writes(cs, n), "and leaves another rendering alone")

	require.NoError(t, cs.AppsV1().Deployments(p.dp).Delete(ctx, p.n.harness, metav1.DeleteOptions{}))
	hc := d.cacheFor(p.dp)
	require.Eventually(t, func() bool { _, ok := hc.deployment(p.dp, p.n.harness); return !ok }, 5*time.Second, 5*time.Millisecond)
	rs, err = d.RepairRevision(ctx, rev)
	require.NoError(t, err)
	require.Equal(t, []compute.Repair{{Kind: "Deployment", Namespace: p.dp, Name: p.n.harness, Action: compute.RepairRecreated}}, rs)
}

// caughtUp waits until a cache holds the API server's current version of
// an object (the fake API server keeps no resource versions: the objects
// are compared, managed fields aside), so no watch event still in flight
// overwrites what a test then plants in the cache.
func caughtUp(t *testing.T, objects func() (cached, current any)) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, a := objects()
		cm, ok1 := c.(metav1.Object)
		am, ok2 := a.(metav1.Object)
		if !ok1 || !ok2 || reflect.ValueOf(cm).IsNil() || reflect.ValueOf(am).IsNil() {
			return false
		}
		am.SetManagedFields(nil)
		return reflect.DeepEqual(cm, am)
	}, 10*time.Second, 5*time.Millisecond, "the cache caught up with the API server")
}
