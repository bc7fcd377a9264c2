// Package memory is an in-memory compute.Driver for tests and benchmarks: it
// keeps a runtime record per revision, logs every call in order, and injects
// faults per operation and revision (errors once or N times, never-ready,
// held codes, predecessors that come back, blocking hooks). It sleeps never.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// Op names a Driver operation in the call log and in fault rules.
type Op string

// Operations.
const (
	OpEnsureNamespace   Op = "EnsureNamespace"
	OpPrepare           Op = "PrepareRevision"
	OpObserve           Op = "ObserveRevision"
	OpActivate          Op = "ActivateRevision"
	OpStop              Op = "StopRevision"
	OpRetire            Op = "RetireRevision"
	OpDeleteCredentials Op = "DeleteAgentRuntimeCredentials"
	OpDeleteNamespace   Op = "DeleteNamespace"
	OpCheckCredential   Op = "CheckCredential"
)

// Name is the driver name of the default capabilities.
const Name = "memory"

// ErrInjected is the default injected failure.
var ErrInjected = errors.New("memory: injected failure")

// Call is one logged driver call. ID is the revision ID, or the Agent or
// Namespace ID for the operations on those.
type Call struct {
	Op Op
	ID string
}

// Runtime is the driver's record of one revision's runtime.
type Runtime struct {
	Prepared bool
	Running  bool
	Stops    int // StopRevision calls that found it running
	Retired  bool
}

// Hook runs at the start of an operation (before faults are evaluated); it
// may block on channels the test controls and its error fails the call.
type Hook func(ctx context.Context, id string) error

type faultKey struct {
	op Op
	id string // "" matches every id
}

type fault struct {
	remaining int // < 0: forever
	err       error
}

// Driver is the in-memory driver. The zero value is not usable; call New.
type Driver struct {
	mu        sync.Mutex
	caps      compute.Capabilities
	calls     []Call
	runtimes  map[string]*Runtime
	routes    map[string]string // agent → routed revision
	faults    map[faultKey]*fault
	readyIn   map[string]int // revision → observations left before ready (<0 never)
	held      map[string]compute.Observation
	hooks     map[Op]Hook
	deletedNS map[string]bool
	deletedAg map[string]bool
	rejected  map[string]compute.CredentialCheck
	// creds and locations: the credential store (credentials.go).
	creds     map[string]storedCredential
	locations map[string]map[string][]byte

	wsOnce sync.Once
	wsp    *workspaces // workspace.go

	shared *sharedDir // shared.go; nil keeps records in this process
}

var _ compute.Driver = (*Driver)(nil)

// DefaultCapabilities follows the Kubernetes driver: the three approved
// topologies with their harnessAuth methods (docs/design/reference.md#s7-3, docs/design/reference.md#s7-4), stopped
// predecessors for dedicated revisions, activation after the commit.
func DefaultCapabilities() compute.Capabilities {
	return compute.Capabilities{
		Name: Name,
		Topologies: map[contract.Topology][]string{
			contract.Embedded:          {"api_key"},
			contract.DedicatedCodex:    {"api_key", "codex_pat", "oauth", "chatgpt_service_account", "credential_source"},
			contract.DedicatedOpenClaw: {"api_key", "credential_source"},
		},
		StoppedPredecessors: map[string]bool{state.ModeDedicated: true},
	}
}

// New returns a driver with caps.
func New(caps compute.Capabilities) *Driver {
	return &Driver{caps: caps, runtimes: map[string]*Runtime{}, routes: map[string]string{},
		faults: map[faultKey]*fault{}, readyIn: map[string]int{}, held: map[string]compute.Observation{},
		hooks: map[Op]Hook{}, deletedNS: map[string]bool{}, deletedAg: map[string]bool{},
		rejected: map[string]compute.CredentialCheck{}}
}

// Fail makes the next n calls of op for id ("" = any id) fail with err
// (ErrInjected when nil); n < 0 fails forever, n == 0 clears the rule.
func (d *Driver) Fail(op Op, id string, n int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		err = ErrInjected
	}
	if n == 0 {
		delete(d.faults, faultKey{op, id})
		return
	}
	d.faults[faultKey{op, id}] = &fault{remaining: n, err: err}
}

// ReadyAfter makes revID report not ready for its next n observations;
// n < 0 means never ready.
func (d *Driver) ReadyAfter(revID string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readyIn[revID] = n
}

// Hold makes revID report a held runtime failure.
func (d *Driver) Hold(revID string, code codes.Code, cause *codes.Cause) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[revID] = compute.Observation{Reason: "held", HeldCode: code, Cause: cause}
}

// Observe makes every later ObserveRevision of revID answer obs (a staged
// replacement, a runtime in a given phase); Hold is the held case.
func (d *Driver) Observe(revID string, obs compute.Observation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[revID] = obs
}

// ComeBack simulates a stopped runtime started again behind the engine's
// back (a lost claim's late write): the next StopRevision reports CameBack.
func (d *Driver) ComeBack(revID string) {
	_ = d.record(revID, "", func(r *Runtime, _ *string) { r.Running = true })
}

// ForgetStops makes the driver forget every stop it made, as a new leader's
// driver would: its StopRevision then reports Found, never CameBack.
func (d *Driver) ForgetStops() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runtimes {
		r.Stops = 0
	}
}

// SetHook installs h for op (nil removes it).
func (d *Driver) SetHook(op Op, h Hook) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h == nil {
		delete(d.hooks, op)
		return
	}
	d.hooks[op] = h
}

// Calls returns the call log in order.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

// CallsOf returns the ids of the logged calls of op, in order.
func (d *Driver) CallsOf(op Op) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for _, c := range d.calls {
		if c.Op == op {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Runtime returns a copy of revID's runtime record.
func (d *Driver) Runtime(revID string) Runtime {
	var out Runtime
	_ = d.record(revID, "", func(r *Runtime, _ *string) { out = *r })
	return out
}

// Route returns the revision the Agent's stable endpoint routes to.
func (d *Driver) Route(agentID string) string {
	var out string
	_ = d.record("", agentID, func(_ *Runtime, route *string) { out = *route })
	return out
}

// CredentialsDeleted reports whether DeleteAgentRuntimeCredentials succeeded
// for agentID.
func (d *Driver) CredentialsDeleted(agentID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deletedAg[agentID]
}

func (d *Driver) runtime(id string) *Runtime {
	r, ok := d.runtimes[id]
	if !ok {
		r = &Runtime{}
		d.runtimes[id] = r
	}
	return r
}

// begin logs the call, runs the hook outside the lock, then applies faults.
func (d *Driver) begin(ctx context.Context, op Op, id string) error {
	d.mu.Lock()
	d.calls = append(d.calls, Call{Op: op, ID: id})
	h := d.hooks[op]
	d.mu.Unlock()
	if h != nil {
		if err := h(ctx, id); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range []faultKey{{op, id}, {op, ""}} {
		f, ok := d.faults[k]
		if !ok {
			continue
		}
		if f.remaining > 0 {
			f.remaining--
			if f.remaining == 0 {
				delete(d.faults, k)
			}
		}
		return fmt.Errorf("memory %s %s: %w", op, id, f.err)
	}
	return nil
}

// Capabilities implements compute.Driver.
func (d *Driver) Capabilities() compute.Capabilities { return d.caps }

// EnsureNamespace implements compute.Driver.
func (d *Driver) EnsureNamespace(ctx context.Context, ns state.Namespace) error {
	return d.begin(ctx, OpEnsureNamespace, ns.ID)
}

// PrepareRevision implements compute.Driver: the runtime starts (unrouted).
func (d *Driver) PrepareRevision(ctx context.Context, rev state.Revision) error {
	if err := d.begin(ctx, OpPrepare, rev.ID); err != nil {
		return err
	}
	return d.record(rev.ID, "", func(r *Runtime, _ *string) { r.Prepared, r.Running, r.Retired = true, true, false })
}

// ObserveRevision implements compute.Driver.
func (d *Driver) ObserveRevision(ctx context.Context, rev state.Revision) (compute.Observation, error) {
	if err := d.begin(ctx, OpObserve, rev.ID); err != nil {
		return compute.Observation{}, err
	}
	var obs compute.Observation
	err := d.record(rev.ID, "", func(r *Runtime, _ *string) {
		if h, ok := d.held[rev.ID]; ok {
			obs = h
			return
		}
		if !r.Prepared || !r.Running {
			obs = compute.Observation{Reason: "not-running"}
			return
		}
		if n := d.readyIn[rev.ID]; n != 0 {
			if n > 0 {
				d.readyIn[rev.ID] = n - 1
			}
			obs = compute.Observation{Reason: "starting"}
			return
		}
		obs = compute.Observation{Ready: true}
	})
	return obs, err
}

// ActivateRevision implements compute.Driver: the Agent's route moves.
func (d *Driver) ActivateRevision(ctx context.Context, rev state.Revision) error {
	if err := d.begin(ctx, OpActivate, rev.ID); err != nil {
		return err
	}
	return d.record(rev.ID, rev.AgentID, func(r *Runtime, route *string) {
		*route = rev.ID
		r.Running = true
	})
}

// StopRevision implements compute.Driver.
func (d *Driver) StopRevision(ctx context.Context, rev state.Revision) (compute.StopResult, error) {
	if err := d.begin(ctx, OpStop, rev.ID); err != nil {
		return compute.StopResult{}, err
	}
	var res compute.StopResult
	err := d.record(rev.ID, "", func(r *Runtime, _ *string) {
		res = compute.StopResult{Stopped: true, Found: r.Running, CameBack: r.Running && r.Stops > 0}
		if r.Running {
			r.Stops++
		}
		r.Running = false
	})
	if err != nil {
		return compute.StopResult{}, err
	}
	return res, nil
}

// RetireRevision implements compute.Driver.
func (d *Driver) RetireRevision(ctx context.Context, rev state.Revision) error {
	if err := d.begin(ctx, OpRetire, rev.ID); err != nil {
		return err
	}
	return d.record(rev.ID, rev.AgentID, func(r *Runtime, route *string) {
		r.Running, r.Retired = false, true
		if *route == rev.ID {
			*route = ""
		}
	})
}

// DeleteAgentRuntimeCredentials implements compute.Driver.
func (d *Driver) DeleteAgentRuntimeCredentials(ctx context.Context, agent state.Agent) error {
	if err := d.begin(ctx, OpDeleteCredentials, agent.ID); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletedAg[agent.ID] = true
	return nil
}

// DeleteNamespace implements compute.Driver.
func (d *Driver) DeleteNamespace(ctx context.Context, ns state.Namespace) error {
	if err := d.begin(ctx, OpDeleteNamespace, ns.ID); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletedNS[ns.ID] = true
	return nil
}

var _ compute.CredentialChecker = (*Driver)(nil)

// RejectCredential makes the pre-cutover credential check of revID reject
// its credential (AUTHENTICATION_FAILED with diagnostics).
func (d *Driver) RejectCredential(revID string, diagnostics map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rejected[revID] = compute.CredentialCheck{Outcome: state.CredentialRejected, HeldCode: codes.AuthenticationFailed,
		Reason: "401", Diagnostics: diagnostics}
}

// CheckCredential implements compute.CredentialChecker: it passes unless
// RejectCredential named the revision.
func (d *Driver) CheckCredential(ctx context.Context, rev state.Revision) (compute.CredentialCheck, error) {
	if err := d.begin(ctx, OpCheckCredential, rev.ID); err != nil {
		return compute.CredentialCheck{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.rejected[rev.ID]; ok {
		return c, nil
	}
	return compute.CredentialCheck{Outcome: state.CredentialPassed, Reason: "2xx"}, nil
}
