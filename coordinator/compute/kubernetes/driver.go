// Package kubernetes is the coordinator's production compute.Driver: it
// realizes AgentRevisions as Kubernetes Deployments, Services,
// NetworkPolicies, PVCs, Secrets and ConfigMaps through client-go (docs/design/seed-000.md
// step 2, docs/design/seed-002.md, docs/design/reference.md#s5 and docs/design/reference.md#s8). Embedded OpenClaw runs one gateway
// Deployment in the tenant data-plane namespace; dedicated Codex runs its
// Gateway in the managed Gateway namespace and the Harness (harnessd +
// nodehost) in the data-plane namespace. Nothing is ever deleted without an
// exact owner match, and claims are deleted by UID.
package kubernetes

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// Name is the default driver name (a revision's ComputeID).
const Name = "kubernetes"

// Deadlines and sizes carrying the seeds' and the reference's numbers.
const (
	// GatewayTerminationGraceSeconds is the Gateway Pod's
	// terminationGracePeriodSeconds: the pinned runtime's 330 s stop budget
	// (315 s drain + 10 s cleanup + 5 s margin, docs/design/reference.md#s5-1).
	GatewayTerminationGraceSeconds = 330
	// GatewayStopWait bounds the wait for the Gateway Pods to disappear
	// after deleting its Deployment (330 s + 10 s, docs/design/reference.md#s5-3).
	GatewayStopWait = 340 * time.Second
	// HarnessStopWait bounds the wait for the Harness Pods (docs/design/reference.md#s5-3).
	HarnessStopWait = 120 * time.Second
	// DefaultRBACWait bounds the wait for a new RoleBinding to take effect.
	DefaultRBACWait = 10 * time.Second
	// StopPollInterval is how often stop polls for remaining Pods.
	StopPollInterval = 100 * time.Millisecond
	// ProbePeriodSeconds is the exec readiness probe period (docs/design/reference.md#s1-7).
	ProbePeriodSeconds = 2
	// StartupProbeFailureThreshold × ProbePeriodSeconds bounds startup
	// (login, model probe, plugin install) before kubelet restarts a
	// supervisor whose status server never answers; a held failure ends
	// startup (GET /startupz answers 200), so it is never restarted.
	StartupProbeFailureThreshold = 450

	WorkspaceClaimSize    = compute.WorkspaceClaimSize
	GatewayStateClaimSize = compute.GatewayStateClaimSize
)

// Sentinel errors callers branch on; the driver wraps them in compute.Error
// with codes of shared/codes.
var (
	ErrInvalidTarget   = errors.New("kubernetes: invalid target")
	ErrForeignWorkload = errors.New("kubernetes: object exists with a different owner")
	ErrForeignNS       = errors.New("kubernetes: namespace has a different owner")
	ErrNotReady        = errors.New("kubernetes: revision is not ready")
	ErrNotEmpty        = errors.New("kubernetes: namespace still holds Agent resources")
	ErrStillRunning    = errors.New("kubernetes: pods still present after the stop deadline")
	ErrUnsupported     = errors.New("kubernetes: unsupported topology or harness auth")
	// ErrConfig: the driver's configuration (image references, node
	// selectors) is unusable; New refuses to start.
	ErrConfig = errors.New("kubernetes: bad driver configuration")
)

func foreign(ns, name string) error {
	return compute.Permanent(codes.ForeignWorkload, fmt.Errorf("%w: %s/%s", ErrForeignWorkload, ns, name))
}

// transient wraps a failed API call as retryable; the API server's own
// overload signals are marked so the engine slows its admission.
func transient(err error) error {
	if overloadSignal(err) {
		return compute.Overloaded(codes.TransientDependency, err)
	}
	return compute.Transient(codes.TransientDependency, err)
}

// overloadSignal reports whether err is the API server saying it cannot
// keep up: 429 Too Many Requests (priority and fairness, max in-flight),
// a request it gave up on (504, "did not complete within requested
// timeout"), a server timeout it asks to retry, or 503. A client-side
// deadline is not one: the caller's own bound says nothing of the server.
func overloadSignal(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err)
}

// imageRef is a container image reference: [registry[:port]/]path[:tag][@sha256:digest].
var imageRef = regexp.MustCompile(`^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// ValidImageRef reports whether ref is a well-formed image reference.
func ValidImageRef(ref string) bool { return len(ref) <= 255 && imageRef.MatchString(ref) }

// Credentials resolves a revision's harnessAuth binding (see compute.Credentials).
type Credentials = compute.Credentials

// CredentialsFunc adapts a function to Credentials.
type CredentialsFunc = compute.CredentialsFunc

// Config configures the driver. Zero durations take the constants above.
type Config struct {
	// Name is the driver name; default Name.
	Name string
	// GatewayImage runs gatewayd (and the private-state init container).
	GatewayImage string
	// HarnessImage runs harnessd + nodehost.
	HarnessImage string
	// StorageClass for both claims; empty uses the cluster default.
	StorageClass string
	// NodeSelector places data-plane Pods; GatewayNodeSelector places
	// dedicated Gateways on the trusted pool (docs/design/seed-000.md#step-2).
	NodeSelector        map[string]string
	GatewayNodeSelector map[string]string
	// Credentials delivers the model credential; nil delivers none (the
	// Pods then hold NOT_CONFIGURED at startup). NamespaceSecrets resolves
	// each revision's reference in its own Namespace's sources.
	Credentials Credentials
	// LegacyCredentialNamespace is the Kubernetes namespace a registration
	// location secret:<secret>[#<key>] names without one: where releases
	// before credential sources resolved every secret: reference
	// (OCE_CREDENTIAL_NAMESPACE). Only a cluster admin's registration reads
	// there, once, to copy a value into a Namespace's own source.
	LegacyCredentialNamespace string
	// ProviderBaseURLs maps OPENAI / ANTHROPIC to the model endpoint that
	// replaces the provider's default one: rendered into every Gateway and
	// Harness (contract.EnvProviderBaseURLPrefix) and called by the
	// coordinator's pre-cutover credential check (tests: the offline fake
	// provider as an in-cluster Service).
	ProviderBaseURLs map[string]string
	// Coordinator is where the coordinator's own Pods run: the Gateway
	// policies admit them to the status port (setup codes, node lists,
	// relayed turns). Empty: no such rule (a coordinator outside the
	// cluster reaches no Pod address anyway).
	Coordinator CoordinatorPeer
	// ModelEgress is where the model-holding Pod may connect (a model
	// proxy, an in-cluster provider); empty: any public address on TCP 443.
	ModelEgress []EgressPeer
	// Ingress is the published route's proxy (an ingress controller's
	// namespace and Pods), admitted to every Gateway's port; empty: none.
	Ingress IngressPeer
	// Subject is the driver's own identity (kubernetes.Identity): in every
	// managed namespace it creates it binds the ClusterRole NamespaceRole to
	// it (least privilege: its namespaced permissions hold only there).
	// Empty: no RoleBinding (an identity that holds them otherwise, e.g. a
	// test's administrator).
	Subject rbacv1.Subject
	// RBACWait bounds the wait for a RoleBinding just created to take
	// effect (the API server's authorizer learns of it asynchronously);
	// zero: DefaultRBACWait.
	RBACWait time.Duration
	// GatewayStopWait, HarnessStopWait and PollInterval override the stop
	// deadlines (tests inject shorter ones).
	GatewayStopWait time.Duration
	HarnessStopWait time.Duration
	PollInterval    time.Duration
	// GatewayStatus reaches a dedicated Gateway's status routes (setup
	// codes, workspace nodes); nil uses HTTPGatewayStatus over the client.
	GatewayStatus GatewayStatus
	// ProbeBeforeCutover runs a staged embedded replacement's model probe
	// in a probe Pod while the predecessor serves (probepod.go).
	ProbeBeforeCutover bool
	// ObserveCache answers at-rest observations, a starting revision's
	// "not yet" and in-sync drift checks from watch-fed caches of each
	// managed namespace's oce Pods, Deployments, Services, ConfigMaps and
	// NetworkPolicies (cache.go) instead of API requests per Agent per
	// pass. The coordinator turns it on;
	// unit tests over a fake clientset leave it off unless they test it.
	ObserveCache bool
	// WatchClient is the client the caches list and watch with; nil uses
	// the driver's. The server gives it one without a client-side rate
	// limit: a cache costs one list and one watch per kind and namespace,
	// once, and must not queue behind a deploy storm's requests (the API
	// server's priority and fairness still applies).
	WatchClient kubernetes.Interface
	// StreamingLists lets the caches fill through client-go's streaming
	// lists (a watch that sends the initial objects, WatchListClient).
	// Off, as the coordinator runs, each cache lists once from the API
	// server's watch cache and then watches from there (listthenwatch.go).
	StreamingLists bool
	// ClientQPS is the request rate the client was given (client-go's
	// rest.Config.QPS); the driver admits new activations at
	// ClientQPS/ActivationRequestBudget (admission.go). Zero admits without
	// limit.
	ClientQPS float64
	// Now is the clock setup-code expiry is judged by; nil uses time.Now.
	Now func() time.Time
	// Logger receives JSON logs; nil discards.
	Logger *slog.Logger
}

// CoordinatorPeer names the coordinator's Pods for network policies.
type CoordinatorPeer struct {
	Namespace string
	PodLabels map[string]string
}

// EgressPeer is one address block and TCP port Pods may reach.
type EgressPeer struct {
	CIDR string
	Port int
}

// IngressPeer names Pods by their namespace's labels (required) and their
// own (optional).
type IngressPeer struct {
	NamespaceLabels map[string]string
	PodLabels       map[string]string
}

// Driver is the Kubernetes compute driver.
type Driver struct {
	cfg    Config
	c      kubernetes.Interface
	log    *slog.Logger
	status GatewayStatus
	now    func() time.Time

	mu       sync.Mutex
	prepared map[string]int    // revision → preparation level reached (cheap re-checks)
	nsReady  map[string]string // Namespaces ensured by this process → the quota they got
	// dedicated revision → the workspace node its enrollment Secret
	// recorded at the last full check (a memo: a new process reads it once)
	nodeSeen map[string]string

	cacheMu sync.Mutex
	caches  map[string]*nsCache // physical namespace → its watch-fed caches (cache.go)
	// onChange hears of cache changes (NotifyChanges); changed collects
	// the Agents told in the next coalesced notification (non-nil while
	// one waits); changedAny: an object without an Agent changed.
	onChange   func(agentIDs []string)
	changed    map[string]bool
	changedAny bool

	oneByOne     atomic.Bool // prepare without waves: a benchmark's baseline (wave.go)
	serviceFirst atomic.Bool // the Gateway Service before the Gateway: a benchmark's baseline (wave.go)
}

var _ compute.ChangeNotifier = (*Driver)(nil)

var _ compute.Driver = (*Driver)(nil)

// New returns a driver over client.
func New(cfg Config, client kubernetes.Interface) (*Driver, error) {
	if client == nil {
		return nil, errors.New("kubernetes: nil client")
	}
	for name, ref := range map[string]string{"GatewayImage": cfg.GatewayImage, "HarnessImage": cfg.HarnessImage} {
		if !ValidImageRef(ref) {
			return nil, fmt.Errorf("%w: %s %q is not an image reference", ErrConfig, name, ref)
		}
	}
	for name, sel := range map[string]map[string]string{"NodeSelector": cfg.NodeSelector, "GatewayNodeSelector": cfg.GatewayNodeSelector,
		"Coordinator.PodLabels": cfg.Coordinator.PodLabels, "Ingress.NamespaceLabels": cfg.Ingress.NamespaceLabels,
		"Ingress.PodLabels": cfg.Ingress.PodLabels} {
		for k, v := range sel {
			if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
				return nil, fmt.Errorf("%w: %s entry %q=%q is not a label", ErrConfig, name, k, v)
			}
		}
	}
	if len(cfg.Ingress.PodLabels) > 0 && len(cfg.Ingress.NamespaceLabels) == 0 {
		return nil, fmt.Errorf("%w: Ingress.PodLabels without Ingress.NamespaceLabels", ErrConfig)
	}
	for _, e := range cfg.ModelEgress {
		if _, _, err := net.ParseCIDR(e.CIDR); err != nil || e.Port < 1 || e.Port > 65535 {
			return nil, fmt.Errorf("%w: ModelEgress entry %s:%d is not CIDR:port", ErrConfig, e.CIDR, e.Port)
		}
	}
	if cfg.Name == "" {
		cfg.Name = Name
	}
	if cfg.GatewayStopWait <= 0 {
		cfg.GatewayStopWait = GatewayStopWait
	}
	if cfg.HarnessStopWait <= 0 {
		cfg.HarnessStopWait = HarnessStopWait
	}
	if cfg.RBACWait <= 0 {
		cfg.RBACWait = DefaultRBACWait
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = StopPollInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	status := cfg.GatewayStatus
	if status == nil {
		status = &HTTPGatewayStatus{Client: client}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Driver{cfg: cfg, c: client, log: log.With("driver", cfg.Name), status: status, now: now,
		prepared: map[string]int{}, nsReady: map[string]string{}, nodeSeen: map[string]string{},
		caches: map[string]*nsCache{}}, nil
}

// Capabilities implements compute.Driver: embedded OpenClaw and dedicated
// Codex (dedicated OpenClaw needs a provisioning SandboxDriver this driver
// does not have), stopped predecessors for dedicated revisions, activation
// after the commit. Dedicated Codex advertises exactly the login modes the
// Harness supports (oauth and credential_source need a credential service
// harnessd does not have, so they are refused at admission).
func (d *Driver) Capabilities() compute.Capabilities {
	return compute.Capabilities{
		Name: d.cfg.Name,
		Topologies: map[contract.Topology][]string{
			contract.Embedded:       {"api_key"},
			contract.DedicatedCodex: append([]string(nil), CodexLoginModes...),
		},
		StoppedPredecessors: map[string]bool{state.ModeDedicated: true},
	}
}

// CodexLoginModes are the Codex login modes the Harness (harnessd)
// supports: the dedicated Codex bindings the driver advertises, no more.
var CodexLoginModes = []string{contract.LoginAPIKey, contract.LoginCodexPAT, contract.LoginServiceAccount}
