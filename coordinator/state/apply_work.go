package state

import (
	"fmt"
	"time"
)

// Work commands: claims and leases, progress, outcomes, predecessor-stop
// records and the activation compare-and-set.

var validPhases = map[string]bool{PhaseQueued: true, PhaseStopping: true, PhasePreparing: true,
	PhaseReady: true, PhaseActive: true}

// liveClaim returns the claimed work ref names, or ErrClaimLost when the work
// is gone, not claimed, owned by another owner, or its lease has expired at
// the entry's Time.
func liveClaim(d *data, c Command, ref ClaimRef) (Work, error) {
	w, ok := d.work[ref.WorkID]
	switch {
	case !ok:
		return Work{}, fmt.Errorf("%w: work %q is gone", ErrClaimLost, ref.WorkID)
	case w.State != WorkClaimed:
		return Work{}, fmt.Errorf("%w: work %q is %s", ErrClaimLost, w.ID, w.State)
	case ref.Owner == "" || w.Owner != ref.Owner:
		return Work{}, fmt.Errorf("%w: work %q is owned by another claim", ErrClaimLost, w.ID)
	case c.Time.After(w.LeaseExpiry):
		return Work{}, fmt.Errorf("%w: lease of work %q expired", ErrClaimLost, w.ID)
	}
	return w, nil
}

// liveActivateClaim is liveClaim for activate work, returning its Agent and
// revision too.
func liveActivateClaim(d *data, c Command, ref ClaimRef) (Work, Agent, Revision, error) {
	w, err := liveClaim(d, c, ref)
	if err != nil {
		return Work{}, Agent{}, Revision{}, err
	}
	if w.Kind != WorkActivate {
		return Work{}, Agent{}, Revision{}, fmt.Errorf("%w: work %q is %s work, not activate", ErrInvalid, w.ID, w.Kind)
	}
	a, ok := d.agents[w.AgentID]
	if !ok {
		return Work{}, Agent{}, Revision{}, fmt.Errorf("%w: agent %q", ErrNotFound, w.AgentID)
	}
	r, ok := d.revisions[w.RevisionID]
	if !ok {
		return Work{}, Agent{}, Revision{}, fmt.Errorf("%w: revision %q", ErrNotFound, w.RevisionID)
	}
	return w, a, r, nil
}

// release ends a claim, leaving the work in state.
func release(w Work, state string, t time.Time) Work {
	w.State = state
	w.Owner = ""
	w.LeaseExpiry = time.Time{}
	w.UpdatedAt = t
	return w
}

func applyClaimWork(d *data, c Command, p ClaimWork) (*ClaimResult, error) {
	if p.WorkID == "" || p.Owner == "" {
		return nil, fmt.Errorf("%w: workId and owner are required", ErrInvalid)
	}
	exp := utc(p.LeaseExpiry)
	if !exp.After(c.Time) {
		return nil, fmt.Errorf("%w: lease expiry must be after the entry time", ErrInvalid)
	}
	w, ok := d.work[p.WorkID]
	if !ok {
		return nil, fmt.Errorf("%w: work %q", ErrNotFound, p.WorkID)
	}
	reclaim := w.State == WorkClaimed && c.Time.After(w.LeaseExpiry)
	available := w.State == WorkQueued && !w.AvailableAt.After(c.Time)
	switch {
	case !available && !reclaim:
		return nil, fmt.Errorf("%w: work %q is %s, available at %s", ErrNotClaimable, w.ID, w.State,
			w.AvailableAt.Format(time.RFC3339Nano))
	case w.Attempts >= w.MaxAttempts:
		return nil, fmt.Errorf("%w: work %q used %d of %d attempts", ErrNotClaimable, w.ID, w.Attempts, w.MaxAttempts)
	}
	for id := range d.open {
		o := d.work[id]
		if o.ID != w.ID && o.AgentID == w.AgentID && o.State == WorkClaimed && !c.Time.After(o.LeaseExpiry) {
			return nil, fmt.Errorf("%w: agent %q already has a claim in flight", ErrNotClaimable, w.AgentID)
		}
	}
	if reclaim {
		w.LastCode, w.LastDetail = CodeLeaseExpired, ""
	}
	w.State = WorkClaimed
	w.Owner = p.Owner
	w.LeaseExpiry = exp
	w.Attempts++
	w.UpdatedAt = c.Time
	d.putWork(w)
	res := &ClaimResult{Work: w}
	if r, ok := d.revisions[w.RevisionID]; ok && w.Kind == WorkActivate {
		rc := cloneRevision(r)
		res.Revision = &rc
	}
	return res, nil
}

func applyRenewClaim(d *data, c Command, p RenewClaim) (Work, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	exp := utc(p.LeaseExpiry)
	if !exp.After(c.Time) {
		return Work{}, fmt.Errorf("%w: lease expiry must be after the entry time", ErrInvalid)
	}
	w.LeaseExpiry = exp
	w.UpdatedAt = c.Time
	d.putWork(w)
	return w, nil
}

func applySetWorkPhase(d *data, c Command, p SetWorkPhase) (Work, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if !validPhases[p.Phase] {
		return Work{}, fmt.Errorf("%w: phase %q", ErrInvalid, p.Phase)
	}
	w.Phase = p.Phase
	w.UpdatedAt = c.Time
	d.putWork(w)
	d.markStarted(w, c.Time)
	return w, nil
}

func applyRequeueWork(d *data, c Command, p RequeueWork) (Work, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if p.Code == "" {
		return Work{}, fmt.Errorf("%w: code is required", ErrInvalid)
	}
	w = release(w, WorkQueued, c.Time)
	w.AvailableAt = utc(p.AvailableAt)
	if w.AvailableAt.Before(c.Time) {
		w.AvailableAt = c.Time
	}
	w.LastCode, w.LastDetail = p.Code, p.Detail
	if p.Defer && w.Attempts > 0 {
		w.Attempts--
	}
	d.putWork(w)
	return w, nil
}

func applyFailWork(d *data, c Command, p FailWork) (Work, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if p.Code == "" {
		return Work{}, fmt.Errorf("%w: code is required", ErrInvalid)
	}
	return failWork(d, c, w, p.Code, p.Detail), nil
}

// failWork ends w as failed; an activate work's revision fails too unless it
// is already its Agent's active revision (then only the work records it).
func failWork(d *data, c Command, w Work, code, detail string) Work {
	keep := d.onWorkEnded(w)
	w = release(w, WorkFailed, c.Time)
	w.LastCode, w.LastDetail = code, detail
	d.putWork(w)
	a := d.agents[w.AgentID]
	if r, ok := d.revisions[w.RevisionID]; ok && w.Kind == WorkActivate && a.ActiveRevisionID != r.ID && !keep {
		r.Status = RevisionFailed
		r.FailureCode, r.FailureDetail = code, detail
		d.revisions[r.ID] = r
	}
	d.appendAudit(c.Time, w.Actor, AuditFail, a, w.RevisionID, map[string]string{"kind": w.Kind, "code": code, "workId": w.ID})
	return w
}

func applyExpireWork(d *data, c Command, p ExpireWork) (Work, error) {
	w, ok := d.work[p.WorkID]
	if !ok {
		return Work{}, fmt.Errorf("%w: work %q", ErrNotFound, p.WorkID)
	}
	stale := w.State == WorkQueued || (w.State == WorkClaimed && c.Time.After(w.LeaseExpiry))
	if !stale || w.Attempts < w.MaxAttempts {
		return Work{}, fmt.Errorf("%w: work %q is %s with %d of %d attempts", ErrNotClaimable, w.ID, w.State, w.Attempts, w.MaxAttempts)
	}
	return failWork(d, c, w, CodeMaxAttemptsExhausted, ""), nil
}

func applySupersedeWork(d *data, c Command, p SupersedeWork) (Work, error) {
	w, _, r, err := liveActivateClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	ids := d.agentRevs[r.AgentID]
	if d.revisions[ids[len(ids)-1]].Number <= r.Number {
		return Work{}, fmt.Errorf("%w: revision %q has no newer revision", ErrConflict, r.ID)
	}
	d.onWorkEnded(w)
	w = release(w, WorkSuperseded, c.Time)
	d.putWork(w)
	if r.Status == RevisionPending {
		r.Status = RevisionSuperseded
		d.revisions[r.ID] = r
	}
	return w, nil
}

func applyRecordPredecessorStop(d *data, c Command, p RecordPredecessorStop) (PredecessorStop, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return PredecessorStop{}, err
	}
	r, ok := d.revisions[p.RevisionID]
	if !ok || r.AgentID != w.AgentID {
		return PredecessorStop{}, fmt.Errorf("%w: revision %q of agent %q", ErrNotFound, p.RevisionID, w.AgentID)
	}
	if r.ID == w.RevisionID || p.Restops < 0 {
		return PredecessorStop{}, fmt.Errorf("%w: a revision is not its own predecessor; restops must be >= 0", ErrInvalid)
	}
	rec := PredecessorStop{AgentID: w.AgentID, RevisionID: r.ID, StoppedAt: c.Time, Restops: p.Restops,
		NextCheckAt: utc(p.NextCheckAt)}
	list := d.stops[w.AgentID]
	for i := range list {
		if list[i].RevisionID == r.ID {
			nl := append([]PredecessorStop(nil), list...)
			nl[i] = rec
			d.stops[w.AgentID] = nl
			return rec, nil
		}
	}
	nl := append(append([]PredecessorStop(nil), list...), rec)
	if len(nl) > MaxPredecessorStops {
		nl = nl[len(nl)-MaxPredecessorStops:]
	}
	d.stops[w.AgentID] = nl
	return rec, nil
}

func applyDropPredecessorStop(d *data, c Command, p DropPredecessorStop) (struct{}, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return struct{}{}, err
	}
	d.dropStops(w.AgentID, p.RevisionIDs)
	return struct{}{}, nil
}

// dropStops removes an Agent's records for ids, or all when ids is empty.
func (d *data) dropStops(agentID string, ids []string) {
	if len(ids) == 0 {
		delete(d.stops, agentID)
		return
	}
	drop := make(map[string]bool, len(ids))
	for _, id := range ids {
		drop[id] = true
	}
	var kept []PredecessorStop
	for _, s := range d.stops[agentID] {
		if !drop[s.RevisionID] {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		delete(d.stops, agentID)
		return
	}
	d.stops[agentID] = kept
}

func applyActivateRevision(d *data, c Command, p ActivateRevision) (Agent, error) {
	w, a, r, err := liveActivateClaim(d, c, p.ClaimRef)
	if err != nil {
		return Agent{}, err
	}
	if a.Deleting {
		return Agent{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	}
	if !d.activatable(w, r) {
		return Agent{}, fmt.Errorf("%w: revision %q is %s", ErrConflict, r.ID, r.Status)
	}
	if a.ActiveRevisionID != p.Expected {
		return Agent{}, fmt.Errorf("%w: active revision is %q, expected %q", ErrActiveRevisionChanged, a.ActiveRevisionID, p.Expected)
	}
	d.onActivate(c, w, r, a.ActiveRevisionID)
	a.ActiveRevisionID = r.ID
	a.UpdatedAt = c.Time
	r.Status = RevisionActive
	w.Phase = PhaseActive
	w.UpdatedAt = c.Time
	d.agents[a.ID] = a
	d.revisions[r.ID] = r
	d.putWork(w)
	return cloneAgent(a), nil
}

func applyCompleteActivation(d *data, c Command, p CompleteActivation) (Work, error) {
	w, a, r, err := liveActivateClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if a.ActiveRevisionID != r.ID {
		return Work{}, fmt.Errorf("%w: active revision is %q, not %q", ErrActiveRevisionChanged, a.ActiveRevisionID, r.ID)
	}
	seen := map[string]bool{}
	for _, id := range p.Retired {
		o, ok := d.revisions[id]
		if !ok || o.AgentID != a.ID || id == r.ID || seen[id] {
			return Work{}, fmt.Errorf("%w: %q is not a distinct predecessor of revision %q", ErrInvalid, id, r.ID)
		}
		seen[id] = true
	}
	for _, id := range p.Retired {
		o := d.revisions[id]
		o.Status = RevisionRetired
		d.revisions[id] = o
	}
	if len(p.Retired) > 0 {
		d.dropStops(a.ID, p.Retired)
	}
	d.onComplete(c, w, a, r, p.Retired)
	w = release(w, WorkCompleted, c.Time)
	w.Phase = PhaseActive
	w.LastCode, w.LastDetail = "", ""
	d.putWork(w)
	return w, nil
}

func applySetRevisionStatus(d *data, c Command, p SetRevisionStatus) (Revision, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Revision{}, err
	}
	if p.Status != RevisionStopped && p.Status != RevisionRetired {
		return Revision{}, fmt.Errorf("%w: status %q (only stopped or retired)", ErrInvalid, p.Status)
	}
	r, ok := d.revisions[p.RevisionID]
	if !ok || r.AgentID != w.AgentID {
		return Revision{}, fmt.Errorf("%w: revision %q of agent %q", ErrNotFound, p.RevisionID, w.AgentID)
	}
	r.Status = p.Status
	d.revisions[r.ID] = r
	return cloneRevision(r), nil
}

func applyCompleteStop(d *data, c Command, p CompleteStop) (Work, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if w.Kind != WorkStop {
		return Work{}, fmt.Errorf("%w: work %q is %s work, not stop", ErrInvalid, w.ID, w.Kind)
	}
	a, ok := d.agents[w.AgentID]
	if !ok {
		return Work{}, fmt.Errorf("%w: agent %q", ErrNotFound, w.AgentID)
	}
	if a.ActiveRevisionID != p.Expected {
		return Work{}, fmt.Errorf("%w: active revision is %q, expected %q", ErrActiveRevisionChanged, a.ActiveRevisionID, p.Expected)
	}
	if r, ok := d.revisions[p.Expected]; ok {
		r.Status = RevisionStopped
		d.revisions[r.ID] = r
	}
	a.ActiveRevisionID = ""
	a.UpdatedAt = c.Time
	d.agents[a.ID] = a
	w = release(w, WorkCompleted, c.Time)
	w.LastCode, w.LastDetail = "", ""
	d.putWork(w)
	d.appendAudit(c.Time, w.Actor, AuditStop, a, p.Expected, map[string]string{"workId": w.ID})
	return w, nil
}

func applyCompleteDeletion(d *data, c Command, p CompleteDeletion) (Work, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if w.Kind != WorkDelete {
		return Work{}, fmt.Errorf("%w: work %q is %s work, not delete", ErrInvalid, w.ID, w.Kind)
	}
	a, ok := d.agents[w.AgentID]
	if !ok || !a.Deleting {
		return Work{}, fmt.Errorf("%w: agent %q is not being deleted", ErrConflict, w.AgentID)
	}
	d.forgetAgent(a.ID, d.agentRevs[a.ID])
	for _, id := range d.agentRevs[a.ID] {
		delete(d.revisions, id)
	}
	delete(d.agentRevs, a.ID)
	for id, o := range d.work {
		if o.AgentID == a.ID {
			delete(d.work, id)
			delete(d.open, id)
			delete(d.started, id)
			delete(d.revWork, o.RevisionID)
		}
	}
	delete(d.stops, a.ID)
	if sp, ok := d.ids.sps[a.ServicePrincipalID]; ok && sp.AgentID == a.ID {
		d.ids.removeSP(sp)
	}
	d.removeAgent(a)
	w = release(w, WorkCompleted, c.Time)
	d.appendAudit(c.Time, w.Actor, AuditDelete, a, "", map[string]string{"workId": w.ID})
	return w, nil
}
