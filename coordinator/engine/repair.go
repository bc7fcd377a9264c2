package engine

import (
	"cmp"
	"context"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/coordinator/store"
)

// Drift repair (issue 27): the watcher asks a driver that implements
// compute.Repairer to restore an active Agent's runtime objects deleted or
// edited by hand — soon while the Agent is observed not ready (a deleted
// Deployment shows as such), and every RepairInterval otherwise, because an
// edited policy or ConfigMap changes no readiness. Only an Agent at rest is
// repaired: active, not deleting, with no work open (a deploy, stop,
// rollback or owed finalization changes its objects itself), and reserved
// for the repair like a claim, so no work of it starts meanwhile. A repair
// creates no revision and records no health; each object it changed is
// audited once (state.AuditRepair). A repair that fails is logged and
// retried later: the coordinator failing to write says nothing of the
// Agent.
const (
	// DefaultRepairInterval is how often an Agent observed ready (or held:
	// its Pods run) is checked for drift. An in-sync check costs a read per
	// object, so at 1000 embedded Agents about 5 requests a second.
	DefaultRepairInterval = 15 * time.Minute
	// DefaultRepairRetry is the least time between two repairs of an Agent
	// observed not ready; it doubles, up to the interval, while its repairs
	// find nothing (an Agent not ready for another reason costs no more
	// than one at rest).
	DefaultRepairRetry = 10 * time.Second
	// RepairTimeout bounds one repair.
	RepairTimeout = 30 * time.Second
)

// repairs is the watcher's memory of repair passes (leader-local: a new
// leader checks each Agent once within an interval after it starts).
type repairs struct {
	mu      sync.Mutex
	last    map[string]time.Time     // Agent → its last repair pass
	wait    map[string]time.Duration // Agent not ready → the spacing of its repairs
	foreign map[string]string        // Agent → the foreign objects last reported
}

func newRepairs() *repairs {
	return &repairs{last: map[string]time.Time{}, wait: map[string]time.Duration{}, foreign: map[string]string{}}
}

// due reports whether agentID's repair pass is due at now and, when it is,
// records it as begun. soon: the Agent is observed not ready. An Agent
// first seen counts as checked offset ago (spread over the interval), so a
// new leader does not check every Agent at once.
func (r *repairs) due(agentID string, now time.Time, soon bool, interval, retry, offset time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.last[agentID]
	if !ok {
		last = now.Add(-offset)
		r.last[agentID] = last
	}
	wait := interval
	if soon {
		wait = min(cmp.Or(r.wait[agentID], retry), interval)
	}
	if now.Sub(last) < wait {
		return false
	}
	r.last[agentID] = now
	return true
}

// done records a pass's outcome: a not-ready Agent whose repair changed
// nothing is repaired less often next time.
func (r *repairs) done(agentID string, soon, changed bool, interval, retry time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !soon || changed {
		delete(r.wait, agentID)
		return
	}
	r.wait[agentID] = min(2*cmp.Or(r.wait[agentID], retry), interval)
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

// spread is a random duration in [0, d).
func (e *Engine) spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	return time.Duration(e.rng.Int64N(int64(d)))
}

// repair runs a drift repair of a's active revision rev when one is due;
// soon: the watcher just observed it not ready, and not held (a held
// runtime's objects are there: its Pods run). A staged revision or one the
// watcher could not look at is the caller's to exclude.
func (e *Engine) repair(ctx context.Context, a state.Agent, rev state.Revision, soon bool) {
	rp, ok := e.d.(compute.Repairer)
	if !ok || e.cfg.RepairInterval < 0 || rev.Status != state.RevisionActive {
		return
	}
	m := e.p.Machine()
	interval, retry := e.cfg.RepairInterval, e.cfg.RepairRetry
	if !e.atRest(m, a.ID, rev.ID) || !e.rep.due(a.ID, e.clk.Now(), soon, interval, retry, e.spread(interval)) {
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
	changed := false
	for _, r := range done {
		if !r.Changed() {
			if r.Action == compute.RepairForeign {
				foreign += r.Kind + " " + r.Namespace + "/" + r.Name + ";"
			}
			continue
		}
		changed = true
		e.auditRepair(ctx, a, rev, r)
	}
	e.rep.done(a.ID, soon, changed, interval, retry)
	if e.rep.reportForeign(a.ID, foreign) && foreign != "" {
		e.log.Warn("drift repair: an object not owned by oce is in the way; left alone", "agent", a.ID,
			"revision", rev.ID, "objects", foreign)
	}
}

// atRest reports whether the Agent's active revision is still revID and
// still active (a stop that ended meanwhile leaves it stopped: never brought
// back), it is not deleting and no work of it is open.
func (e *Engine) atRest(m *state.Machine, agentID, revID string) bool {
	a, ok := m.Agent(agentID)
	if !ok || a.Deleting || a.ActiveRevisionID != revID {
		return false
	}
	if r, ok := m.Revision(revID); !ok || r.Status != state.RevisionActive {
		return false
	}
	return len(m.OpenWorkItems(state.WorkFilter{AgentID: agentID})) == 0
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
