package wire

// Truthful activation (issue 14): an Agent's observed state, a revision's
// runtime progress and diagnostics, and the opt-in rollback policy.

// Agent states: serving is observed (the active revision was seen ready
// through the compute driver), never assumed.
const (
	AgentServing    = "serving"    // the active revision is observed ready
	AgentActivating = "activating" // a revision is being activated, or the active one is not observed serving since its cutover yet
	AgentDegraded   = "degraded"   // the active revision served and is now observed not ready, or is held
	AgentFailed     = "failed"     // no active revision; the latest one failed
	AgentStopped    = "stopped"    // no active revision, nothing failed
	AgentDeleting   = "deleting"
)

// AgentStates lists every Agent state.
func AgentStates() []string {
	return []string{AgentServing, AgentActivating, AgentDegraded, AgentFailed, AgentStopped, AgentDeleting}
}

// AgentStatus is an Agent's observed state with its reason: the held code
// and cause of its active revision, or the failure of its latest one.
type AgentStatus struct {
	State string `json:"state"`
	// Reason is a short closed-vocabulary reason (a not-ready reason, a
	// held code, a failure code).
	Reason      string `json:"reason,omitempty"`
	HeldCode    string `json:"heldCode,omitempty"`
	CauseKind   string `json:"causeKind,omitempty"`
	CauseDetail string `json:"causeDetail,omitempty"`
	// ServingRevisionID is the revision observed ready (state serving).
	ServingRevisionID string `json:"servingRevisionId,omitempty"`
	// PendingRevisionID is the revision being activated (state activating).
	PendingRevisionID string `json:"pendingRevisionId,omitempty"`
	// ObservedAt is when the active revision's readiness was last seen
	// to change.
	ObservedAt string `json:"observedAt,omitempty"`
}

// RollbackPolicy is an Agent's opt-in exact-owner rollback: a newly active
// revision that becomes held, or is not observed ready, within Window
// after its activation is replaced once by the exact previous revision.
type RollbackPolicy struct {
	Enabled bool `json:"enabled"`
	// Window is a Go duration ("5m").
	Window string `json:"window,omitempty"`
}

// RevisionRuntime is what the activation engine observed of a revision's
// runtime: the phase it is in, why it is not ready, its held code and
// cause, the pre-cutover credential check, and its activation.
type RevisionRuntime struct {
	Phase       string            `json:"phase,omitempty"`
	Reason      string            `json:"reason,omitempty"`
	HeldCode    string            `json:"heldCode,omitempty"`
	CauseKind   string            `json:"causeKind,omitempty"`
	CauseDetail string            `json:"causeDetail,omitempty"`
	Credential  string            `json:"credential,omitempty"`
	Diagnostics map[string]string `json:"diagnostics,omitempty"`
	// PreviousRevisionID was active before this revision's activation.
	PreviousRevisionID string `json:"previousRevisionId,omitempty"`
	ActivatedAt        string `json:"activatedAt,omitempty"`
	// FinalizationIncomplete: active, but retirement and the activate
	// audit record are still owed (REVISION_FINALIZATION_INCOMPLETE).
	FinalizationIncomplete bool   `json:"finalizationIncomplete,omitempty"`
	Rollback               bool   `json:"rollback,omitempty"`
	RollbackCause          string `json:"rollbackCause,omitempty"`
	// WorkPhase, LastCode and LastDetail are the revision's activate work's
	// progress (queued → stopping-predecessors → preparing → ready → active).
	WorkPhase  string `json:"workPhase,omitempty"`
	LastCode   string `json:"lastCode,omitempty"`
	LastDetail string `json:"lastDetail,omitempty"`
}

// AuditRollback is the audit action of a rollback activation.
const AuditRollback = "openclaw.agents.lifecycle.rollback"
