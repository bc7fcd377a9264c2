package state

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Truthful activation (issue 14): what the activation engine learned about
// each revision's runtime (phase, held code, cause, the pre-cutover
// credential check), each activation's predecessor and whether its
// finalization (retirement + exactly one activate audit) is still owed, the
// Agents' opt-in rollback policy and their observed health, cancellations
// requested by a stop, and which activate work is a rollback. It lives in
// its own snapshot section (section "activation").

// Credential check outcomes recorded on a revision.
const (
	CredentialPassed   = "passed"
	CredentialRejected = "rejected"
	CredentialSkipped  = "skipped"
)

// Codes Apply records for truthful activation.
const (
	// CodeActivationCanceled: a stop canceled the revision's pending activation.
	CodeActivationCanceled = "ACTIVATION_CANCELED"
)

// AuditRollback is the audit action of a rollback activation: the exact
// previous revision reactivated under the Agent's rollback policy.
const AuditRollback = "openclaw.agents.lifecycle.rollback"

// MaxRollbackWindow bounds a rollback policy's window.
const MaxRollbackWindow = 24 * time.Hour

// RollbackPolicy is an Agent's opt-in exact-owner rollback: when a newly
// active revision becomes held or is not observed ready within Window after
// its activation, the engine reactivates the exact previous revision once.
type RollbackPolicy struct {
	Enabled bool          `json:"enabled"`
	Window  time.Duration `json:"window"`
}

// RevisionRuntime is what the engine observed of one revision's runtime and
// activation. Codes and reasons are closed-set values; Detail is short and
// sanitized (never provider text, paths or credentials).
type RevisionRuntime struct {
	RevisionID  string    `json:"revisionId"`
	Phase       string    `json:"phase,omitempty"`  // the runtime's last startup phase
	Reason      string    `json:"reason,omitempty"` // closed not-ready reason
	HeldCode    string    `json:"heldCode,omitempty"`
	CauseKind   string    `json:"causeKind,omitempty"`
	CauseDetail string    `json:"causeDetail,omitempty"`
	ObservedAt  time.Time `json:"observedAt,omitempty"`
	// Credential is the pre-cutover credential check's outcome; Diagnostics
	// its closed-set 401/403 diagnostics (providerCode, bodyShape, …).
	Credential  string            `json:"credential,omitempty"`
	Diagnostics map[string]string `json:"diagnostics,omitempty"`
	// PreviousRevisionID was the Agent's active revision when this one was
	// committed active; ActivatedAt is that commit's time.
	PreviousRevisionID string    `json:"previousRevisionId,omitempty"`
	ActivatedAt        time.Time `json:"activatedAt,omitempty"`
	// Unfinalized: committed active, but its finalization (retiring
	// predecessors, the one activate audit record) is still owed.
	Unfinalized bool `json:"unfinalized,omitempty"`
	// Rollback: the latest activation was a rollback; RollbackCause why.
	Rollback      bool   `json:"rollback,omitempty"`
	RollbackCause string `json:"rollbackCause,omitempty"`
	// RolledBack: a rollback away from this revision was requested.
	RolledBack bool `json:"rolledBack,omitempty"`
}

// AgentHealth is the observed readiness of an Agent's active revision,
// written by the leader's health watcher when it changes.
type AgentHealth struct {
	RevisionID  string    `json:"revisionId"`
	Ready       bool      `json:"ready"`
	Reason      string    `json:"reason,omitempty"`
	HeldCode    string    `json:"heldCode,omitempty"`
	CauseKind   string    `json:"causeKind,omitempty"`
	CauseDetail string    `json:"causeDetail,omitempty"`
	ObservedAt  time.Time `json:"observedAt"`
	Since       time.Time `json:"since"`               // when Ready last changed
	EverReady   bool      `json:"everReady,omitempty"` // observed ready since RevisionID's activation
}

// rollbackWork marks activate work that reactivates a previous revision.
type rollbackWork struct {
	From  string `json:"from"`
	Cause string `json:"cause"`
}

// activation is the section's replicated content.
type activation struct {
	revs     map[string]RevisionRuntime // by revision ID
	policies map[string]RollbackPolicy  // by Agent ID
	health   map[string]AgentHealth     // by Agent ID
	cancels  map[string]bool            // work IDs whose cancellation a stop requested
	rollback map[string]rollbackWork    // by work ID
}

func newActivation() activation {
	return activation{revs: map[string]RevisionRuntime{}, policies: map[string]RollbackPolicy{},
		health: map[string]AgentHealth{}, cancels: map[string]bool{}, rollback: map[string]rollbackWork{}}
}

func (a *activation) empty() bool {
	return len(a.revs)+len(a.policies)+len(a.health)+len(a.cancels)+len(a.rollback) == 0
}

// RecordRevisionRuntime records, under a live claim of the revision's
// activate work, what the engine observed of its runtime. Empty fields are
// recorded as empty (the observation replaces the previous one), except
// Credential and Diagnostics, which are kept unless set.
type RecordRevisionRuntime struct {
	ClaimRef
	Phase       string            `json:"phase,omitempty"`
	Reason      string            `json:"reason,omitempty"`
	HeldCode    string            `json:"heldCode,omitempty"`
	CauseKind   string            `json:"causeKind,omitempty"`
	CauseDetail string            `json:"causeDetail,omitempty"`
	Credential  string            `json:"credential,omitempty"`
	Diagnostics map[string]string `json:"diagnostics,omitempty"`
}

// ObserveAgent records the observed readiness of the Agent's active
// revision (the leader's health watcher). It fails with
// ErrActiveRevisionChanged when RevisionID is not the active revision.
type ObserveAgent struct {
	AgentID     string `json:"agentId"`
	RevisionID  string `json:"revisionId"`
	Ready       bool   `json:"ready"`
	Reason      string `json:"reason,omitempty"`
	HeldCode    string `json:"heldCode,omitempty"`
	CauseKind   string `json:"causeKind,omitempty"`
	CauseDetail string `json:"causeDetail,omitempty"`
}

// CancelWork ends activate work whose cancellation a stop requested: the
// work fails with ACTIVATION_CANCELED and its revision (never the active
// one: ErrConflict) becomes stopped.
type CancelWork struct {
	ClaimRef
}

// RequeueFinalization enqueues fresh activate work for the Agent's active
// revision whose finalization is still owed and which has no open work (the
// maintenance pass): the work only finalizes it.
type RequeueFinalization struct {
	AgentID     string `json:"agentId"`
	RevisionID  string `json:"revisionId"`
	WorkID      string `json:"workId"`
	MaxAttempts int    `json:"maxAttempts"`
}

// RequestRollback enqueues activate work that reactivates the exact revision
// that was active before FromRevisionID, when the Agent's policy allows it:
// FromRevisionID is active, was not itself activated by a rollback and was
// not rolled back before; ToRevisionID is its recorded predecessor and has
// the same owner (Namespace and Agent); no other activate work is open.
type RequestRollback struct {
	AgentID        string `json:"agentId"`
	FromRevisionID string `json:"fromRevisionId"`
	ToRevisionID   string `json:"toRevisionId"`
	WorkID         string `json:"workId"`
	Cause          string `json:"cause"`
	MaxAttempts    int    `json:"maxAttempts"`
}

// SetRollbackPolicy sets (or, with a nil Policy, clears) an Agent's
// rollback policy.
type SetRollbackPolicy struct {
	AgentID string          `json:"agentId"`
	Policy  *RollbackPolicy `json:"policy,omitempty"`
}

func validPolicy(p *RollbackPolicy) error {
	if p != nil && (p.Window <= 0 || p.Window > MaxRollbackWindow) {
		return fmt.Errorf("%w: rollback window must be in (0, %s]", ErrInvalid, MaxRollbackWindow)
	}
	return nil
}

func applySetRollbackPolicy(d *data, _ Command, p SetRollbackPolicy) (Agent, error) {
	a, ok := d.agents[p.AgentID]
	if !ok {
		return Agent{}, fmt.Errorf("%w: agent %q", ErrNotFound, p.AgentID)
	}
	if err := validPolicy(p.Policy); err != nil {
		return Agent{}, err
	}
	d.act.setPolicy(a.ID, p.Policy)
	return cloneAgent(a), nil
}

func (a *activation) setPolicy(agentID string, p *RollbackPolicy) {
	if p == nil || !p.Enabled {
		delete(a.policies, agentID)
		return
	}
	a.policies[agentID] = *p
}

func applyRecordRevisionRuntime(d *data, c Command, p RecordRevisionRuntime) (RevisionRuntime, error) {
	w, err := liveClaim(d, c, p.ClaimRef)
	if err != nil {
		return RevisionRuntime{}, err
	}
	if w.Kind != WorkActivate {
		return RevisionRuntime{}, fmt.Errorf("%w: work %q is %s work, not activate", ErrInvalid, w.ID, w.Kind)
	}
	if p.Credential != "" && p.Credential != CredentialPassed && p.Credential != CredentialRejected && p.Credential != CredentialSkipped {
		return RevisionRuntime{}, fmt.Errorf("%w: credential outcome %q", ErrInvalid, p.Credential)
	}
	rt := d.act.revs[w.RevisionID]
	rt.RevisionID = w.RevisionID
	rt.Phase, rt.Reason, rt.HeldCode, rt.CauseKind, rt.CauseDetail = p.Phase, p.Reason, p.HeldCode, p.CauseKind, p.CauseDetail
	rt.ObservedAt = c.Time
	if p.Credential != "" {
		rt.Credential = p.Credential
		rt.Diagnostics = maps.Clone(p.Diagnostics)
	}
	d.act.revs[rt.RevisionID] = rt
	return cloneRuntime(rt), nil
}

func applyObserveAgent(d *data, c Command, p ObserveAgent) (AgentHealth, error) {
	a, ok := d.agents[p.AgentID]
	if !ok {
		return AgentHealth{}, fmt.Errorf("%w: agent %q", ErrNotFound, p.AgentID)
	}
	if p.RevisionID == "" || a.ActiveRevisionID != p.RevisionID {
		return AgentHealth{}, fmt.Errorf("%w: active revision is %q, observed %q", ErrActiveRevisionChanged, a.ActiveRevisionID, p.RevisionID)
	}
	prev, had := d.act.health[a.ID]
	h := AgentHealth{RevisionID: p.RevisionID, Ready: p.Ready, Reason: p.Reason, HeldCode: p.HeldCode,
		CauseKind: p.CauseKind, CauseDetail: p.CauseDetail, ObservedAt: c.Time, Since: c.Time, EverReady: p.Ready}
	if had && prev.RevisionID == p.RevisionID {
		h.EverReady = h.EverReady || prev.EverReady
		if prev.Ready == p.Ready {
			h.Since = prev.Since
		}
	}
	d.act.health[a.ID] = h
	return h, nil
}

func applyCancelWork(d *data, c Command, p CancelWork) (Work, error) {
	w, a, r, err := liveActivateClaim(d, c, p.ClaimRef)
	if err != nil {
		return Work{}, err
	}
	if a.ActiveRevisionID == r.ID {
		return Work{}, fmt.Errorf("%w: revision %q is already active", ErrConflict, r.ID)
	}
	cancelWork(d, c, w)
	return d.work[w.ID], nil
}

// cancelWork ends open activate work canceled by a stop.
func cancelWork(d *data, c Command, w Work) {
	w = release(w, WorkFailed, c.Time)
	w.LastCode, w.LastDetail = CodeActivationCanceled, "a stop canceled the activation"
	d.putWork(w)
	delete(d.act.cancels, w.ID)
	a := d.agents[w.AgentID]
	if r, ok := d.revisions[w.RevisionID]; ok && a.ActiveRevisionID != r.ID && d.act.rollback[w.ID].From == "" {
		r.Status = RevisionStopped
		r.FailureCode, r.FailureDetail = CodeActivationCanceled, w.LastDetail
		d.revisions[r.ID] = r
	}
	delete(d.act.rollback, w.ID)
	d.appendAudit(c.Time, w.Actor, AuditFail, a, w.RevisionID,
		map[string]string{"kind": w.Kind, "code": CodeActivationCanceled, "workId": w.ID})
}

// requestCancels is RequestStop's effect on the Agent's open activate work:
// queued work is canceled at once, claimed work is flagged for its claim to
// cancel (the claim's holder stops what it started first).
func (d *data) requestCancels(c Command, agentID string) {
	ids := slices.Sorted(maps.Keys(d.open))
	for _, id := range ids {
		w := d.work[id]
		if w.AgentID != agentID || w.Kind != WorkActivate {
			continue
		}
		if w.State == WorkQueued && d.agents[agentID].ActiveRevisionID != w.RevisionID {
			cancelWork(d, c, w)
			continue
		}
		d.act.cancels[id] = true
	}
}

func applyRequeueFinalization(d *data, c Command, p RequeueFinalization) (Work, error) {
	a, ok := d.agents[p.AgentID]
	if !ok {
		return Work{}, fmt.Errorf("%w: agent %q", ErrNotFound, p.AgentID)
	}
	ma, err := maxAttempts(p.MaxAttempts)
	if err != nil {
		return Work{}, err
	}
	rt := d.act.revs[p.RevisionID]
	switch {
	case p.WorkID == "":
		return Work{}, fmt.Errorf("%w: workId is required", ErrInvalid)
	case a.Deleting:
		return Work{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	case a.ActiveRevisionID != p.RevisionID:
		return Work{}, fmt.Errorf("%w: active revision is %q, not %q", ErrActiveRevisionChanged, a.ActiveRevisionID, p.RevisionID)
	case !rt.Unfinalized:
		return Work{}, fmt.Errorf("%w: revision %q owes no finalization", ErrConflict, p.RevisionID)
	}
	if _, ok := d.work[p.WorkID]; ok {
		return Work{}, fmt.Errorf("%w: work %q exists", ErrConflict, p.WorkID)
	}
	for id := range d.open {
		if o := d.work[id]; o.RevisionID == p.RevisionID && o.Kind == WorkActivate {
			return Work{}, fmt.Errorf("%w: revision %q has open work %q", ErrConflict, p.RevisionID, id)
		}
	}
	w := Work{ID: p.WorkID, Kind: WorkActivate, NamespaceID: a.NamespaceID, AgentID: a.ID, RevisionID: p.RevisionID,
		State: WorkQueued, Phase: PhaseActive, MaxAttempts: ma, AvailableAt: c.Time, Actor: c.Actor,
		LastCode: "REVISION_FINALIZATION_INCOMPLETE", CreatedAt: c.Time, UpdatedAt: c.Time}
	d.putWork(w)
	return w, nil
}

func applyRequestRollback(d *data, c Command, p RequestRollback) (Work, error) {
	a, ok := d.agents[p.AgentID]
	if !ok {
		return Work{}, fmt.Errorf("%w: agent %q", ErrNotFound, p.AgentID)
	}
	ma, err := maxAttempts(p.MaxAttempts)
	if err != nil {
		return Work{}, err
	}
	from := d.act.revs[p.FromRevisionID]
	to, toOK := d.revisions[p.ToRevisionID]
	_, policy := d.act.policies[a.ID]
	switch {
	case p.WorkID == "" || p.Cause == "":
		return Work{}, fmt.Errorf("%w: workId and cause are required", ErrInvalid)
	case !policy:
		return Work{}, fmt.Errorf("%w: agent %q has no rollback policy", ErrConflict, a.ID)
	case a.Deleting:
		return Work{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	case a.ActiveRevisionID != p.FromRevisionID:
		return Work{}, fmt.Errorf("%w: active revision is %q, not %q", ErrActiveRevisionChanged, a.ActiveRevisionID, p.FromRevisionID)
	case from.Rollback || from.RolledBack:
		return Work{}, fmt.Errorf("%w: revision %q was activated by, or already caused, a rollback", ErrConflict, p.FromRevisionID)
	case from.PreviousRevisionID == "" || from.PreviousRevisionID != p.ToRevisionID:
		return Work{}, fmt.Errorf("%w: %q is not the exact previous revision of %q", ErrInvalid, p.ToRevisionID, p.FromRevisionID)
	case !toOK || to.AgentID != a.ID || to.NamespaceID != a.NamespaceID:
		return Work{}, fmt.Errorf("%w: revision %q does not belong to agent %q", ErrInvalid, p.ToRevisionID, a.ID)
	}
	if _, ok := d.work[p.WorkID]; ok {
		return Work{}, fmt.Errorf("%w: work %q exists", ErrConflict, p.WorkID)
	}
	for id := range d.open {
		if o := d.work[id]; o.AgentID == a.ID && o.Kind == WorkActivate {
			return Work{}, fmt.Errorf("%w: agent %q has open activate work %q", ErrConflict, a.ID, id)
		}
	}
	from.RolledBack = true
	d.act.revs[p.FromRevisionID] = from
	d.act.rollback[p.WorkID] = rollbackWork{From: p.FromRevisionID, Cause: p.Cause}
	w := Work{ID: p.WorkID, Kind: WorkActivate, NamespaceID: a.NamespaceID, AgentID: a.ID, RevisionID: p.ToRevisionID,
		State: WorkQueued, Phase: PhaseQueued, MaxAttempts: ma, AvailableAt: c.Time, Actor: c.Actor,
		LastCode: "ROLLBACK_REQUESTED", LastDetail: p.Cause, CreatedAt: c.Time, UpdatedAt: c.Time}
	d.putWork(w)
	return w, nil
}

// Hooks the work commands call (apply_work.go, apply_resources.go).

// activatable reports whether activate work w may commit revision r: a
// pending revision, the active one (idempotent re-commit), or the target of
// a rollback work.
func (d *data) activatable(w Work, r Revision) bool {
	return r.Status == RevisionPending || r.Status == RevisionActive || d.act.rollback[w.ID].From != ""
}

// onActivate records a committed activation of r (which was prev's
// successor) and lists prev as no longer active.
func (d *data) onActivate(c Command, w Work, r Revision, prev string) {
	if prev == r.ID {
		return
	}
	if p, ok := d.revisions[prev]; ok && p.Status == RevisionActive {
		p.Status = RevisionSuperseded
		d.revisions[prev] = p
	}
	rt := d.act.revs[r.ID]
	rt.RevisionID = r.ID
	rt.PreviousRevisionID = prev
	rt.ActivatedAt = c.Time
	rt.Unfinalized = true
	rb := d.act.rollback[w.ID]
	rt.Rollback, rt.RollbackCause, rt.RolledBack = rb.From != "", rb.Cause, false
	d.act.revs[r.ID] = rt
	delete(d.act.health, r.AgentID)
}

// onComplete finishes an activation's bookkeeping: each retired revision
// whose own finalization was still owed gets its activate audit record
// first (a newer revision superseded it during its backoff), then this
// revision's record — an activate record, or a rollback record with its
// cause. A revision rolled away from is marked failed with its held code.
func (d *data) onComplete(c Command, w Work, a Agent, r Revision, retired []string) {
	for _, id := range retired {
		rt, ok := d.act.revs[id]
		if !ok || !rt.Unfinalized {
			continue
		}
		rt.Unfinalized = false
		d.act.revs[id] = rt
		d.appendAudit(c.Time, w.Actor, AuditActivate, a, id, map[string]string{
			"number": strconv.FormatInt(d.revisions[id].Number, 10), "finalizedBy": w.ID})
	}
	rt := d.act.revs[r.ID]
	rt.RevisionID = r.ID
	rt.Unfinalized = false
	d.act.revs[r.ID] = rt
	details := map[string]string{"number": strconv.FormatInt(r.Number, 10), "workId": w.ID}
	rb, isRollback := d.act.rollback[w.ID]
	delete(d.act.rollback, w.ID)
	delete(d.act.cancels, w.ID)
	if !isRollback {
		d.appendAudit(c.Time, w.Actor, AuditActivate, a, r.ID, details)
		return
	}
	details["from"], details["cause"] = rb.From, rb.Cause
	d.appendAudit(c.Time, w.Actor, AuditRollback, a, r.ID, details)
	if f, ok := d.revisions[rb.From]; ok && f.ID != r.ID && a.ActiveRevisionID != f.ID {
		f.Status = RevisionFailed
		f.FailureCode, f.FailureDetail = "ROLLED_BACK", rb.Cause
		d.revisions[f.ID] = f
	}
}

// onWorkEnded forgets a finished work's markers; a failed rollback work
// leaves its target revision's status as it was.
func (d *data) onWorkEnded(w Work) (keepStatus bool) {
	_, keepStatus = d.act.rollback[w.ID]
	delete(d.act.rollback, w.ID)
	delete(d.act.cancels, w.ID)
	return keepStatus
}

// forgetAgent drops the section's records of a deleted Agent.
func (d *data) forgetAgent(agentID string, revIDs []string) {
	for _, id := range revIDs {
		delete(d.act.revs, id)
	}
	delete(d.act.policies, agentID)
	delete(d.act.health, agentID)
	for id := range d.act.cancels {
		if d.work[id].AgentID == agentID {
			delete(d.act.cancels, id)
		}
	}
	for id := range d.act.rollback {
		if d.work[id].AgentID == agentID {
			delete(d.act.rollback, id)
		}
	}
}

// Reads.

// RevisionRuntime returns what the engine recorded for a revision.
func (m *Machine) RevisionRuntime(revID string) (RevisionRuntime, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rt, ok := m.d.act.revs[revID]
	return cloneRuntime(rt), ok
}

// RollbackPolicyOf returns an Agent's rollback policy.
func (m *Machine) RollbackPolicyOf(agentID string) (RollbackPolicy, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.d.act.policies[agentID]
	return p, ok
}

// Health returns the observed health of an Agent's active revision.
func (m *Machine) Health(agentID string) (AgentHealth, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.d.act.health[agentID]
	return h, ok
}

// CancelRequested reports whether a stop asked to cancel the work.
func (m *Machine) CancelRequested(workID string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.d.act.cancels[workID]
}

// RollbackOf reports whether activate work is a rollback, and from which
// revision.
func (m *Machine) RollbackOf(workID string) (from string, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rb, ok := m.d.act.rollback[workID]
	return rb.From, ok
}

// Unfinalized lists the Agents whose active revision still owes its
// finalization and has no open activate work, ordered by Agent ID.
func (m *Machine) Unfinalized() []Agent {
	m.mu.RLock()
	defer m.mu.RUnlock()
	busy := map[string]bool{}
	for id := range m.d.open {
		if w := m.d.work[id]; w.Kind == WorkActivate {
			busy[w.RevisionID] = true
		}
	}
	var out []Agent
	for _, id := range slices.Sorted(maps.Keys(m.d.agents)) {
		a := m.d.agents[id]
		if a.ActiveRevisionID == "" || a.Deleting || busy[a.ActiveRevisionID] {
			continue
		}
		if m.d.act.revs[a.ActiveRevisionID].Unfinalized {
			out = append(out, cloneAgent(a))
		}
	}
	return out
}

func cloneRuntime(rt RevisionRuntime) RevisionRuntime {
	rt.Diagnostics = maps.Clone(rt.Diagnostics)
	return rt
}
