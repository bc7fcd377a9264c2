package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
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
	// The client's own rate limit toward the API server (requests/s and
	// burst); see DefaultKubeQPS.
	envKubeQPS   = "OCE_KUBE_QPS"
	envKubeBurst = "OCE_KUBE_BURST"
)

// The client's rate limit, set on purpose (client-go's default, 5/s with a
// burst of 10, starved deploys at a few dozen Agents: issue 27). Since the
// observation cache an Agent at rest costs no request, so the budget is
// for deploys: an
// activation spends about 41 requests embedded, 84 dedicated
// (BenchmarkActivationRequests, docs/PERFORMANCE.md), so 50/s finishes
// about one embedded activation a second
// while leaving the API server the headroom kube-controller-manager's own
// defaults (20-50/s) assume of a controller.
const (
	DefaultKubeQPS   = 50
	DefaultKubeBurst = 100
	maxKubeQPS       = 10000
	maxKubeBurst     = 100000
)

// The command-line flags of the client's rate limit (cmd/coordinator); each
// wins over its variable.
const (
	flagKubeQPS   = "--kube-qps"
	flagKubeBurst = "--kube-burst"
)

// KubernetesConfig configures the kubernetes driver from the command line;
// everything else it reads from its environment (DriverEnv).
type KubernetesConfig struct {
	// QPS and Burst are the client's rate limit toward the API server as
	// given (--kube-qps, --kube-burst), validated at start with the flag
	// named. Empty takes OCE_KUBE_QPS / OCE_KUBE_BURST, then
	// DefaultKubeQPS / DefaultKubeBurst.
	QPS, Burst string
}

// DriverEnv lists every variable the kubernetes driver reads (and
// OCE_COLD_STANDBY, which only a driver with caches heeds).
var DriverEnv = []string{envGatewayImage, envHarnessImage, envStorageClass, envCredentialNamespace, envNodeSelector, envGatewayNodeSelector,
	envProviderOpenAI, envProviderAnthropic, envCoordinatorPods, envModelEgress, envIngressNamespace, envIngressPods,
	envKubeQPS, envKubeBurst, envColdStandby}

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
	if rc.QPS, rc.Burst, err = kubeRate(cfg.Kubernetes, os.Getenv); err != nil {
		return nil, err
	}
	client, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("server: kubernetes driver: %w", err)
	}
	// The caches' lists and watches (their own client: kubernetes.WatchClientConfig).
	wc := kubernetes.WatchClientConfig(rc)
	watchClient, err := k8s.NewForConfig(wc)
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
	kcfg.ObserveCache = true
	kcfg.ClientQPS = float64(rc.QPS)
	kcfg.WatchClient = watchClient
	if cfg.Log != nil {
		kcfg.Logger = cfg.Log.With("component", "compute")
	}
	if _, err := kubernetes.New(kcfg, client); err != nil {
		// the error names the field; say which variables set them
		return nil, fmt.Errorf("%w (%s, %s, %s, %s): %w", ErrDriverConfig, envGatewayImage, envHarnessImage, envNodeSelector, envGatewayNodeSelector, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), permissionCheckTimeout)
	defer cancel()
	if kcfg.Subject, err = startChecks(ctx, client, kcfg.Logger, PermissionSettle, permissionRetryMin); err != nil {
		return nil, err
	}
	return kubernetes.New(kcfg, client)
}

// Start-time checks: RBAC applied beside the coordinator takes effect a
// moment later; for PermissionSettle a denial is asked again, starting
// permissionRetryMin apart.
const (
	PermissionSettle   = 10 * time.Second
	permissionRetryMin = 250 * time.Millisecond
)

// startChecks asks whether the driver's identity holds every permission it
// needs, and who it is (the identity the driver binds its namespaced Role
// to in each namespace it creates: least privilege, docs/kubernetes.md
// "RBAC"). RBAC objects applied with the coordinator (the bundle, a chart)
// take effect asynchronously, so a denial or an API error is asked again,
// with backoff, for settle: a start in the same apply as its
// ClusterRoleBinding must not crash-loop. Then the last complete answer is
// returned.
func startChecks(ctx context.Context, client k8s.Interface, log *slog.Logger, settle, pause time.Duration) (rbacv1.Subject, error) {
	deadline := time.Now().Add(settle)
	var last error
	for {
		err := kubernetes.CheckPermissions(ctx, client)
		if err == nil {
			sub, ierr := kubernetes.Identity(ctx, client)
			if ierr == nil {
				return sub, nil
			}
			err = ierr
		}
		if ctx.Err() != nil && last != nil {
			return rbacv1.Subject{}, last // the deadline cut this attempt short
		}
		last = err
		if time.Now().Add(pause).After(deadline) {
			return rbacv1.Subject{}, last
		}
		if log != nil {
			log.Warn("kubernetes driver: start checks not passed yet; asking again", "error", err.Error(), "retry_ms", pause.Milliseconds())
		}
		select {
		case <-ctx.Done():
			return rbacv1.Subject{}, last
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
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

// kubeRate reads the client's rate limit: the requests/s from --kube-qps,
// else OCE_KUBE_QPS, else DefaultKubeQPS; the burst from --kube-burst, else
// OCE_KUBE_BURST, else DefaultKubeBurst. A bad value is refused naming the
// flag or variable it came from.
func kubeRate(flags KubernetesConfig, getenv func(string) string) (qps float32, burst int, err error) {
	qps, burst = DefaultKubeQPS, DefaultKubeBurst
	if v, from := setting(flags.QPS, flagKubeQPS, getenv, envKubeQPS); v != "" {
		f, perr := strconv.ParseFloat(v, 32)
		if perr != nil || !(f > 0 && f <= maxKubeQPS) {
			return 0, 0, fmt.Errorf("%w: %s=%q is not a rate in (0, %d] requests/s", ErrDriverConfig, from, v, maxKubeQPS)
		}
		qps = float32(f)
	}
	if v, from := setting(flags.Burst, flagKubeBurst, getenv, envKubeBurst); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > maxKubeBurst {
			return 0, 0, fmt.Errorf("%w: %s=%q is not a burst in [1, %d]", ErrDriverConfig, from, v, maxKubeBurst)
		}
		burst = n
	}
	if float32(burst) < qps {
		burst = int(qps + 0.5) // a burst below the rate would throttle the rate itself
	}
	return qps, burst, nil
}

// setting is the flag's value when given, else the variable's, with the
// name of where it came from; "" when neither is set.
func setting(flagValue, flag string, getenv func(string) string, variable string) (value, from string) {
	if v := strings.TrimSpace(flagValue); v != "" {
		return v, flag
	}
	return strings.TrimSpace(getenv(variable)), variable
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
