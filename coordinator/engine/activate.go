package engine

import (
	"errors"
	"fmt"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// validate re-checks the frozen revision against the current state and the
// driver; it returns a failure code and detail, or "" when valid.
func (e *Engine) validate(w state.Work, rollback bool) (state.Agent, state.Revision, codes.Code, string) {
	m := e.p.Machine()
	a, ok := m.Agent(w.AgentID)
	if !ok || a.Deleting {
		return a, state.Revision{}, codes.InvalidTarget, "agent is missing or being deleted"
	}
	r, ok := m.Revision(w.RevisionID)
	if !ok || r.AgentID != a.ID || r.NamespaceID != a.NamespaceID {
		return a, r, codes.InvalidRevisionOwner, "revision does not belong to the agent"
	}
	if _, ok := m.Namespace(a.NamespaceID); !ok {
		return a, r, codes.NamespaceNotReady, "namespace is missing"
	}
	if a.ActiveRevisionID != "" {
		if act, ok := m.Revision(a.ActiveRevisionID); !ok || act.AgentID != a.ID {
			return a, r, codes.InvalidActiveRevision, "active revision is not the agent's"
		}
	}
	recovering := a.ActiveRevisionID == r.ID && r.Status == state.RevisionActive
	if r.Status != state.RevisionPending && !recovering && !rollback {
		return a, r, codes.InvalidAdmittedRevision, "revision is " + r.Status
	}
	// A revision may freeze only an approved topology (docs/design/reference.md#s7-3), and
	// the driver must support it: SupportsTopology checks both.
	if !e.caps.SupportsTopology(r.Harness.ID, r.Mode) {
		return a, r, codes.HarnessDescriptorMismatch, fmt.Sprintf("topology %s/%s is not supported", r.Harness.ID, r.Mode)
	}
	if r.ComputeID != "" && r.ComputeID != e.cfg.ComputeID {
		return a, r, codes.ComputeDriverMismatch, fmt.Sprintf("revision names compute %q", r.ComputeID)
	}
	if r.HarnessAuth != nil && !e.caps.SupportsHarnessAuth(r.Harness.ID, r.Mode, r.HarnessAuth.Method) {
		return a, r, codes.HarnessAuthUnsupported, fmt.Sprintf("harnessAuth %q is not supported for %s/%s",
			r.HarnessAuth.Method, r.Harness.ID, r.Mode)
	}
	return a, r, "", ""
}

// activate runs one pass of activate work (docs/design/reference.md#s6-2).
func (e *Engine) activate(cl *claim) {
	m := e.p.Machine()
	rollbackFrom, rollback := m.RollbackOf(cl.work.ID)
	if r, ok := m.Revision(cl.work.RevisionID); ok && !rollback && supersededBySwap(m, r) {
		// A newer activation swapped this revision out (and finalizes it);
		// its work ends superseded, never failed.
		e.supersede(cl, r)
		return
	}
	a, rev, code, detail := e.validate(cl.work, rollback)
	if code != "" {
		e.failRevision(cl, rev, code, detail, nil)
		return
	}
	if a.ActiveRevisionID == rev.ID {
		// The commit happened in an earlier pass; only finalization remains
		// (a stop's cancellation no longer applies).
		e.finalize(cl, rev, false, rollbackFrom)
		return
	}
	if m.CancelRequested(cl.work.ID) {
		e.cancelActivation(cl, rev)
		return
	}
	if rollback && a.ActiveRevisionID != rollbackFrom {
		e.failRevision(cl, rev, codes.ActiveRevisionChanged, "the rollback's revision is no longer active", nil)
		return
	}
	if latest, _ := m.LatestRevision(a.ID); !rollback && latest.Number > rev.Number {
		e.supersede(cl, rev)
		return
	}
	if rt, ok := m.RevisionRuntime(rev.ID); ok && rt.HeldCode != "" && !rollback {
		// Held on an earlier pass whose stop did not finish: stop, then fail.
		held := &compute.Observation{HeldCode: codes.Code(rt.HeldCode)}
		if rt.CauseKind != "" {
			held.Cause = &codes.Cause{Kind: codes.CauseKind(rt.CauseKind), Detail: rt.CauseDetail}
		}
		e.failRevision(cl, rev, codes.RevisionFailure(held.HeldCode), heldDetail(held.HeldCode, held.Cause), held)
		return
	}
	if !rollback && !e.checkCredential(cl, rev) {
		return
	}
	if e.caps.RequiresStoppedPredecessors(rev.Mode) {
		cameBack, err := e.stopPredecessors(cl, rev, rollbackFrom)
		if err != nil {
			if !errors.Is(err, errAbandoned) {
				e.failedPass(cl)
				cl.driverFailed("stopRevision", err, codes.TransientDependency)
			}
			return
		}
		if cameBack {
			// The successor is unready while a predecessor came back; the
			// re-stop schedule handles it on later passes.
			e.notReady(cl, rev, compute.Observation{Reason: "predecessor-came-back"})
			return
		}
	}
	if hasStopRecord(m, a.ID, rev.ID) {
		if _, err := proposeClaimed(cl, state.CmdDropPredecessor, state.DropPredecessorStop{ClaimRef: cl.ref, RevisionIDs: []string{rev.ID}}); err != nil {
			return
		}
	}
	if err := cl.phase(state.PhasePreparing); err != nil {
		return
	}
	if ns, ok := m.Namespace(a.NamespaceID); ok {
		if err := e.d.EnsureNamespace(cl.ctx, ns); err != nil {
			e.failedPass(cl)
			cl.driverFailed("ensureNamespace", err, codes.TransientDependency)
			return
		}
	}
	if err := e.d.PrepareRevision(cl.ctx, rev); err != nil {
		e.failedPass(cl)
		cl.driverFailed("prepareRevision", err, codes.TransientDependency)
		return
	}
	obs, err := e.d.ObserveRevision(cl.ctx, rev)
	if err != nil {
		e.failedPass(cl)
		cl.driverFailed("observeRevision", err, codes.TransientDependency)
		return
	}
	if obs.HeldCode != "" {
		e.failRevision(cl, rev, codes.RevisionFailure(obs.HeldCode), heldDetail(obs.HeldCode, obs.Cause), &obs)
		return
	}
	if !obs.Ready {
		e.notReady(cl, rev, obs)
		return
	}
	if err := cl.phase(state.PhaseReady); err != nil {
		return
	}
	if err := e.p.VerifyLeader(cl.ctx); err != nil {
		cl.log.Warn("not leader; abandoning claim", "err", err.Error())
		cl.cancel(fmt.Errorf("%w: %w", errAbandoned, err))
		return
	}
	if e.caps.ActivateBeforeCommit {
		if err := e.d.ActivateRevision(cl.ctx, rev); err != nil {
			cl.driverFailed("activateRevision", err, codes.TransientDependency)
			return
		}
	}
	if _, err := proposeClaimed(cl, state.CmdActivateRevision, state.ActivateRevision{ClaimRef: cl.ref, Expected: a.ActiveRevisionID}); err != nil {
		switch {
		case errors.Is(err, errAbandoned):
		case errors.Is(err, state.ErrActiveRevisionChanged):
			cl.retry(codes.ActiveRevisionChanged, err.Error())
		default:
			cl.log.Warn("activation commit failed", "err", err.Error())
		}
		return
	}
	cl.log.Info("active revision committed", "rollback", rollback)
	e.finalize(cl, rev, e.caps.ActivateBeforeCommit, rollbackFrom)
}

// notReady defers the pass (giving its attempt back) for a re-observation
// after the readiness delay, or fails the work once the revision has had the
// whole convergence window — counted from the revision's creation, or from
// its activation's start when admission held it queued (state.WorkStarted).
// While the compute target says it is overloaded (a signal within
// OverloadCalm), a slow start is the target's, not the revision's: the
// window stretches, by one more window at most.
func (e *Engine) notReady(cl *claim, rev state.Revision, obs compute.Observation) {
	since := rev.CreatedAt
	if at, ok := e.p.Machine().WorkStarted(cl.work.ID); ok && at.After(since) {
		since = at
	}
	now := e.clk.Now()
	age := now.Sub(since)
	if age > e.cfg.ConvergenceWindow && (age > 2*e.cfg.ConvergenceWindow || !e.overload.recent(now)) {
		e.failRevision(cl, rev, codes.RevisionNotReady, "not ready within the convergence window: "+obs.Reason, nil)
		return
	}
	e.recordProgress(cl, rev, obs)
	cl.requeue(codes.ActivationPending, progressDetail(obs), e.readinessDelay(age), true)
}

// finalize runs after the commit: activate (unless just done before the
// commit), retire every earlier revision, and complete the work with its one
// activate audit record. Any failure requeues with
// REVISION_FINALIZATION_INCOMPLETE; the next pass re-runs finalize.
func (e *Engine) finalize(cl *claim, rev state.Revision, activated bool, rollbackFrom string) {
	if hasStopRecord(e.p.Machine(), rev.AgentID, rev.ID) {
		// Activating a revision recorded as a stopped predecessor forgets
		// the record, so no later pass skips or re-stops it by mistake.
		if _, err := proposeClaimed(cl, state.CmdDropPredecessor, state.DropPredecessorStop{ClaimRef: cl.ref, RevisionIDs: []string{rev.ID}}); err != nil {
			return
		}
	}
	if !activated {
		if err := e.d.ActivateRevision(cl.ctx, rev); err != nil {
			e.finalizationFailed(cl, "activateRevision", err)
			return
		}
	}
	var retired []string
	for _, p := range e.p.Machine().LiveRevisions(rev.AgentID) {
		if p.ID == rev.ID || (p.Number >= rev.Number && p.ID != rollbackFrom) {
			continue
		}
		if err := e.d.RetireRevision(cl.ctx, p); err != nil {
			e.finalizationFailed(cl, "retireRevision", err)
			return
		}
		retired = append(retired, p.ID)
	}
	if _, err := proposeClaimed(cl, state.CmdCompleteActivation, state.CompleteActivation{ClaimRef: cl.ref, Retired: retired}); err != nil {
		switch {
		case errors.Is(err, errAbandoned):
		case errors.Is(err, state.ErrActiveRevisionChanged):
			cl.retry(codes.ActiveRevisionChanged, err.Error())
		default:
			cl.log.Warn("complete activation failed", "err", err.Error())
			cl.retry(codes.FinalizationIncomplete, "completeActivation: "+err.Error())
		}
		return
	}
	cl.log.Info("revision activated", "retired", len(retired), "rollback", rollbackFrom != "")
}

// stopPredecessors stops every earlier, unretired revision not already
// recorded as stopped, and re-stops recorded ones when their check is due
// (after 1, then 2, 4… leases). The work shows the stopping phase only while
// a stop actually runs. It reports whether a predecessor came back.
func (e *Engine) stopPredecessors(cl *claim, rev state.Revision, rollbackFrom string) (bool, error) {
	records := map[string]state.PredecessorStop{}
	for _, s := range e.p.Machine().PredecessorStops(rev.AgentID) {
		records[s.RevisionID] = s
	}
	cameBack := false
	for _, p := range e.p.Machine().LiveRevisions(rev.AgentID) {
		if p.ID == rev.ID || (p.Number >= rev.Number && p.ID != rollbackFrom) {
			continue
		}
		rec, recorded := records[p.ID]
		if recorded && e.clk.Now().Before(rec.NextCheckAt) {
			continue
		}
		if err := cl.phase(state.PhaseStopping); err != nil {
			return false, err
		}
		res, err := e.d.StopRevision(cl.ctx, p)
		if err != nil {
			return false, err
		}
		restops := 0
		if recorded {
			restops = rec.Restops + 1
		}
		next := e.clk.Now().Add(e.cfg.Lease * time.Duration(uint64(1)<<min(restops, 20)))
		if _, err := proposeClaimed(cl, state.CmdRecordPredecessor, state.RecordPredecessorStop{ClaimRef: cl.ref,
			RevisionID: p.ID, Restops: restops, NextCheckAt: next}); err != nil {
			return false, err
		}
		if res.CameBack || (recorded && res.Found) {
			cl.log.Warn("predecessor came back", "predecessor", p.ID, "restops", restops)
			cameBack = true
		}
	}
	return cameBack, nil
}

// failedPass drops the Agent's predecessor-stop records, so the next pass
// stops every predecessor again.
func (e *Engine) failedPass(cl *claim) {
	if len(e.p.Machine().PredecessorStops(cl.work.AgentID)) == 0 {
		return
	}
	if _, err := proposeClaimed(cl, state.CmdDropPredecessor, state.DropPredecessorStop{ClaimRef: cl.ref}); err != nil {
		cl.log.Warn("drop predecessor records failed", "err", err.Error())
	}
}

func hasStopRecord(m *state.Machine, agentID, revID string) bool {
	for _, s := range m.PredecessorStops(agentID) {
		if s.RevisionID == revID {
			return true
		}
	}
	return false
}

// heldDetail keeps the held code and, for MODEL_PROBE_FAILED, its cause.
func heldDetail(held codes.Code, cause *codes.Cause) string {
	if cause == nil {
		return "held " + string(held)
	}
	return fmt.Sprintf("held %s cause %s:%s", held, cause.Kind, cause.Detail)
}
