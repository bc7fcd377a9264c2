package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

func TestSecretCredentials(t *testing.T) {
	client := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model", Namespace: "oce-system"},
		Data: map[string][]byte{"openai": []byte("sk-test")}}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sa", Namespace: "oce-system"},
		Data: map[string][]byte{"token": []byte("at-test"), contract.SecretCodexWorkspaceID: []byte("ws-1")}})
	c := secretCredentials{client: client, namespace: "oce-system"}
	ctx := context.Background()
	rev := func(h, method, ref string) state.Revision {
		return state.Revision{Harness: state.HarnessIdentity{ID: h}, HarnessAuth: &state.HarnessAuth{Method: method, SourceRef: ref}}
	}
	for _, tc := range []struct {
		name string
		rev  state.Revision
		file string
	}{
		{"embedded api key", rev(state.HarnessOpenClaw, "api_key", "secret:model#openai"), contract.SecretModelAPIKey},
		{"codex api key", rev(state.HarnessCodex, "api_key", "secret:model#openai"), contract.SecretOpenAIAPIKey},
		{"codex pat", rev(state.HarnessCodex, "codex_pat", "secret:model#openai"), contract.SecretCodexAccessToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Resolve(ctx, tc.rev)
			require.NoError(t, err)
			require.Equal(t, map[string][]byte{tc.file: []byte("sk-test")}, got)
		})
	}
	for _, bad := range []string{"model#openai", "secret:model", "secret:#openai", "secret:model#missing", "secret:absent#openai"} {
		_, err := c.Resolve(ctx, rev(state.HarnessCodex, "api_key", bad))
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "sk-test")
	}
	// chatgpt_service_account delivers the token and the workspace id beside it.
	got, err := c.Resolve(ctx, rev(state.HarnessCodex, "chatgpt_service_account", "secret:sa#token"))
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{contract.SecretCodexAccessToken: []byte("at-test"), contract.SecretCodexWorkspaceID: []byte("ws-1")}, got)
	_, err = c.Resolve(ctx, rev(state.HarnessCodex, "chatgpt_service_account", "secret:model#openai"))
	require.ErrorContains(t, err, contract.SecretCodexWorkspaceID)
	none, err := c.Resolve(ctx, state.Revision{})
	require.NoError(t, err)
	require.Nil(t, none)
}

// TestKubernetesConfigFromEnv: the node selectors (data plane, trusted
// Gateway pool) are set from the coordinator's environment; a bad one
// fails the start with a clear error.
func TestKubernetesConfigFromEnv(t *testing.T) {
	env := map[string]string{envGatewayImage: "g:1", envHarnessImage: "h:1", envStorageClass: "fast",
		envNodeSelector: "oce.dev/pool=tenants", envGatewayNodeSelector: "oce.dev/pool=trusted,kubernetes.io/os=linux"}
	cfg, err := kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "g:1", cfg.GatewayImage)
	require.Equal(t, "fast", cfg.StorageClass)
	require.Equal(t, map[string]string{"oce.dev/pool": "tenants"}, cfg.NodeSelector)
	require.Equal(t, map[string]string{"oce.dev/pool": "trusted", "kubernetes.io/os": "linux"}, cfg.GatewayNodeSelector)
	require.Empty(t, cfg.ProviderBaseURLs, "the providers' default endpoints")
	env[envGatewayNodeSelector] = "trusted"
	_, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorIs(t, err, kubernetes.ErrBadNodeSelector)
	require.ErrorContains(t, err, envGatewayNodeSelector)

	// The model endpoint overrides reach the driver (its credential check
	// and its rendering).
	delete(env, envGatewayNodeSelector)
	env["OCE_MODEL_PROVIDER_BASE_URL_OPENAI"] = "http://fake-provider.oce-test.svc:8080"
	cfg, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"OPENAI": "http://fake-provider.oce-test.svc:8080"}, cfg.ProviderBaseURLs)
	env["OCE_MODEL_PROVIDER_BASE_URL_OPENAI"] = "fake-provider:8080"
	_, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "OCE_MODEL_PROVIDER_BASE_URL_OPENAI")
	require.ErrorIs(t, err, ErrDriverConfig)
	delete(env, "OCE_MODEL_PROVIDER_BASE_URL_OPENAI")

	// The coordinator's own Pods, for the Gateway policies.
	env[envCoordinatorPods] = "app.kubernetes.io/name=oce-coordinator"
	cfg, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "oce-coordinator"}, cfg.Coordinator.PodLabels)
	env[envCoordinatorPods] = "no-equals"
	_, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.Equal(t, CodeNotConfigured, StartCode(err))
	require.ErrorContains(t, err, envCoordinatorPods)
}

// A wrong image variable stops the start before anything is contacted, with
// the NOT_CONFIGURED code and the variable named.
func TestKubernetesDriverRefusesWrongImageVariable(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	t.Setenv("KUBECONFIG", kc)
	t.Setenv(envGatewayImage, "Not An Image")
	t.Setenv(envHarnessImage, "localhost/oce/harness:1")
	_, err := newKubernetesDriver(Config{})
	require.ErrorIs(t, err, ErrDriverConfig)
	require.Equal(t, CodeNotConfigured, StartCode(err))
	require.Contains(t, err.Error(), envGatewayImage)
	require.Contains(t, err.Error(), "Not An Image")

	t.Setenv(envGatewayImage, "localhost/oce/gateway:1")
	t.Setenv(envNodeSelector, "no-equals")
	_, err = newKubernetesDriver(Config{})
	require.Equal(t, kubernetes.CodeBadNodeSelector, StartCode(err))
	require.Contains(t, err.Error(), envNodeSelector)
}
