// Package engine is the activation engine. It runs on the Raft leader only:
// it claims revision work under a lease, realizes it through a
// compute.Driver, and records every step as a replicated command (docs/design/seed-000.md
// step 3, docs/design/reference.md#s6). A lost claim fails closed: nothing more is written.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/backoff"
	"oce.dev/oce/shared/codes"
)

// Defaults, with the reference worker's numbers (docs/design/reference.md#s6-1, docs/design/reference.md#s6-2).
// DefaultConcurrency is this engine's own: an activation is a chain of
// commit round trips, so throughput is concurrency ÷ chain latency, and
// concurrent proposals share Raft's batched fsyncs (docs/PERFORMANCE.md).
const (
	DefaultLease             = 5 * time.Second   // claim lease; renewed every lease/3
	DefaultBackoffBase       = time.Second       // retry delay 1 s·2^(attempt−1) …
	DefaultBackoffMax        = 300 * time.Second // … capped at 300 s, jittered
	DefaultReadinessMin      = 500 * time.Millisecond
	DefaultReadinessMax      = 5 * time.Second
	DefaultReadinessDivisor  = 40                // re-observe after age/40, clamped to [min, max]
	DefaultConvergenceWindow = 900 * time.Second // a revision not ready by then fails
	DefaultPollInterval      = 250 * time.Millisecond
	DefaultConcurrency       = 256 // Agents processed in parallel (one claim per Agent)
)

// Proposer replicates commands. The Raft store implements it on the leader.
type Proposer interface {
	// Propose stamps the leader's time on a command, replicates it and
	// applies it, returning state.Machine.ApplyCommand's result and error;
	// the engine proposes through state.Propose, which types the result.
	state.Proposer
	// VerifyLeader confirms this node still leads (a quorum round trip).
	VerifyLeader(ctx context.Context) error
	// Machine is the local replica, read for scheduling and re-validation.
	Machine() *state.Machine
}

// Config tunes the engine; zero fields take the defaults above.
type Config struct {
	// Owner prefixes claim owners (e.g. the node ID); every Run appends a
	// random suffix so claims of an earlier leadership term are never ours.
	Owner             string
	Lease             time.Duration
	BackoffBase       time.Duration
	BackoffMax        time.Duration
	ReadinessMin      time.Duration
	ReadinessMax      time.Duration
	ReadinessDivisor  int
	ConvergenceWindow time.Duration
	PollInterval      time.Duration
	Concurrency       int
	// ComputeID is the compute target revisions must name; empty means the
	// driver's Capabilities().Name. A revision with an empty ComputeID runs
	// on the default target.
	ComputeID string
	// Seed seeds the backoff jitter (0 picks one at random).
	Seed uint64
	// CredentialCheck is the installation's choice of activation order:
	// CredentialCheckBeforeCutover (default) or CredentialCheckSeed.
	CredentialCheck string
	// HealthInterval is how often the leader observes every active
	// revision's readiness; MaintenanceInterval how often it finalizes
	// active revisions whose finalization is still owed.
	HealthInterval      time.Duration
	MaintenanceInterval time.Duration
	// ResyncInterval bounds how long a watched observation (one the
	// driver keeps current and tells changes of) stands without a change
	// notice (resync.go).
	ResyncInterval time.Duration
	// Reauthorizer, when set, rechecks every claimed work's original actor
	// before any compute effect (reauth.go).
	Reauthorizer Reauthorizer
	// RepairInterval is how often an Agent observed ready is checked for
	// drift by a driver that repairs it (repair.go); negative turns drift
	// repair off. RepairRetry is the least time between two repairs of an
	// Agent observed not ready.
	RepairInterval time.Duration
	RepairRetry    time.Duration
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Lease, DefaultLease)
	def(&c.BackoffBase, DefaultBackoffBase)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.ReadinessMin, DefaultReadinessMin)
	def(&c.ReadinessMax, DefaultReadinessMax)
	def(&c.ConvergenceWindow, DefaultConvergenceWindow)
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.HealthInterval, DefaultHealthInterval)
	def(&c.MaintenanceInterval, DefaultMaintenanceInterval)
	def(&c.ResyncInterval, DefaultResyncInterval)
	def(&c.RepairRetry, DefaultRepairRetry)
	if c.RepairInterval == 0 {
		c.RepairInterval = DefaultRepairInterval
	}
	if c.CredentialCheck == "" {
		c.CredentialCheck = CredentialCheckBeforeCutover
	}
	if c.ReadinessDivisor <= 0 {
		c.ReadinessDivisor = DefaultReadinessDivisor
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Owner == "" {
		c.Owner = "engine"
	}
	return c
}

// Engine is the activation engine.
type Engine struct {
	cfg    Config
	p      Proposer
	d      compute.Driver
	caps   compute.Capabilities
	clk    Clock
	log    *slog.Logger
	notify chan struct{}

	rngMu sync.Mutex
	rng   *mrand.Rand

	busyMu sync.Mutex
	busy   map[string]bool // Agents with a claim processed by this engine

	starts   *admission   // new activations, when the driver is an Admitter (admit.go)
	overload overloadMark // the target's last overload signal (admit.go)

	q   *quiet        // quiescence (quiet.go)
	rep *repairs      // drift repair passes (repair.go)
	obs *observations // watched observations and change notices (resync.go)
}

// New returns an engine; log may be nil.
func New(cfg Config, p Proposer, d compute.Driver, clk Clock, log *slog.Logger) *Engine {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = RealClock{}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	caps := d.Capabilities()
	if cfg.ComputeID == "" {
		cfg.ComputeID = caps.Name
	}
	log = log.With("component", "engine")
	return &Engine{cfg: cfg, p: p, d: d, caps: caps, clk: clk, log: log,
		notify: make(chan struct{}, 1), rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		busy: map[string]bool{}, q: newQuiet(), rep: newRepairs(), obs: newObservations(), starts: admissionFor(d, log)}
}

// Notify wakes the engine (new work was admitted). It never blocks.
func (e *Engine) Notify() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// Run claims and processes work until ctx is done (leadership lost), then
// waits for its workers, which stop writing as soon as ctx is done.
func (e *Engine) Run(ctx context.Context) error {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	owner := e.cfg.Owner + "/" + hex.EncodeToString(suffix)
	var wg sync.WaitGroup
	defer wg.Wait()
	e.releaseStaleClaims(ctx, owner)
	e.q.mu.Lock()
	e.q.started = true
	e.q.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.watch(ctx)
	}()
	m := e.p.Machine()
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		changed := m.Changed()
		now := e.clk.Now()
		e.expire(ctx, now)
		if !e.full() {
			for _, w := range m.ClaimableN(now, e.cfg.Concurrency) {
				if !e.mayStart(w, now) {
					continue
				}
				if !e.reserve(w.AgentID) {
					continue
				}
				e.started(w, now)
				// Claims are proposed concurrently, so Raft batches them
				// (one fsync and one AppendEntries for many) instead of
				// paying a commit round trip per claim in this loop. The
				// reservation keeps one claim per Agent in flight.
				wg.Add(1)
				go func() {
					defer wg.Done()
					e.claimAndProcess(ctx, owner, w, now.Add(e.cfg.Lease))
				}()
			}
		}
		wait := e.cfg.PollInterval
		if next, ok := m.NextWakeup(now); ok && next.Sub(now) < wait {
			wait = next.Sub(now)
		}
		select {
		case <-ctx.Done():
		case <-e.notify:
		case <-changed:
			// Every applied command changes the state (heartbeats,
			// observations, a storm's claims), and a scan reads the whole
			// open queue: coalesce the changes of the next moment into
			// one scan instead of one scan each.
			select {
			case <-ctx.Done():
			case <-e.notify:
			case <-time.After(changeScanGap):
			}
		case <-e.clk.After(wait):
		}
	}
}

// changeScanGap is how long a state change's scan waits for the changes
// that follow it (real time: it only coalesces).
const changeScanGap = 10 * time.Millisecond

// claimAndProcess claims w (reserved for its Agent by the caller) and, when
// the claim succeeds, processes it; the reservation ends either way.
func (e *Engine) claimAndProcess(ctx context.Context, owner string, w state.Work, expiry time.Time) {
	defer e.release(w.AgentID)
	claimed, err := state.Propose(ctx, e.p, state.CmdClaimWork, state.ClaimWork{WorkID: w.ID, Owner: owner, LeaseExpiry: expiry})
	if err != nil {
		if !errors.Is(err, state.ErrNotClaimable) && ctx.Err() == nil {
			e.log.Warn("claim failed", "work", w.ID, "err", err.Error())
		}
		return
	}
	e.process(ctx, owner, claimed.Work)
}

// full reports whether Concurrency Agents are in flight already.
func (e *Engine) full() bool {
	e.busyMu.Lock()
	defer e.busyMu.Unlock()
	return len(e.busy) >= e.cfg.Concurrency
}

// expire fails work that ran out of attempts (MAX_ATTEMPTS_EXHAUSTED).
func (e *Engine) expire(ctx context.Context, now time.Time) {
	for _, w := range e.p.Machine().Exhausted(now) {
		if _, err := state.Propose(ctx, e.p, state.CmdExpireWork, state.ExpireWork{WorkID: w.ID}); err == nil {
			e.log.Info("work exhausted", "work", w.ID, "agent", w.AgentID, "code", state.CodeMaxAttemptsExhausted)
		}
	}
}

// reserve marks an Agent in flight locally, bounded by Concurrency.
func (e *Engine) reserve(agentID string) bool {
	e.busyMu.Lock()
	defer e.busyMu.Unlock()
	if e.busy[agentID] || len(e.busy) >= e.cfg.Concurrency {
		return false
	}
	e.busy[agentID] = true
	return true
}

func (e *Engine) release(agentID string) {
	e.busyMu.Lock()
	delete(e.busy, agentID)
	e.busyMu.Unlock()
	e.Notify()
}

// backoff is min(max, base·2^(attempt−1)), jittered into [d/2, d].
func (e *Engine) backoff(attempt int) time.Duration {
	d := backoff.Policy{Base: e.cfg.BackoffBase, Max: e.cfg.BackoffMax}.Delay(attempt - 1)
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	return backoff.Jittered(d, e.rng.Int64N)
}

// readinessDelay is age/divisor clamped to [ReadinessMin, ReadinessMax].
func (e *Engine) readinessDelay(age time.Duration) time.Duration {
	return min(max(age/time.Duration(e.cfg.ReadinessDivisor), e.cfg.ReadinessMin), e.cfg.ReadinessMax)
}

// process runs one claimed work item under its lease.
func (e *Engine) process(ctx context.Context, owner string, w state.Work) {
	cl := e.newClaim(ctx, owner, w)
	defer cl.close()
	if !e.reauthorized(cl) {
		return
	}
	switch w.Kind {
	case state.WorkActivate:
		e.activate(cl)
	case state.WorkStop:
		e.stop(cl)
	case state.WorkDelete:
		e.remove(cl)
	default:
		cl.fail(codes.InvalidTarget, "unknown work kind "+w.Kind)
	}
}
