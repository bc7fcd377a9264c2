package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// Environment of the kubernetes driver (docs/kubernetes.md; the deploy
// bundle sets them from one ConfigMap, images/deploy/driver-config.yaml).
const (
	envGatewayImage        = "OCE_GATEWAY_IMAGE"
	envHarnessImage        = "OCE_HARNESS_IMAGE"
	envStorageClass        = "OCE_STORAGE_CLASS"
	envCredentialNamespace = "OCE_CREDENTIAL_NAMESPACE"
	envNodeSelector        = "OCE_NODE_SELECTOR"         // data-plane Pods: key=value,…
	envGatewayNodeSelector = "OCE_GATEWAY_NODE_SELECTOR" // dedicated Gateways: the trusted pool
	// The model endpoints that replace the providers' defaults, in every
	// Gateway and Harness and in the pre-cutover credential check.
	envProviderOpenAI    = contract.EnvProviderBaseURLOpenAI
	envProviderAnthropic = contract.EnvProviderBaseURLAnthropic
	// The labels of the coordinator's own Pods (key=value,…), which the
	// Gateway network policies admit to the status port; with the
	// coordinator's namespace (its service account's).
	envCoordinatorPods   = "OCE_COORDINATOR_POD_SELECTOR"
	serviceAccountNSFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// DriverEnv lists every variable the kubernetes driver reads.
var DriverEnv = []string{envGatewayImage, envHarnessImage, envStorageClass, envCredentialNamespace, envNodeSelector, envGatewayNodeSelector,
	envProviderOpenAI, envProviderAnthropic, envCoordinatorPods}

// permissionCheckTimeout bounds the start-time access reviews.
const permissionCheckTimeout = 30 * time.Second

func init() { RegisterDriver(kubernetes.Name, newKubernetesDriver) }

// newKubernetesDriver connects with the in-cluster service account, or the
// KUBECONFIG / ~/.kube/config of the operator running it outside a cluster.
func newKubernetesDriver(cfg Config) (compute.Driver, error) {
	rc, err := rest.InClusterConfig()
	if err != nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("server: kubernetes driver: no in-cluster config and no kubeconfig: %w", err)
		}
	}
	client, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("server: kubernetes driver: %w", err)
	}
	own := ""
	if b, err := os.ReadFile(serviceAccountNSFile); err == nil {
		own = strings.TrimSpace(string(b))
	}
	ns := os.Getenv(envCredentialNamespace)
	if ns == "" {
		ns = own
	}
	kcfg, err := kubernetesConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if len(kcfg.Coordinator.PodLabels) > 0 {
		kcfg.Coordinator.Namespace = own
	}
	kcfg.Credentials = secretCredentials{client: client, namespace: ns}
	if cfg.Log != nil {
		kcfg.Logger = cfg.Log.With("component", "compute")
	}
	d, err := kubernetes.New(kcfg, client)
	if err != nil {
		// the error names the field; say which variables set them
		return nil, fmt.Errorf("%w (%s, %s, %s, %s): %w", ErrDriverConfig, envGatewayImage, envHarnessImage, envNodeSelector, envGatewayNodeSelector, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), permissionCheckTimeout)
	defer cancel()
	if err := kubernetes.CheckPermissions(ctx, client); err != nil {
		return nil, err
	}
	return d, nil
}

// kubernetesConfigFromEnv reads the driver's settings: images, storage
// class, the node selectors (data plane, and the trusted pool of dedicated
// Gateways, docs/design/seed-000.md#step-2) and the model endpoint overrides.
func kubernetesConfigFromEnv(getenv func(string) string) (kubernetes.Config, error) {
	cfg := kubernetes.Config{GatewayImage: getenv(envGatewayImage), HarnessImage: getenv(envHarnessImage),
		StorageClass: getenv(envStorageClass)}
	var err error
	if cfg.NodeSelector, err = kubernetes.ParseNodeSelector(getenv(envNodeSelector)); err != nil {
		return cfg, fmt.Errorf("%w: %s: %w", ErrDriverConfig, envNodeSelector, err)
	}
	if cfg.GatewayNodeSelector, err = kubernetes.ParseNodeSelector(getenv(envGatewayNodeSelector)); err != nil {
		return cfg, fmt.Errorf("%w: %s: %w", ErrDriverConfig, envGatewayNodeSelector, err)
	}
	if cfg.Coordinator.PodLabels, err = kubernetes.ParseNodeSelector(getenv(envCoordinatorPods)); err != nil {
		return cfg, fmt.Errorf("%w: %s: %v", ErrDriverConfig, envCoordinatorPods, err) // NOT_CONFIGURED, not a node selector
	}
	if cfg.ProviderBaseURLs, err = providerBaseURLs(getenv); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrDriverConfig, err)
	}
	return cfg, nil
}

// secretCredentials resolves a harnessAuth source reference of the form
// "secret:<name>#<key>" from a Secret in the control-plane namespace. The
// revision freezes only the reference; the bytes are read at delivery.
type secretCredentials struct {
	client    k8s.Interface
	namespace string
}

var errBadSourceRef = errors.New("server: harnessAuth sourceRef must be secret:<name>#<key>")

func (s secretCredentials) Resolve(ctx context.Context, rev state.Revision) (map[string][]byte, error) {
	if rev.HarnessAuth == nil || rev.HarnessAuth.SourceRef == "" {
		return nil, nil
	}
	ref, ok := strings.CutPrefix(rev.HarnessAuth.SourceRef, "secret:")
	name, key, ok2 := strings.Cut(ref, "#")
	if !ok || !ok2 || name == "" || key == "" || s.namespace == "" {
		return nil, errBadSourceRef
	}
	sec, err := s.client.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("server: read credential source %s: %w", name, err)
	}
	v, ok := sec.Data[key]
	if !ok || len(v) == 0 {
		return nil, fmt.Errorf("server: credential source %s has no key %s", name, key)
	}
	file := contract.SecretModelAPIKey
	switch {
	case rev.HarnessAuth.Method == contract.LoginCodexPAT || rev.HarnessAuth.Method == contract.LoginServiceAccount:
		file = contract.SecretCodexAccessToken
	case rev.Harness.ID == state.HarnessCodex:
		file = contract.SecretOpenAIAPIKey
	}
	out := map[string][]byte{file: v}
	if rev.HarnessAuth.Method == contract.LoginServiceAccount {
		// The service account's workspace id sits beside its token.
		ws := sec.Data[contract.SecretCodexWorkspaceID]
		if len(ws) == 0 {
			return nil, fmt.Errorf("server: credential source %s has no key %s for %s", name, contract.SecretCodexWorkspaceID, rev.HarnessAuth.Method)
		}
		out[contract.SecretCodexWorkspaceID] = ws
	}
	return out, nil
}
