// Package compute defines the Driver a compute target (Kubernetes, a local
// process host, the in-memory test driver) implements to realize an Agent's
// topology, and the Capabilities admission and the activation engine consult.
package compute

import (
	"context"
	"errors"
	"fmt"
	"io"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// Driver realizes AgentRevisions on one compute target. Every method is
// idempotent: the activation engine retries after failures, lost claims and
// leader changes, so a call may repeat for the same revision.
type Driver interface {
	// Capabilities describes what the driver supports; constant per driver.
	Capabilities() Capabilities
	// EnsureNamespace prepares the Namespace's runtime namespaces.
	EnsureNamespace(ctx context.Context, ns state.Namespace) error
	// PrepareRevision creates the revision's workloads without routing to them.
	PrepareRevision(ctx context.Context, rev state.Revision) error
	// ObserveRevision reports readiness. A held runtime failure is reported
	// in Observation.HeldCode (not as an error); an error means the
	// observation itself failed and is retried.
	ObserveRevision(ctx context.Context, rev state.Revision) (Observation, error)
	// ActivateRevision routes the Agent's stable endpoint to the revision.
	ActivateRevision(ctx context.Context, rev state.Revision) error
	// StopRevision stops the revision's runtime: Gateway first, observed gone,
	// then the Harness. A runtime it found live is reported in
	// StopResult.Found; one that had come back after an earlier stop this
	// driver remembers, in StopResult.CameBack — not as an error.
	StopRevision(ctx context.Context, rev state.Revision) (StopResult, error)
	// RetireRevision removes a superseded revision's resources, keeping the
	// Agent's storage claims.
	RetireRevision(ctx context.Context, rev state.Revision) error
	// DeleteAgentRuntimeCredentials deletes the Agent's exact-owned claims and
	// runtime credentials after every revision was retired.
	DeleteAgentRuntimeCredentials(ctx context.Context, agent state.Agent) error
	// DeleteNamespace removes the Namespace's runtime namespaces.
	DeleteNamespace(ctx context.Context, ns state.Namespace) error
}

// ChangeNotifier is optionally implemented by a driver that learns of
// changes to what it observes (watch-fed caches): after NotifyChanges it
// calls fn, which must not block, soon after each change, coalesced, with
// the Agents whose objects changed (nil: any Agent may have).
type ChangeNotifier interface {
	NotifyChanges(fn func(agentIDs []string))
}

// Warmer is optionally implemented by a driver that answers observations
// from caches it fills: a new leader's engine warms it with every active
// revision before its first health round, so that round — and a leader
// change at any fleet size — is answered from the caches, not with a
// request per Agent.
type Warmer interface {
	// WarmUp starts what answers observations of revs and waits until it
	// can, or ctx ends; it reports whether everything was ready.
	WarmUp(ctx context.Context, revs []state.Revision) bool
}

// Standby is optionally implemented by a Warmer whose caches a follower
// keeps: while a replica follows, its driver is kept warm with every active
// revision, so when it is elected its first round is answered from synced
// caches at once instead of after listing everything it observes.
type Standby interface {
	// KeepWarm makes what answers observations match revs: it starts what
	// they need, stops what only revisions no longer given needed, and
	// waits like WarmUp.
	KeepWarm(ctx context.Context, revs []state.Revision) bool
}

// Admitter is optionally implemented by a driver whose requests to its
// compute target are rate-limited. The engine starts new activations no
// faster than AdmissionRate, so a deploy storm queues in the replicated work
// queue — where it costs nothing and survives a leader change — instead of
// in the driver's client, where every activation already under way and
// every observation would wait behind it.
type Admitter interface {
	// AdmissionRate is the rate (per second) and burst of new activations
	// the driver can serve; a rate ≤ 0 admits without limit.
	AdmissionRate() (perSecond float64, burst int)
}

// Repairer is optionally implemented by a driver that can restore what
// activation left for an Agent's active revision when it was deleted or
// edited by hand (drift): the health watcher calls it for active Agents
// with no work in flight. A repair creates no revision and never touches
// storage claims.
type Repairer interface {
	// RepairRevision compares the active revision's rendering with what
	// exists, recreates what is missing and restores what was edited, and
	// returns what it changed or found in its way; none when nothing
	// drifted. An error (the coordinator could not look or write) is
	// retried later and says nothing of the Agent's health.
	RepairRevision(ctx context.Context, rev state.Revision) ([]Repair, error)
}

// Repair actions (closed set).
const (
	// RepairRecreated: the object was missing and was created again.
	RepairRecreated = "recreated"
	// RepairRestored: the object's fields the driver sets were edited and
	// were written back.
	RepairRestored = "restored"
	// RepairForeign: an object not owned by the driver is where the
	// rendering goes; reported, never overwritten.
	RepairForeign = "foreign"
)

// Repair is one object RepairRevision acted on or found in its way.
type Repair struct {
	Kind      string // Deployment, Service, ConfigMap, NetworkPolicy
	Namespace string // the physical namespace on the compute target
	Name      string
	Action    string // RepairRecreated, RepairRestored or RepairForeign
}

// Changed reports whether the repair wrote something.
func (r Repair) Changed() bool { return r.Action == RepairRecreated || r.Action == RepairRestored }

// Endpointer is optionally implemented by a driver that can say where an
// Agent's stable Gateway endpoint is (occ agent describe, occ agent send).
type Endpointer interface {
	// Endpoints returns the Agent's endpoint, or an error wrapping
	// ErrNoEndpoint when the Agent has none (not active on this driver).
	Endpoints(ctx context.Context, agent state.Agent) (Endpoints, error)
}

// ErrNoEndpoint: the Agent has no routed Gateway on this driver.
var ErrNoEndpoint = errors.New("compute: the agent has no gateway endpoint")

// Endpoints is where an Agent's Gateway is reached.
type Endpoints struct {
	RevisionID string // the revision the endpoint routes to, when known
	// Gateway is the Gateway's URL inside the compute target.
	Gateway string
	// Socket is a Unix socket on the coordinator's machine forwarding to
	// the Gateway (local driver).
	Socket string
	// PasswordFile holds the Agent's gateway password on the coordinator's
	// machine (local driver); the password itself never leaves the driver.
	PasswordFile string
}

// LogReader is optionally implemented by a driver that can stream the logs
// of a revision's supervisors (occ agent logs): files of the local driver,
// Pod logs on Kubernetes.
type LogReader interface {
	// Logs writes the container's log to w: the last opts.Tail lines (all
	// when 0), then, with opts.Follow, what it appends until ctx ends. A
	// revision without such logs is an error wrapping ErrNoLogs.
	Logs(ctx context.Context, rev state.Revision, opts LogOptions, w io.Writer) error
}

// Containers whose logs LogReader serves.
const (
	ContainerGateway = "gateway"
	ContainerHarness = "harness"
)

// LogOptions select what LogReader.Logs writes.
type LogOptions struct {
	Container string // ContainerGateway or ContainerHarness
	Follow    bool
	Tail      int
}

// ErrNoLogs: the revision has no log for the container on this driver.
var ErrNoLogs = errors.New("compute: no logs for this revision and container")

// Observation is one readiness observation of a revision.
type Observation struct {
	Ready  bool
	Reason string // short, closed-vocabulary reason when not ready
	// HeldCode is the runtime diagnostic code of a held startup failure
	// (docs/design/reference.md#s1-8); empty when nothing is held. A held revision never
	// becomes ready by itself, so the engine fails it at once.
	HeldCode codes.Code
	Cause    *codes.Cause // kept for MODEL_PROBE_FAILED
	// Phase is the runtime's latest startup phase (closed set of the
	// supervisors' phase names), when the driver can read it.
	Phase string
	// Staged: ready to be cut over, but not serving — an embedded
	// replacement whose gateway starts at activation. The engine may commit
	// it; the health watcher never counts it as serving.
	Staged bool
	// Watched: the verdict came from caches the driver keeps current by
	// watching, and a change of it reaches ChangeNotifier's function. The
	// engine re-observes such an Agent on that notice, and otherwise only
	// at its resync bound (engine.DefaultResyncInterval), instead of every
	// health interval.
	Watched bool
}

// StopResult is the outcome of StopRevision.
type StopResult struct {
	Stopped bool // the runtime is gone
	// Found: a live runtime was found and stopped. The engine judges a
	// revision it had recorded as stopped (a replicated record) that is
	// Found again as come back, so a driver need not remember its stops
	// across a leader change.
	Found    bool
	CameBack bool // it had been running again after an earlier stop
}

// Capabilities is what a driver supports.
type Capabilities struct {
	// Name identifies the driver; a revision's ComputeID must name it.
	Name string
	// Topologies maps each supported topology to the harnessAuth methods
	// the driver can deliver for it ("api_key", "codex_pat", …; "runtime"
	// for host-held credentials). A topology absent from the map is
	// unsupported; a present one with no methods supports no binding.
	Topologies map[contract.Topology][]string
	// StoppedPredecessors lists the modes for which every earlier revision
	// must be stopped before a new one is prepared (dedicated on Kubernetes).
	StoppedPredecessors map[string]bool
	// ActivateBeforeCommit makes the engine call ActivateRevision before the
	// active-revision compare-and-set instead of after it (the default).
	ActivateBeforeCommit bool
}

// SupportsTopology reports whether the driver can run (harness, mode).
func (c Capabilities) SupportsTopology(harness, mode string) bool {
	t, ok := contract.Of(harness, mode)
	if !ok {
		return false
	}
	_, ok = c.Topologies[t]
	return ok
}

// SupportsHarnessAuth reports whether the driver can deliver a harnessAuth
// binding of method for (harness, mode).
func (c Capabilities) SupportsHarnessAuth(harness, mode, method string) bool {
	t, ok := contract.Of(harness, mode)
	if !ok {
		return false
	}
	for _, m := range c.Topologies[t] {
		if m == method {
			return true
		}
	}
	return false
}

// RequiresStoppedPredecessors reports whether revisions of mode need every
// earlier revision stopped before preparation.
func (c Capabilities) RequiresStoppedPredecessors(mode string) bool {
	return c.StoppedPredecessors[mode]
}

// Error carries a closed-set code the engine records, and whether retrying
// can help. Drivers wrap failures the engine should branch on with it; any
// other error is transient.
type Error struct {
	Code      codes.Code // e.g. TRANSIENT_DEPENDENCY, FOREIGN_WORKLOAD
	Permanent bool       // the work fails instead of being retried
	Err       error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %v", e.Code, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Permanent returns an Error the engine does not retry.
func Permanent(code codes.Code, err error) error {
	return &Error{Code: code, Permanent: true, Err: err}
}

// Transient returns a retryable Error with code.
func Transient(code codes.Code, err error) error { return &Error{Code: code, Err: err} }

// ErrOverloaded marks a transient error as the compute target's own signal
// that it is overloaded (Kubernetes: 429, a request the API server timed
// out, 503): the engine then starts new activations more slowly until the
// target is calm again, instead of pacing only by the driver's own budget.
var ErrOverloaded = errors.New("compute: target overloaded")

// Overloaded returns a retryable Error with code, marked ErrOverloaded.
func Overloaded(code codes.Code, err error) error {
	return &Error{Code: code, Err: fmt.Errorf("%w: %w", ErrOverloaded, err)}
}

// ErrorCode returns err's code and permanence; an error without one is
// transient with fallback as its code.
func ErrorCode(err error, fallback codes.Code) (code codes.Code, permanent bool) {
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code, e.Permanent
	}
	return fallback, false
}

// Messenger is optionally implemented by a driver that can relay one turn
// to an Agent's active Gateway: `occ agent send` through the coordinator
// (POST …/agents/{agent}/messages) where the driver offers no socket on the
// operator's machine. The Gateway's own supervisor runs the turn as its
// loopback operator; its password never leaves the runtime.
type Messenger interface {
	// SendMessage runs one turn in session and returns the reply and the
	// revision whose Gateway answered; delta receives the reply text as it
	// streams. It fails with ErrNoEndpoint when the Agent has no serving
	// Gateway, or a *TurnError once the Gateway was reached.
	SendMessage(ctx context.Context, agent state.Agent, session, message string, delta func(string)) (reply, revisionID string, err error)
}

// TurnError is a relayed turn that failed after the Gateway was reached.
type TurnError struct {
	// Code is UNAVAILABLE (the gateway did not accept the operator in
	// time), DISCONNECTED (the connection ended mid-turn) or TURN_FAILED
	// (the gateway ended the turn with an error).
	Code    string
	Message string
}

func (e *TurnError) Error() string { return e.Code + ": " + e.Message }
