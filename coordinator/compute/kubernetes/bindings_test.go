package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/harnessd"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// TestAdvertisedBindingsAreHarnessLoginModes: dedicated Codex advertises
// exactly the login modes harnessd accepts (CODEX_LOGIN_MODE), nothing it
// would reject at start.
func TestAdvertisedBindingsAreHarnessLoginModes(t *testing.T) {
	d, _ := newFake(t)
	got := d.Capabilities().Topologies[contract.DedicatedCodex]
	require.ElementsMatch(t, []string{harnessd.LoginAPIKey, harnessd.LoginCodexPAT, harnessd.LoginServiceAccount}, got)
}

// TestServiceAccountLoginRendersWorkspaceID: a chatgpt_service_account
// revision gets CODEX_LOGIN_MODE and CODEX_CHATGPT_WORKSPACE_ID (from its
// model Secret, not projected as a file); without a workspace id it fails
// closed before any workload exists.
func TestServiceAccountLoginRendersWorkspaceID(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		data map[string][]byte
		ok   bool
	}{
		{"with workspace", map[string][]byte{contract.SecretCodexAccessToken: []byte("at-test"), contract.SecretCodexWorkspaceID: []byte("ws-123")}, true},
		{"without workspace", map[string][]byte{contract.SecretCodexAccessToken: []byte("at-test")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newClientset()
			d, err := New(Config{GatewayImage: "g", HarnessImage: "h", GatewayStatus: &fakeStatus{},
				Credentials: CredentialsFunc(func(context.Context, state.Revision) (map[string][]byte, error) { return tc.data, nil })}, cs)
			require.NoError(t, err)
			require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
			rev := dedicatedRev("r1")
			rev.HarnessAuth = &state.HarnessAuth{Method: contract.LoginServiceAccount, CredentialKind: "service_account", SourceRef: "secret:sa#token"}
			err = d.PrepareRevision(ctx, rev)
			n := namesFor("a1", "r1")
			if !tc.ok {
				code, permanent := compute.ErrorCode(err, "")
				require.Equal(t, codes.HarnessAuthRequired, code)
				require.True(t, permanent)
				_, gerr := cs.AppsV1().Deployments(DataPlaneNamespace("ns1")).Get(ctx, n.harness, metav1.GetOptions{})
				require.Error(t, gerr, "no Harness without its workspace id")
				return
			}
			require.NoError(t, err)
			dep, err := cs.AppsV1().Deployments(DataPlaneNamespace("ns1")).Get(ctx, n.harness, metav1.GetOptions{})
			require.NoError(t, err)
			c := dep.Spec.Template.Spec.Containers[0]
			vals := map[string]string{}
			for _, e := range c.Env {
				vals[e.Name] = e.Value
				if e.Name == harnessd.EnvWorkspaceID {
					require.NotNil(t, e.ValueFrom)
					require.Equal(t, n.harnessSecrets, e.ValueFrom.SecretKeyRef.Name)
					require.Equal(t, contract.SecretCodexWorkspaceID, e.ValueFrom.SecretKeyRef.Key)
					vals[e.Name] = "from-secret"
				}
			}
			require.Equal(t, harnessd.LoginServiceAccount, vals[harnessd.EnvLoginMode])
			require.Equal(t, "from-secret", vals[harnessd.EnvWorkspaceID])
			sec, err := cs.CoreV1().Secrets(DataPlaneNamespace("ns1")).Get(ctx, n.harnessSecrets, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, "ws-123", string(sec.Data[contract.SecretCodexWorkspaceID]))
			for _, v := range dep.Spec.Template.Spec.Volumes {
				if v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					if src.Secret != nil && src.Secret.Name == n.harnessSecrets {
						for _, it := range src.Secret.Items {
							require.NotEqual(t, contract.SecretCodexWorkspaceID, it.Key, "the workspace id is not a projected credential file")
						}
					}
				}
			}
		})
	}
}

// TestGatewayConfigIsTheCompiledDocument: a dedicated Codex revision on a
// custom endpoint gives its Gateway the admitted document with the
// custom-endpoint compile applied (codex/openai-compatible/…), and its
// Harness the native document as admitted.
func TestGatewayConfigIsTheCompiledDocument(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := dedicatedRev("r1")
	out, err := admission.Admit(admission.Input{
		Agent:         state.Agent{ID: "a1", NamespaceID: "ns1", ConfigurationID: "c1", ExecutionMode: state.ModeDedicated, HarnessAuth: rev.HarnessAuth},
		Configuration: state.Configuration{ID: "c1", NamespaceID: "ns1", Document: []byte(admission.ExampleCustomEndpoint)},
	})
	require.NoError(t, err)
	rev.Document = out.Document
	require.NoError(t, d.PrepareRevision(ctx, rev))
	n := namesFor("a1", "r1")
	gw, err := cs.CoreV1().ConfigMaps(GatewayNamespace("ns1")).Get(ctx, n.gatewayConfig, metav1.GetOptions{})
	require.NoError(t, err)
	require.JSONEq(t, string(out.Rendered), gw.Data[configKeyGateway])
	require.Contains(t, gw.Data[configKeyGateway], "codex/openai-compatible/vendor/org/model")
	h, err := cs.CoreV1().ConfigMaps(DataPlaneNamespace("ns1")).Get(ctx, n.harnessConfig, metav1.GetOptions{})
	require.NoError(t, err)
	require.JSONEq(t, string(out.Document), h.Data[configKeyNative])
}

// TestNodeSelectorsPlacePods: dedicated Gateways go to the trusted pool
// (GatewayNodeSelector), Harnesses and embedded Gateways to the data plane.
func TestNodeSelectorsPlacePods(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	dataPlane, trusted := map[string]string{"oce.dev/pool": "tenants"}, map[string]string{"oce.dev/pool": "trusted"}
	d, err := New(Config{GatewayImage: "g", HarnessImage: "h", GatewayStatus: &fakeStatus{},
		NodeSelector: dataPlane, GatewayNodeSelector: trusted}, cs)
	require.NoError(t, err)
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: "ns1"}))
	rev := dedicatedRev("r1")
	require.NoError(t, d.PrepareRevision(ctx, rev))
	p, err := d.planFor(rev)
	require.NoError(t, err)
	h, err := cs.AppsV1().Deployments(p.dp).Get(ctx, p.n.harness, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, dataPlane, h.Spec.Template.Spec.NodeSelector)
	addPod(t, cs, p.dp, "harness-0", p.harnessWantLabels(), true)
	require.NoError(t, d.PrepareRevision(ctx, rev))
	require.Equal(t, trusted, gatewayOf(t, cs, p.gw).Spec.Template.Spec.NodeSelector)

	emb := embeddedRev("e1")
	emb.AgentID = "a2"
	require.NoError(t, d.PrepareRevision(ctx, emb))
	dep, err := cs.AppsV1().Deployments(DataPlaneNamespace("ns1")).Get(ctx, namesFor("a2", "").gateway, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, dataPlane, dep.Spec.Template.Spec.NodeSelector)
}
