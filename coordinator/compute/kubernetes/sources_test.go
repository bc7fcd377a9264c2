package kubernetes

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

var (
	teamNS  = state.Namespace{ID: "ns-team", Name: "team"}
	otherNS = state.Namespace{ID: "ns-other", Name: "other"}
)

// TestCredentialSourceSecrets: a source's value is a Secret of its
// Namespace's own data-plane namespace, labelled as oce's and exactly
// owned; a rotation replaces it, a withdrawal deletes it, and a Secret of
// that name with another owner is never touched.
func TestCredentialSourceSecrets(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	store := compute.StoreOf(d)
	require.NotNil(t, store)
	require.NoError(t, store.PutCredential(ctx, teamNS, "model", 1, map[string][]byte{"value": []byte("sk-1")}))
	dp := DataPlaneNamespace(teamNS.ID)
	sec, err := cs.CoreV1().Secrets(dp).Get(ctx, "credential-model", metav1.GetOptions{})
	require.NoError(t, err, "the Secret is in the Namespace's own Kubernetes namespace")
	require.Equal(t, map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: teamNS.ID, LabelCredentialSource: "model"}, sec.Labels)
	require.Equal(t, map[string]string{AnnotationNamespaceID: teamNS.ID, AnnotationCredentialVersion: "1"}, sec.Annotations)
	require.Equal(t, corev1.SecretTypeOpaque, sec.Type)
	// The namespace was ensured with its policies.
	ns, err := cs.CoreV1().Namespaces().Get(ctx, dp, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, nsOwned(ns, teamNS.ID, false))

	require.NoError(t, store.PutCredential(ctx, teamNS, "model", 2, map[string][]byte{"value": []byte("sk-2")}))
	require.NoError(t, store.PutCredential(ctx, teamNS, "model", 2, map[string][]byte{"value": []byte("sk-2")}), "a retried write")
	sec, err = cs.CoreV1().Secrets(dp).Get(ctx, "credential-model", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "sk-2", string(sec.Data["value"]))
	require.Equal(t, "2", sec.Annotations[AnnotationCredentialVersion])

	// A Secret of the source's name that oce does not own is left alone.
	_, err = cs.CoreV1().Secrets(dp).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credential-planted", Namespace: dp},
		Data: map[string][]byte{"value": []byte("planted")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = store.PutCredential(ctx, teamNS, "planted", 1, map[string][]byte{"value": []byte("x")})
	code, _ := compute.ErrorCode(err, "")
	require.Equal(t, codes.ForeignWorkload, code)
	require.Error(t, store.DeleteCredential(ctx, teamNS, "planted"))
	sec, err = cs.CoreV1().Secrets(dp).Get(ctx, "credential-planted", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "planted", string(sec.Data["value"]))

	require.NoError(t, store.DeleteCredential(ctx, teamNS, "model"))
	require.NoError(t, store.DeleteCredential(ctx, teamNS, "model"), "withdrawing twice is no error")
	_, err = cs.CoreV1().Secrets(dp).Get(ctx, "credential-model", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.Error(t, store.PutCredential(ctx, teamNS, "Bad_Name", 1, map[string][]byte{"value": []byte("x")}))
}

// TestReferencesResolveInTheirNamespaceOnly: a revision's reference reads
// the source's Secret of its own data-plane namespace and nothing else —
// not another Namespace's source of the same or another name, not the
// legacy credential namespace, not a Secret oce does not own there.
func TestReferencesResolveInTheirNamespaceOnly(t *testing.T) {
	d, cs := newFake(t)
	ctx := context.Background()
	store := d.CredentialStore()
	require.NoError(t, store.PutCredential(ctx, teamNS, "model", 1, map[string][]byte{"openai": []byte("sk-team")}))
	require.NoError(t, store.PutCredential(ctx, teamNS, "sa", 1,
		map[string][]byte{"token": []byte("at-team"), contract.SecretCodexWorkspaceID: []byte("ws-1")}))
	require.NoError(t, store.PutCredential(ctx, otherNS, "theirs", 1, map[string][]byte{"openai": []byte("sk-other")}))
	_, err := cs.CoreV1().Secrets("oce-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "oce-system"},
		Data: map[string][]byte{"openai": []byte("sk-legacy")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	dp := DataPlaneNamespace(teamNS.ID)
	_, err = cs.CoreV1().Secrets(dp).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credential-planted", Namespace: dp},
		Data: map[string][]byte{"openai": []byte("sk-planted")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	c := NamespaceSecrets(cs)
	rev := func(h, method, ref string) state.Revision {
		return state.Revision{NamespaceID: teamNS.ID, Harness: state.HarnessIdentity{ID: h},
			HarnessAuth: &state.HarnessAuth{Method: method, SourceRef: ref}}
	}
	for _, tc := range []struct {
		name string
		rev  state.Revision
		file string
	}{
		{"embedded api key", rev(state.HarnessOpenClaw, "api_key", "credential:model"), contract.SecretModelAPIKey},
		{"legacy spelling", rev(state.HarnessOpenClaw, "api_key", "secret:model#openai"), contract.SecretModelAPIKey},
		{"codex api key", rev(state.HarnessCodex, "api_key", "credential:team/model#openai"), contract.SecretOpenAIAPIKey},
		{"codex pat", rev(state.HarnessCodex, "codex_pat", "secret://team/model#openai"), contract.SecretCodexAccessToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Resolve(ctx, tc.rev)
			require.NoError(t, err)
			require.Equal(t, map[string][]byte{tc.file: []byte("sk-team")}, got)
		})
	}
	for _, bad := range []string{"model#openai", "secret:model", "credential:model#missing", "credential:absent",
		"credential:theirs", "credential:legacy", "secret:legacy#openai", "credential:planted", "credential:sa"} {
		_, err := c.Resolve(ctx, rev(state.HarnessCodex, "api_key", bad))
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "sk-", "errors never carry a value")
	}
	// A reference qualified with another Namespace still reads only the
	// revision's own (the deploy decision refuses it before this).
	_, err = c.Resolve(ctx, rev(state.HarnessCodex, "api_key", "credential:other/theirs#openai"))
	require.ErrorIs(t, err, compute.ErrNoSource)
	// chatgpt_service_account delivers the token and the workspace id beside it.
	got, err := c.Resolve(ctx, rev(state.HarnessCodex, "chatgpt_service_account", "credential:sa#token"))
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{contract.SecretCodexAccessToken: []byte("at-team"), contract.SecretCodexWorkspaceID: []byte("ws-1")}, got)
	_, err = c.Resolve(ctx, rev(state.HarnessCodex, "chatgpt_service_account", "credential:model#openai"))
	require.ErrorContains(t, err, contract.SecretCodexWorkspaceID)
	none, err := c.Resolve(ctx, state.Revision{})
	require.NoError(t, err)
	require.Nil(t, none)
}

// TestRegisterReadsOnlyWhatMayBeASource: a registration copies the value
// of a Secret of the legacy credential namespace (or any namespace it
// names), but never the coordinator's own Secrets, a cluster token, an
// object oce manages or a Secret of another Namespace's managed namespaces.
func TestRegisterReadsOnlyWhatMayBeASource(t *testing.T) {
	d, cs := newFake(t)
	d.cfg.LegacyCredentialNamespace = "oce-system"
	ctx := context.Background()
	store := d.CredentialStore()
	require.NoError(t, store.PutCredential(ctx, otherNS, "theirs", 1, map[string][]byte{"value": []byte("sk-other")}))
	require.NoError(t, d.EnsureNamespace(ctx, teamNS))
	mk := func(ns string, s *corev1.Secret) {
		t.Helper()
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		s.Namespace = ns
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	keys := map[string][]byte{"good": []byte("sk-good"), "bad": []byte("sk-bad")}
	mk("oce-system", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"}, Data: keys})
	mk("oce-system", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oce-coordinator-token"}, Data: map[string][]byte{"token": []byte("t")}})
	mk("elsewhere", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sa-token"}, Type: corev1.SecretTypeServiceAccountToken,
		Data: map[string][]byte{"token": []byte("t")}})
	mk("elsewhere", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key"}, Data: map[string][]byte{"value": []byte("sk-else")}})
	dp := DataPlaneNamespace(teamNS.ID)
	mk(dp, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "placed"}, Data: map[string][]byte{"value": []byte("sk-placed")}})

	for from, want := range map[string]map[string][]byte{
		"secret:model-keys":               keys,
		"secret:model-keys#good":          {"good": []byte("sk-good")},
		"secret:oce-system/model-keys":    keys,
		"secret:elsewhere/key#value":      {"value": []byte("sk-else")},
		"secret:" + dp + "/placed":        {"value": []byte("sk-placed")},
		"secret:" + dp + "/placed#value":  {"value": []byte("sk-placed")},
		"secret:oce-system/model-keys#ok": nil,
	} {
		got, err := store.ReadLocation(ctx, teamNS, from)
		if want == nil {
			require.ErrorIs(t, err, compute.ErrLocationNotFound, from)
			continue
		}
		require.NoError(t, err, from)
		require.Equal(t, want, got, from)
	}
	for from, want := range map[string]error{
		"secret:oce-coordinator-token":                                    compute.ErrLocationRefused,
		"secret:elsewhere/sa-token":                                       compute.ErrLocationRefused,
		"secret:" + DataPlaneNamespace(otherNS.ID) + "/credential-theirs": compute.ErrLocationRefused,
		"secret:" + dp + "/credential-theirs":                             compute.ErrLocationNotFound,
		"secret:" + GatewayNamespace(teamNS.ID) + "/gateway-password-x":   compute.ErrLocationRefused,
		"secret:missing-ns/x":                                             compute.ErrLocationNotFound,
		"local:demo-key":                                                  compute.ErrLocationInvalid,
		"secret:Bad_NS/x":                                                 compute.ErrLocationInvalid,
		"secret:oce-system/model-keys#../x":                               compute.ErrLocationInvalid,
		"secret:oce-system/":                                              compute.ErrLocationInvalid,
	} {
		_, err := store.ReadLocation(ctx, teamNS, from)
		require.ErrorIs(t, err, want, from)
	}
	// Its own source (oce's) is not registered again.
	require.NoError(t, store.PutCredential(ctx, teamNS, "mine", 1, map[string][]byte{"value": []byte("sk-mine")}))
	_, err := store.ReadLocation(ctx, teamNS, "secret:"+dp+"/credential-mine")
	require.ErrorIs(t, err, compute.ErrLocationRefused)
}
