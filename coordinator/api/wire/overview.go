package wire

import "time"

// AgentOverview is one Agent with its observed state (Agent.Status, copied
// to State) and the numbers a list shows: names and revision numbers, never
// ids alone.
type AgentOverview struct {
	Agent
	State         string `json:"state"`
	Configuration string `json:"configuration,omitempty"` // the Configuration's name
	// ActiveRevision and LatestRevision are revision numbers (0: none).
	ActiveRevision int64 `json:"activeRevision,omitempty"`
	LatestRevision int64 `json:"latestRevision,omitempty"`
	// Work is the Agent's in-flight work, when there is some; Phase its phase.
	Work  *Work  `json:"work,omitempty"`
	Phase string `json:"phase,omitempty"`
	// FailureCode, HeldCode, CauseKind and CauseDetail explain the latest
	// revision's failure: the closed revision failure code, the runtime's
	// held diagnostic code, and for MODEL_PROBE_FAILED its cause (docs/design/seed-001.md).
	FailureCode string `json:"failureCode,omitempty"`
	HeldCode    string `json:"heldCode,omitempty"`
	CauseKind   string `json:"causeKind,omitempty"`
	CauseDetail string `json:"causeDetail,omitempty"`
}

// NamespaceOverview is the answer of GET /v1/namespaces/{ns}/overview.
type NamespaceOverview struct {
	Namespace Namespace       `json:"namespace"`
	Agents    []AgentOverview `json:"agents"`
}

// RevisionSummary is a revision without its document, with its held
// failure spelled out.
type RevisionSummary struct {
	ID            string          `json:"id"`
	Number        int64           `json:"number"`
	Harness       HarnessIdentity `json:"harness"`
	Mode          string          `json:"mode"`
	Status        string          `json:"status"`
	FailureCode   string          `json:"failureCode,omitempty"`
	FailureDetail string          `json:"failureDetail,omitempty"`
	HeldCode      string          `json:"heldCode,omitempty"`
	CauseKind     string          `json:"causeKind,omitempty"`
	CauseDetail   string          `json:"causeDetail,omitempty"`
	// Credential is the pre-cutover credential check's outcome (passed,
	// rejected, skipped) and Diagnostics its closed-set 401/403 facts
	// (providerCode, bodyShape, …; docs/design/seed-001.md).
	Credential  string            `json:"credential,omitempty"`
	Diagnostics map[string]string `json:"diagnostics,omitempty"`
	// ConfigurationGeneration is the Configuration generation it froze.
	ConfigurationGeneration int64     `json:"configurationGeneration"`
	CreatedAt               time.Time `json:"createdAt"`
}

// AgentDetail is the answer of GET …/agents/{agent}/overview: the Agent,
// its revisions (newest first), its recent work and audit records (newest
// first, at most DetailHistory of each).
type AgentDetail struct {
	AgentOverview
	Revisions []RevisionSummary `json:"revisions"`
	Work      []Work            `json:"workHistory"`
	Audit     []AuditRecord     `json:"audit"`
}

// DetailHistory bounds the work and audit records of an AgentDetail.
const DetailHistory = 50
