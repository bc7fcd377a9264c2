package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// The leader's watcher (issue 14): it observes every active revision's
// readiness through the driver, so an Agent's state is observed, never
// assumed; it finalizes active revisions whose finalization is owed once
// their work ended (attempts spent); and it rolls an Agent back to the
// exact previous revision when its rollback policy says so.
const (
	// DefaultHealthInterval is how often active revisions are observed: the
	// kubelet readiness probe's period is 2 s (docs/design/reference.md#s1-7).
	DefaultHealthInterval = 2 * time.Second
	// DefaultMaintenanceInterval is how often owed finalizations are
	// requeued.
	DefaultMaintenanceInterval = DefaultLease
	// ObserveTimeout bounds one health observation.
	ObserveTimeout = 5 * time.Second
	// healthWorkers bounds concurrent health observations.
	healthWorkers = 8
)

// WarmUpTimeout bounds a new leader's wait for its driver's caches before
// the first health round (a round without them reads through the API).
const WarmUpTimeout = 10 * time.Second

// watch runs the watcher until ctx ends.
func (e *Engine) watch(ctx context.Context) {
	e.warmUp(ctx)
	nextMaint := e.clk.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.clk.After(e.cfg.HealthInterval):
		case <-e.q.kick:
		}
		dirty, full := e.obs.take()
		n, start := e.q.roundBegins(), e.p.Machine().Applied()
		whole := e.observeHealth(ctx, dirty, full)
		if now := e.clk.Now(); !now.Before(nextMaint) {
			e.maintain(ctx)
			nextMaint = now.Add(e.cfg.MaintenanceInterval)
		}
		if ctx.Err() == nil {
			e.q.roundFinished(n, start, whole)
		}
	}
}

// warmUp gives a driver that caches (compute.Warmer) every active revision
// of this compute target before the first round.
func (e *Engine) warmUp(ctx context.Context) {
	w, ok := e.d.(compute.Warmer)
	if !ok {
		return
	}
	revs := activeRevisionsOf(e.p.Machine(), e.cfg.ComputeID)
	if len(revs) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, WarmUpTimeout)
	defer cancel()
	start := time.Now()
	if !w.WarmUp(wctx, revs) && ctx.Err() == nil {
		e.log.Warn("driver caches not warm; the first rounds read through the API server", "revisions", len(revs))
		return
	}
	e.log.Info("driver caches warm", "revisions", len(revs), "ms", time.Since(start).Milliseconds())
}

func newWorkID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// maintain enqueues finalization work for every active revision whose
// finalization is owed and whose own work has ended.
func (e *Engine) maintain(ctx context.Context) {
	for _, a := range e.p.Machine().Unfinalized() {
		_, err := state.Propose(ctx, e.p, state.CmdRequeueFinalization, state.RequeueFinalization{AgentID: a.ID,
			RevisionID: a.ActiveRevisionID, WorkID: newWorkID()})
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("requeue finalization failed", "agent", a.ID, "err", err.Error())
			}
			continue
		}
		e.log.Warn("finalization requeued", "agent", a.ID, "revision", a.ActiveRevisionID,
			"code", "REVISION_FINALIZATION_INCOMPLETE")
		e.Notify()
	}
}

// observeHealth observes each active revision of this compute target that
// is due (resync.go: all when full) and records changes; then it considers
// a rollback. whole: no Agent was left unobserved.
func (e *Engine) observeHealth(ctx context.Context, dirty map[string]bool, full bool) (whole bool) {
	m := e.p.Machine()
	now := e.clk.Now()
	active := m.ActiveRevisions() // shared: read only
	sem := make(chan struct{}, healthWorkers)
	var wg sync.WaitGroup
	whole = true
	for id, revID := range active {
		// Only an Agent of this target is ever recorded watched, so one
		// not due is this target's; the Agent and its revision are read
		// only when due.
		if !e.obs.due(id, revID, now, dirty, full, e.cfg.ResyncInterval) {
			whole = false
			continue
		}
		a, ok := m.Agent(id)
		if !ok || a.ActiveRevisionID != revID || a.Deleting {
			continue
		}
		rev, ok := m.Revision(revID)
		if !ok || (rev.ComputeID != "" && rev.ComputeID != e.cfg.ComputeID) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			e.observeOne(ctx, a, rev)
		}()
	}
	wg.Wait()
	e.obs.keep(active)
	return whole
}

func (e *Engine) observeOne(ctx context.Context, a state.Agent, rev state.Revision) {
	octx, cancel := context.WithTimeout(ctx, ObserveTimeout)
	at := e.clk.Now()
	obs, err := e.d.ObserveRevision(octx, rev)
	cancel()
	// Watched only when ready and nothing below reads anything else.
	e.obs.record(a.ID, rev.ID, at, err == nil && obs.Watched && obs.Ready && !obs.Staged && obs.HeldCode == "")
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		e.sawOverload(err)
		code, permanent := compute.ErrorCode(err, "TRANSIENT_DEPENDENCY")
		if !permanent {
			// The coordinator could not look (API server slow or down, a
			// rate limit, a timeout): that says nothing of the Agent, so
			// its last observation stands and no rollback follows from it.
			e.log.Warn("observation failed; the last one stands", "agent", a.ID, "revision", rev.ID,
				"code", string(code), "err", err.Error())
			return
		}
		obs = compute.Observation{Reason: "observation-failed:" + string(code)}
	}
	// A staged revision (committed, its gateway not started yet) is not
	// serving.
	p := state.ObserveAgent{AgentID: a.ID, RevisionID: rev.ID, Ready: obs.Ready && !obs.Staged && obs.HeldCode == "",
		Reason: obs.Reason, HeldCode: string(obs.HeldCode)}
	if obs.Cause != nil {
		p.CauseKind, p.CauseDetail = string(obs.Cause.Kind), obs.Cause.Detail
	}
	if p.Ready {
		p.Reason = ""
	}
	h, had := e.p.Machine().Health(a.ID)
	changed := !had || h.RevisionID != p.RevisionID || h.Ready != p.Ready || h.Reason != p.Reason ||
		h.HeldCode != p.HeldCode || h.CauseKind != p.CauseKind || h.CauseDetail != p.CauseDetail
	if changed {
		observed, err := state.Propose(ctx, e.p, state.CmdObserveAgent, p)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, state.ErrActiveRevisionChanged) {
				e.log.Warn("record health failed", "agent", a.ID, "err", err.Error())
			}
			return
		}
		h = observed
		e.log.Info("agent health", "agent", a.ID, "revision", rev.ID, "ready", h.Ready, "reason", h.Reason, "held", h.HeldCode)
	}
	e.considerRollback(ctx, a, h)
	if !obs.Staged { // a staged revision's Gateway is its activation's to switch
		e.repair(ctx, a, rev, !p.Ready && p.HeldCode == "")
	}
}

// considerRollback requests the exact-owner rollback when the Agent's policy
// allows it: the active revision (not itself a rollback, not rolled back
// before) is held within the window after its activation, or was never
// observed ready by the window's end.
func (e *Engine) considerRollback(ctx context.Context, a state.Agent, h state.AgentHealth) {
	m := e.p.Machine()
	pol, ok := m.RollbackPolicyOf(a.ID)
	if !ok || h.RevisionID != a.ActiveRevisionID {
		return
	}
	rt, ok := m.RevisionRuntime(a.ActiveRevisionID)
	if !ok || rt.Rollback || rt.RolledBack || rt.Unfinalized || rt.PreviousRevisionID == "" {
		return
	}
	age := e.clk.Now().Sub(rt.ActivatedAt)
	var cause string
	switch {
	case h.HeldCode != "" && age <= pol.Window:
		cause = "held " + h.HeldCode
		if h.CauseKind != "" {
			cause += " cause " + h.CauseKind + ":" + h.CauseDetail
		}
	case !h.EverReady && age > pol.Window:
		cause = fmt.Sprintf("not ready within %s: %s", pol.Window, h.Reason)
	default:
		return
	}
	if len(m.OpenWorkItems(state.WorkFilter{AgentID: a.ID, Kind: state.WorkActivate})) > 0 {
		return // a newer deploy (or a finalization) is under way
	}
	_, err := state.Propose(ctx, e.p, state.CmdRequestRollback, state.RequestRollback{AgentID: a.ID,
		FromRevisionID: a.ActiveRevisionID, ToRevisionID: rt.PreviousRevisionID, WorkID: newWorkID(), Cause: cause})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("rollback request refused", "agent", a.ID, "err", err.Error())
		}
		return
	}
	e.log.Warn("rollback requested", "agent", a.ID, "from", a.ActiveRevisionID, "to", rt.PreviousRevisionID, "cause", cause)
	e.Notify()
}
