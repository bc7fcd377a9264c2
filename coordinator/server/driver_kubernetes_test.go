package server

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"oce.dev/oce/coordinator/compute/kubernetes"
)

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
	delete(env, envCoordinatorPods)

	// Network isolation: the model egress and the published route's proxy.
	env[envModelEgress] = "10.232.0.0/24:8080, 2001:db8::/32:443"
	env[envIngressNamespace] = "kubernetes.io/metadata.name=ingress"
	env[envIngressPods] = "app=proxy"
	cfg, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []kubernetes.EgressPeer{{CIDR: "10.232.0.0/24", Port: 8080}, {CIDR: "2001:db8::/32", Port: 443}}, cfg.ModelEgress)
	require.Equal(t, map[string]string{"kubernetes.io/metadata.name": "ingress"}, cfg.Ingress.NamespaceLabels)
	require.Equal(t, map[string]string{"app": "proxy"}, cfg.Ingress.PodLabels)
	for k, bad := range map[string]string{envModelEgress: "10.0.0.0/8", envIngressPods: "x"} {
		env := maps.Clone(env)
		env[k] = bad
		_, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
		require.Equal(t, CodeNotConfigured, StartCode(err), k)
		require.ErrorContains(t, err, k)
	}
	for _, bad := range []string{"10.0.0.0/8:0", "10.0.0.1:443", "10.0.0.0/8:x"} {
		_, err := parseEgress(bad)
		require.Error(t, err, bad)
	}
	delete(env, envIngressNamespace)
	_, err = kubernetesConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, envIngressNamespace, "Pod labels need the namespace's")
}

// The client's rate limit: defaults on purpose, settable by flag or
// variable (the flag wins, each setting on its own), bad values refused
// with where they came from named.
func TestKubeRate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flags      KubernetesConfig
		env        map[string]string
		qps        float32
		burst      int
		wantErrVar string
	}{
		{name: "defaults", qps: DefaultKubeQPS, burst: DefaultKubeBurst},
		{name: "env", env: map[string]string{envKubeQPS: "200", envKubeBurst: "400"}, qps: 200, burst: 400},
		{name: "flags", flags: KubernetesConfig{QPS: "150", Burst: "300"}, qps: 150, burst: 300},
		{name: "flags win over env", flags: KubernetesConfig{QPS: "150", Burst: "300"},
			env: map[string]string{envKubeQPS: "200", envKubeBurst: "400"}, qps: 150, burst: 300},
		{name: "flag rate, env burst", flags: KubernetesConfig{QPS: "150"}, env: map[string]string{envKubeBurst: "400"}, qps: 150, burst: 400},
		{name: "env rate, flag burst", flags: KubernetesConfig{Burst: "300"}, env: map[string]string{envKubeQPS: "200"}, qps: 200, burst: 300},
		{name: "a good flag wins over a bad variable", flags: KubernetesConfig{QPS: "30"}, env: map[string]string{envKubeQPS: "-1"}, qps: 30, burst: DefaultKubeBurst},
		{name: "blank flag takes the variable", flags: KubernetesConfig{QPS: " "}, env: map[string]string{envKubeQPS: "40"}, qps: 40, burst: DefaultKubeBurst},
		{name: "fraction", env: map[string]string{envKubeQPS: "2.5"}, qps: 2.5, burst: DefaultKubeBurst},
		{name: "burst raised to the rate", env: map[string]string{envKubeQPS: "300", envKubeBurst: "10"}, qps: 300, burst: 300},
		{name: "flag burst raised to the flag rate", flags: KubernetesConfig{QPS: "300", Burst: "10"}, qps: 300, burst: 300},
		{name: "zero rate", env: map[string]string{envKubeQPS: "0"}, wantErrVar: envKubeQPS},
		{name: "negative rate", env: map[string]string{envKubeQPS: "-1"}, wantErrVar: envKubeQPS},
		{name: "NaN", env: map[string]string{envKubeQPS: "NaN"}, wantErrVar: envKubeQPS},
		{name: "huge rate", env: map[string]string{envKubeQPS: "1e9"}, wantErrVar: envKubeQPS},
		{name: "word burst", env: map[string]string{envKubeBurst: "many"}, wantErrVar: envKubeBurst},
		{name: "zero burst", env: map[string]string{envKubeBurst: "0"}, wantErrVar: envKubeBurst},
		{name: "zero rate flag", flags: KubernetesConfig{QPS: "0"}, wantErrVar: flagKubeQPS},
		{name: "infinite rate flag", flags: KubernetesConfig{QPS: "Inf"}, wantErrVar: flagKubeQPS},
		{name: "word rate flag over a good variable", flags: KubernetesConfig{QPS: "fast"}, env: map[string]string{envKubeQPS: "200"}, wantErrVar: flagKubeQPS},
		{name: "huge burst flag", flags: KubernetesConfig{Burst: "100001"}, wantErrVar: flagKubeBurst},
		{name: "fractional burst flag", flags: KubernetesConfig{Burst: "1.5"}, wantErrVar: flagKubeBurst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qps, burst, err := kubeRate(tc.flags, func(k string) string { return tc.env[k] })
			if tc.wantErrVar != "" {
				require.ErrorIs(t, err, ErrDriverConfig)
				require.ErrorContains(t, err, tc.wantErrVar+"=")
				require.Equal(t, CodeNotConfigured, StartCode(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.qps, qps)
			require.Equal(t, tc.burst, burst)
		})
	}
}

// fakeKubeconfig points KUBECONFIG at an API server nobody serves: a start
// refused on its configuration never contacts it.
func fakeKubeconfig(t *testing.T) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	t.Setenv("KUBECONFIG", kc)
}

// A bad rate limit stops the start before anything is contacted, naming
// the flag (or variable) it came from; a good flag over a bad variable is
// no error (the start then fails on the next setting, the image).
func TestKubernetesDriverRefusesBadRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   KubernetesConfig
		env     map[string]string
		wantErr string // what the error names
	}{
		{name: "flag", flags: KubernetesConfig{QPS: "0"}, wantErr: flagKubeQPS + `="0"`},
		{name: "flag over a good variable", flags: KubernetesConfig{Burst: "-3"}, env: map[string]string{envKubeBurst: "10"}, wantErr: flagKubeBurst + `="-3"`},
		{name: "variable", env: map[string]string{envKubeQPS: "fast"}, wantErr: envKubeQPS + `="fast"`},
		{name: "good flag over a bad variable", flags: KubernetesConfig{QPS: "20"}, env: map[string]string{envKubeQPS: "fast"}, wantErr: envGatewayImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeKubeconfig(t)
			t.Setenv(envGatewayImage, "Not An Image")
			t.Setenv(envHarnessImage, "localhost/oce/harness:1")
			t.Setenv(envKubeQPS, "")
			t.Setenv(envKubeBurst, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := newKubernetesDriver(Config{Kubernetes: tc.flags})
			require.ErrorIs(t, err, ErrDriverConfig)
			require.Equal(t, CodeNotConfigured, StartCode(err))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// A wrong image variable stops the start before anything is contacted, with
// the NOT_CONFIGURED code and the variable named.
func TestKubernetesDriverRefusesWrongImageVariable(t *testing.T) {
	fakeKubeconfig(t)
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

// A start in the same apply as its RBAC: denials while the binding takes
// effect are asked again; a denial that lasts the settle time is the
// answer, naming what is missing.
func TestStartChecksWaitForRBAC(t *testing.T) {
	for _, tc := range []struct {
		name     string
		denyFor  int // access reviews denied before RBAC takes effect
		wantErr  bool
		wantUser string
	}{
		{name: "effective at once", denyFor: 0, wantUser: "oce-coordinator"},
		{name: "effective a moment later", denyFor: 9, wantUser: "oce-coordinator"},
		{name: "never bound", denyFor: 1 << 30, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: kubernetes.NamespaceRole},
				Rules: kubernetes.NamespaceRoleRules()})
			var reviews atomic.Int64
			cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				r.Status.Allowed = reviews.Add(1) > int64(tc.denyFor)
				return true, r, nil
			})
			cs.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				r := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.SelfSubjectReview)
				r.Status.UserInfo.Username = "system:serviceaccount:oce-system:oce-coordinator"
				return true, r, nil
			})
			sub, err := startChecks(context.Background(), cs, nil, 2*time.Second, 5*time.Millisecond)
			if tc.wantErr {
				require.ErrorIs(t, err, kubernetes.ErrMissingPermission)
				require.Equal(t, CodeMissingPermission, StartCode(err))
				require.Greater(t, reviews.Load(), int64(len(kubernetes.ClusterPermissions)), "asked again before answering")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantUser, sub.Name)
		})
	}
}
