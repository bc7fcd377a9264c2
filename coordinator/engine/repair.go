package engine

import (
	"context"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/coordinator/store"
)

// Drift repair (issue 27): the watcher asks a driver that implements
// compute.Repairer to restore an active Agent's runtime objects deleted or
// edited by hand — at once (at most every RepairRetry) while the Agent is
// observed not ready, and every RepairInterval otherwise, because an edited
// policy or ConfigMap changes no readiness. Only an Agent at rest is
// repaired: active, not deleting, with no work open (a deploy, stop,
// rollback or owed finalization changes its objects itself), and reserved
// for the repair like a claim, so no work of it starts meanwhile. A repair
// creates no revision and records no health; each object it changed is
// audited once (state.AuditRepair). A repair that fails is logged and
// retried later: the coordinator failing to write says nothing of the
// Agent.
const (
	// DefaultRepairInterval is how often an Agent observed ready is
	// checked for drift.
	DefaultRepairInterval = 5 * time.Minute
	// DefaultRepairRetry is the least time between two repairs of an Agent
	// observed not ready.
	DefaultRepairRetry = 10 * time.Second
	// RepairTimeout bounds one repair.
	RepairTimeout = 30 * time.Second
)

// repairs is the watcher's memory of repair passes (leader-local: a new
// leader repairs each Agent once soon after it starts).
type repairs struct {
	mu      sync.Mutex
	last    map[string]time.Time // Agent → its last repair pass
	foreign map[string]string    // Agent → the foreign objects last reported
}

func newRepairs() *repairs {
	return &repairs{last: map[string]time.Time{}, foreign: map[string]string{}}
}

// due reports whether agentID's repair pass is due at now and, when it is,
// records it as begun. An Agent first seen counts as checked offset ago
// (spread over the interval), so a new leader does not check every Agent
// at once.
func (r *repairs) due(agentID string, now time.Time, ready bool, interval, retry, offset time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.last[agentID]
	if !ok {
		last = now.Add(-offset)
		r.last[agentID] = last
	}
	wait := interval
	if !ready {
		wait = retry
	}
	if now.Sub(last) < wait {
		return false
	}
	r.last[agentID] = now
	return true
}

// spread is a random duration in [0, d).
func (e *Engine) spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	return time.Duration(e.rng.Int64N(int64(d)))
}

// reportForeign reports whether the foreign objects in the way of an
// Agent's repair changed since they were last reported.
func (r *repairs) reportForeign(agentID, objects string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.foreign[agentID] == objects {
		return false
	}
	if objects == "" {
		delete(r.foreign, agentID)
	} else {
		r.foreign[agentID] = objects
	}
	return true
}

// repair runs a drift repair of a's active revision rev when one is due
// (ready: the observation the watcher just made; staged or not looked at
// are the caller's to exclude).
func (e *Engine) repair(ctx context.Context, a state.Agent, rev state.Revision, ready bool) {
	rp, ok := e.d.(compute.Repairer)
	if !ok || e.cfg.RepairInterval < 0 || rev.Status != state.RevisionActive {
		return
	}
	m := e.p.Machine()
	if !e.atRest(m, a.ID, rev.ID) ||
		!e.rep.due(a.ID, e.clk.Now(), ready, e.cfg.RepairInterval, e.cfg.RepairRetry, e.spread(e.cfg.RepairInterval)) {
		return
	}
	if !e.reserve(a.ID) {
		return // its work is being processed: that pass writes its objects
	}
	defer e.release(a.ID)
	if !e.atRest(m, a.ID, rev.ID) { // work may have been admitted meanwhile
		return
	}
	rctx, cancel := context.WithTimeout(ctx, RepairTimeout)
	defer cancel()
	done, err := rp.RepairRevision(rctx, rev)
	if err != nil {
		if ctx.Err() == nil {
			code, _ := compute.ErrorCode(err, "TRANSIENT_DEPENDENCY")
			e.log.Warn("drift repair failed; retried later", "agent", a.ID, "revision", rev.ID,
				"code", string(code), "err", err.Error())
		}
	}
	var foreign string
	for _, r := range done {
		if !r.Changed() {
			if r.Action == compute.RepairForeign {
				foreign += r.Kind + " " + r.Namespace + "/" + r.Name + ";"
			}
			continue
		}
		e.auditRepair(ctx, a, rev, r)
	}
	if e.rep.reportForeign(a.ID, foreign) && foreign != "" {
		e.log.Warn("drift repair: an object not owned by oce is in the way; left alone", "agent", a.ID,
			"revision", rev.ID, "objects", foreign)
	}
}

// atRest reports whether the Agent's active revision is still revID, it is
// not deleting and no work of it is open.
func (e *Engine) atRest(m *state.Machine, agentID, revID string) bool {
	a, ok := m.Agent(agentID)
	return ok && !a.Deleting && a.ActiveRevisionID == revID && len(m.OpenWorkItems(state.WorkFilter{AgentID: agentID})) == 0
}

// auditRepair appends the one audit record of a repaired object, by the
// system actor.
func (e *Engine) auditRepair(ctx context.Context, a state.Agent, rev state.Revision, r compute.Repair) {
	res := state.ScopedResource("Agent", a.NamespaceID, a.Name)
	if ns, ok := e.p.Machine().Namespace(a.NamespaceID); ok {
		res = state.ScopedResource("Agent", ns.Name, a.Name)
	}
	_, err := state.Propose(store.WithActor(ctx, state.SystemRepairActor), e.p, state.CmdRecordAudit, state.RecordAudit{
		Action: state.AuditRepair, Resource: res, NamespaceID: a.NamespaceID, AgentID: a.ID, Outcome: state.OutcomeSuccess,
		Details: map[string]string{"revisionId": rev.ID, "kind": r.Kind, "namespace": r.Namespace, "name": r.Name, "action": r.Action}})
	if err != nil && ctx.Err() == nil {
		// The object was repaired; only its record is lost (a new leader
		// finds nothing left to repair).
		e.log.Warn("drift repair audit failed", "agent", a.ID, "kind", r.Kind, "name", r.Name, "err", err.Error())
		return
	}
	e.log.Info("drift repaired", "agent", a.ID, "revision", rev.ID, "kind", r.Kind, "namespace", r.Namespace,
		"name", r.Name, "action", r.Action)
}
