package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/kubernetes"
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
	// Network isolation: where the model-holding Pods may connect
	// (CIDR:port,…; empty: public addresses on 443), and the published
	// route's proxy admitted to the Gateway port (key=value,… labels of its
	// namespace, and optionally of its Pods; empty: nobody).
	envModelEgress      = "OCE_MODEL_EGRESS"
	envIngressNamespace = "OCE_INGRESS_NAMESPACE_SELECTOR"
	envIngressPods      = "OCE_INGRESS_POD_SELECTOR"
)

// DriverEnv lists every variable the kubernetes driver reads.
var DriverEnv = []string{envGatewayImage, envHarnessImage, envStorageClass, envCredentialNamespace, envNodeSelector, envGatewayNodeSelector,
	envProviderOpenAI, envProviderAnthropic, envCoordinatorPods, envModelEgress, envIngressNamespace, envIngressPods}

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
	// Empty: each Agent's references resolve in its own Namespace's
	// data-plane namespace, where the driver holds Secret access already.
	ns := os.Getenv(envCredentialNamespace)
	kcfg, err := kubernetesConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if len(kcfg.Coordinator.PodLabels) > 0 {
		kcfg.Coordinator.Namespace = own
	}
	// References resolve in their Agent's own Namespace only; the legacy
	// credential namespace is where a cluster admin's registration reads
	// (docs/credentials.md).
	kcfg.Credentials = kubernetes.NamespaceSecrets(client)
	kcfg.LegacyCredentialNamespace = ns
	kcfg.ProbeBeforeCutover = probeBeforeCutover(cfg)
	if cfg.Log != nil {
		kcfg.Logger = cfg.Log.With("component", "compute")
	}
	if _, err := kubernetes.New(kcfg, client); err != nil {
		// the error names the field; say which variables set them
		return nil, fmt.Errorf("%w (%s, %s, %s, %s): %w", ErrDriverConfig, envGatewayImage, envHarnessImage, envNodeSelector, envGatewayNodeSelector, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), permissionCheckTimeout)
	defer cancel()
	if err := kubernetes.CheckPermissions(ctx, client); err != nil {
		return nil, err
	}
	// The identity the driver binds its namespaced Role to in each
	// namespace it creates (least privilege, docs/kubernetes.md "RBAC").
	if kcfg.Subject, err = kubernetes.Identity(ctx, client); err != nil {
		return nil, err
	}
	return kubernetes.New(kcfg, client)
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
	if cfg.ModelEgress, err = parseEgress(getenv(envModelEgress)); err != nil {
		return cfg, fmt.Errorf("%w: %s: %v", ErrDriverConfig, envModelEgress, err)
	}
	for v, dst := range map[string]*map[string]string{envIngressNamespace: &cfg.Ingress.NamespaceLabels, envIngressPods: &cfg.Ingress.PodLabels} {
		if *dst, err = kubernetes.ParseNodeSelector(getenv(v)); err != nil {
			return cfg, fmt.Errorf("%w: %s: %v", ErrDriverConfig, v, err)
		}
	}
	if len(cfg.Ingress.PodLabels) > 0 && len(cfg.Ingress.NamespaceLabels) == 0 {
		return cfg, fmt.Errorf("%w: %s needs %s", ErrDriverConfig, envIngressPods, envIngressNamespace)
	}
	return cfg, nil
}

// parseEgress reads "CIDR:port,…" (an IPv4 or IPv6 block, a TCP port).
func parseEgress(v string) ([]kubernetes.EgressPeer, error) {
	var out []kubernetes.EgressPeer
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndex(e, ":")
		if i < 0 {
			return nil, fmt.Errorf("%q is not CIDR:port", e)
		}
		cidr, portStr := e[:i], e[i+1:]
		port, err := strconv.Atoi(portStr)
		if _, _, cerr := net.ParseCIDR(cidr); cerr != nil || err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("%q is not CIDR:port", e)
		}
		out = append(out, kubernetes.EgressPeer{CIDR: cidr, Port: port})
	}
	return out, nil
}
