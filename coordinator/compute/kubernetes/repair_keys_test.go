package kubernetes

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// keysAgent deploys rev (embedded or dedicated Codex) on a fake client,
// without caches, its credential resolving to data.
func keysAgent(t *testing.T, rev state.Revision, data map[string][]byte) (*Driver, *fake.Clientset, *plan) {
	t.Helper()
	ctx := context.Background()
	d, cs, st := newFakeStatus(t)
	d.cfg.Credentials = CredentialsFunc(func(context.Context, state.Revision) (map[string][]byte, error) { return data, nil })
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	if p.topo == contract.DedicatedCodex {
		addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
		require.NoError(t, d.PrepareRevision(ctx, rev))
		addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
		require.NoError(t, d.PrepareRevision(ctx, rev)) // mints the setup code
		st.enroll("node-1")
		require.NoError(t, d.PrepareRevision(ctx, rev)) // pins the node
		rollGateway(t, cs, p, "gateway-1")
	} else {
		addPod(t, cs, p.gw, "gateway-0", p.gatewayWantLabels(), true)
	}
	require.NoError(t, d.ActivateRevision(ctx, rev))
	quiet(t, d, cs, rev)
	return d, cs, p
}

// freshDriver is a driver on cs as a coordinator starts it (or a new
// leader): caches on and held, nothing memoized; resolves counts its
// credential resolutions.
func freshDriver(t *testing.T, d *Driver, cs *fake.Clientset, p *plan) (*Driver, *atomic.Int64) {
	t.Helper()
	var resolves atomic.Int64
	cfg := d.cfg
	cfg.ObserveCache = true
	inner := d.cfg.Credentials
	cfg.Credentials = CredentialsFunc(func(ctx context.Context, rev state.Revision) (map[string][]byte, error) {
		resolves.Add(1)
		return inner.Resolve(ctx, rev)
	})
	fresh, err := New(cfg, cs)
	require.NoError(t, err)
	t.Cleanup(fresh.Close)
	require.NotNil(t, fresh.cacheFor(p.gw))
	require.NotNil(t, fresh.cacheFor(p.dp))
	require.True(t, fresh.WaitForCaches(context.Background()))
	cachesHold(t, fresh, cs, p.gw, p.dp)
	require.NotNil(t, fresh.usableCache(p.gw))
	require.NotNil(t, fresh.usableCache(p.dp))
	return fresh, &resolves
}

// projectedKeys are the keys dep projects from the Agent's credential.
func projectedKeys(dep *appsv1.Deployment, p *plan) []string {
	return liveKeys(dep, p.n.harnessSecrets)
}

// dropKey removes key from dep's projected credential items, as a hand
// edit does.
func dropKey(dep *appsv1.Deployment, p *plan, key string) {
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name != "secrets" || v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil || src.Secret.Name != p.n.harnessSecrets {
				continue
			}
			items := src.Secret.Items[:0]
			for _, it := range src.Secret.Items {
				if it.Key != key {
					items = append(items, it)
				}
			}
			src.Secret.Items = items
		}
	}
}

// The first repair pass of a coordinator (or a new leader) settles an
// in-sync Agent from the caches alone: the cached Deployment's own keys
// render it, so the credential is not read. Whatever the caches cannot
// settle that way still reaches the credential and the API server.
func TestRepairKeysFromLiveDeployment(t *testing.T) {
	ctx := context.Background()
	twoEmbedded := map[string][]byte{contract.SecretModelAPIKey: []byte("sk-a"), "anthropic-api-key": []byte("sk-b")}
	twoCodex := map[string][]byte{contract.SecretOpenAIAPIKey: []byte("sk-a"), contract.SecretCodexAccessToken: []byte("tok")}
	// deployment names the Deployment a case edits and checks.
	gateway := func(p *plan) (string, string) { return p.gw, p.n.gateway }
	harness := func(p *plan) (string, string) { return p.dp, p.n.harness }
	for _, tc := range []struct {
		name       string
		rev        state.Revision
		data       map[string][]byte
		deployment func(p *plan) (ns, name string)
		// edit changes the Deployment before the coordinator starts
		edit     func(dep *appsv1.Deployment, p *plan)
		wantKeys []string // the Deployment's projected keys after the pass
		resolves int64
		requests bool // any request to the API server
		action   string
	}{
		{name: "embedded in sync: no credential read, no request", rev: embeddedRev("r1"), data: twoEmbedded,
			deployment: gateway, wantKeys: []string{"anthropic-api-key", contract.SecretModelAPIKey}},
		{name: "embedded without a credential: no keys projected, no read", rev: embeddedRev("r1"), data: map[string][]byte{},
			deployment: gateway},
		{name: "dedicated Codex in sync: no credential read, no request", rev: dedicatedRev("d1"), data: twoCodex,
			deployment: harness, wantKeys: []string{contract.SecretCodexAccessToken, contract.SecretOpenAIAPIKey}},
		{name: "embedded key removed by hand: resolved, restored", rev: embeddedRev("r1"), data: twoEmbedded,
			deployment: gateway, edit: func(dep *appsv1.Deployment, p *plan) { dropKey(dep, p, "anthropic-api-key") },
			wantKeys: []string{"anthropic-api-key", contract.SecretModelAPIKey}, resolves: 1, requests: true, action: compute.RepairRestored},
		{name: "dedicated Harness key removed by hand: resolved, restored", rev: dedicatedRev("d1"), data: twoCodex,
			deployment: harness, edit: func(dep *appsv1.Deployment, p *plan) { dropKey(dep, p, contract.SecretOpenAIAPIKey) },
			wantKeys: []string{contract.SecretCodexAccessToken, contract.SecretOpenAIAPIKey}, resolves: 1, requests: true, action: compute.RepairRestored},
		{name: "another rendering's keys: resolved, left alone", rev: embeddedRev("r1"), data: twoEmbedded,
			deployment: gateway, edit: func(dep *appsv1.Deployment, p *plan) {
				dropKey(dep, p, "anthropic-api-key")
				dep.Annotations[AnnotationRenderedHash] = "0123456789abcdef0123456789abcdef"
			},
			wantKeys: []string{contract.SecretModelAPIKey}, resolves: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, cs, p := keysAgent(t, tc.rev, tc.data)
			ns, name := tc.deployment(p)
			if tc.edit != nil {
				dep, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				tc.edit(dep, p)
				_, err = cs.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			before, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			fresh, resolves := freshDriver(t, d, cs, p)
			n := len(cs.Actions())
			rs, err := fresh.RepairRevision(ctx, tc.rev)
			require.NoError(t, err)
			var want []compute.Repair
			if tc.action != "" {
				want = []compute.Repair{{Kind: "Deployment", Namespace: ns, Name: name, Action: tc.action}}
			}
			require.Equal(t, want, rs)
			require.Equal(t, tc.resolves, resolves.Load(), "credential resolutions")
			if tc.requests {
				require.NotEmpty(t, writes(cs, n), "restored through the API server")
			} else {
				require.Len(t, cs.Actions(), n, "no request: %v", cs.Actions()[n:])
			}
			after, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.wantKeys, nilIfEmpty(projectedKeys(after, p)))
			if tc.action == "" {
				require.Equal(t, before.ResourceVersion, after.ResourceVersion, "left as it was")
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestLiveKeys pins what liveKeys reads: the named Secret's items in the
// secrets volume, in their order, and nothing else.
func TestLiveKeys(t *testing.T) {
	dep := func(vols ...corev1.Volume) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: vols}}}}
	}
	secrets := func(srcs ...corev1.VolumeProjection) corev1.Volume {
		return corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: srcs}}}
	}
	for _, tc := range []struct {
		name string
		dep  *appsv1.Deployment
		want []string
	}{
		{"no volumes", dep(), nil},
		{"no credential source", dep(secrets(projected("pw", "a", "b"))), nil},
		{"the credential's items in order", dep(secrets(projected("pw", "x"), projected("creds", "z", "a"))), []string{"z", "a"}},
		{"another volume's source is not the credential", dep(corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{projected("creds", "a")}}}}), nil},
		{"a source without items", dep(secrets(projected("creds"))), []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, liveKeys(tc.dep, "creds"))
		})
	}
}
