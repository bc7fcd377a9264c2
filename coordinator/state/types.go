// Package state is the coordinator's replicated state machine: the entities
// (Namespaces, Configurations, Agents, immutable AgentRevisions, revision
// work, predecessor-stop records, the audit log) and the commands that change
// them. Every mutation is one Command in one Raft log entry. Apply never reads
// the clock or a random source: the leader stamps times, lease expiries and
// ids into the command, so applying the same log twice yields identical state.
package state

import (
	"encoding/json"
	"time"
)

// Execution modes of an Agent.
const (
	ModeEmbedded  = "embedded"
	ModeDedicated = "dedicated"
)

// Harness ids.
const (
	HarnessOpenClaw = "openclaw"
	HarnessCodex    = "codex"
)

// Namespace is a tenant boundary.
type Namespace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// Quota bounds what the Namespace's Agents may hold (nil: unbounded);
	// deploy admission refuses a deploy over it (QUOTA_EXCEEDED).
	Quota *NamespaceQuota `json:"quota,omitempty"`
	// Labels are the Namespace's labels (labels.go).
	Labels map[string]string `json:"labels,omitempty"`
}

// NamespaceQuota bounds a Namespace's Agents. Quantities are Kubernetes
// quantity strings ("4", "500m", "8Gi"); zero or empty: that dimension is
// unbounded. The API validates them; the state stores them as given.
type NamespaceQuota struct {
	// Agents counts the Agents that hold runtime resources: deployed at
	// least once and not deleted (their claims, Services and Secrets stay
	// while they are stopped).
	Agents int64 `json:"agents,omitempty"`
	// CPU and Memory bound the sum of the container limits of the Agents
	// that run or are being deployed; Storage the sum of the Agents' claims.
	CPU     string `json:"cpu,omitempty"`
	Memory  string `json:"memory,omitempty"`
	Storage string `json:"storage,omitempty"`
}

// Empty reports whether q bounds nothing.
func (q *NamespaceQuota) Empty() bool {
	return q == nil || (q.Agents == 0 && q.CPU == "" && q.Memory == "" && q.Storage == "")
}

// ContainerResources are one container's requests and limits, as
// Kubernetes quantity strings; an empty value takes the compute driver's
// default.
type ContainerResources struct {
	CPURequest    string `json:"cpuRequest,omitempty"`
	MemoryRequest string `json:"memoryRequest,omitempty"`
	CPULimit      string `json:"cpuLimit,omitempty"`
	MemoryLimit   string `json:"memoryLimit,omitempty"`
}

// Empty reports whether c sets nothing.
func (c ContainerResources) Empty() bool { return c == ContainerResources{} }

// AgentResources are an Agent's per-container requests and limits: the
// Gateway's and (dedicated) the Harness's. Each revision freezes them.
type AgentResources struct {
	Gateway ContainerResources `json:"gateway,omitzero"`
	Harness ContainerResources `json:"harness,omitzero"`
}

// Empty reports whether r sets nothing.
func (r *AgentResources) Empty() bool { return r == nil || (r.Gateway.Empty() && r.Harness.Empty()) }

// Configuration is a native OpenClaw configuration document. Every update
// increments Generation.
type Configuration struct {
	ID          string          `json:"id"`
	NamespaceID string          `json:"namespaceId"`
	Name        string          `json:"name"`
	Generation  int64           `json:"generation"`
	Document    json.RawMessage `json:"document"`
	CreatedAt   time.Time       `json:"createdAt"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	// Labels are the Configuration's labels (labels.go); they are no input
	// of a revision, and changing them leaves Generation as it is.
	Labels map[string]string `json:"labels,omitempty"`
}

// HarnessAuth is the Agent's model-auth binding. It names a credential
// source; it never holds secret bytes.
type HarnessAuth struct {
	Method         string `json:"method"`                   // api_key | codex_pat | chatgpt_service_account | credential_source | runtime
	CredentialKind string `json:"credentialKind,omitempty"` // secret | service_account | credential_gateway
	SourceRef      string `json:"sourceRef,omitempty"`      // opaque reference, e.g. secret://ns/name#key
}

// Agent is the stable, user-configured resource.
type Agent struct {
	ID               string       `json:"id"`
	NamespaceID      string       `json:"namespaceId"`
	Name             string       `json:"name"`
	ExecutionMode    string       `json:"executionMode"`
	ConfigurationID  string       `json:"configurationId"`
	HarnessAuth      *HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID        string       `json:"computeId"`
	Plugins          []string     `json:"plugins,omitempty"`
	ActiveRevisionID string       `json:"activeRevisionId,omitempty"`
	RevisionCount    int64        `json:"revisionCount"`
	Deleting         bool         `json:"deleting,omitempty"`
	CreatedAt        time.Time    `json:"createdAt"`
	UpdatedAt        time.Time    `json:"updatedAt"`
	// ServicePrincipalID is the Agent's stable identity (identities.go);
	// every revision freezes it.
	ServicePrincipalID string `json:"servicePrincipalId,omitempty"`
	// Resources are the Agent's container requests and limits (nil: the
	// compute driver's defaults); each revision freezes them.
	Resources *AgentResources `json:"resources,omitempty"`
	// Labels are the Agent's labels (labels.go); no revision freezes them.
	Labels map[string]string `json:"labels,omitempty"`
}

// HarnessIdentity is the server-approved harness a revision runs.
type HarnessIdentity struct {
	ID      string `json:"id"`      // openclaw | codex
	Version string `json:"version"` // pinned runtime version
}

// Revision status values.
const (
	RevisionPending    = "pending"
	RevisionActive     = "active"
	RevisionFailed     = "failed"
	RevisionSuperseded = "superseded"
	RevisionRetired    = "retired"
	RevisionStopped    = "stopped"
)

// Revision is an immutable AgentRevision once admitted; only Status,
// FailureCode and FailureDetail change afterwards.
type Revision struct {
	ID                      string          `json:"id"`
	AgentID                 string          `json:"agentId"`
	NamespaceID             string          `json:"namespaceId"`
	Number                  int64           `json:"number"`
	Document                json.RawMessage `json:"document"` // the admitted native configuration
	ConfigurationID         string          `json:"configurationId"`
	ConfigurationGeneration int64           `json:"configurationGeneration"`
	Harness                 HarnessIdentity `json:"harness"`
	Mode                    string          `json:"mode"`
	ComputeID               string          `json:"computeId"`
	HarnessAuth             *HarnessAuth    `json:"harnessAuth,omitempty"`
	Plugins                 []string        `json:"plugins,omitempty"`
	Status                  string          `json:"status"`
	FailureCode             string          `json:"failureCode,omitempty"`
	FailureDetail           string          `json:"failureDetail,omitempty"`
	CreatedAt               time.Time       `json:"createdAt"`
	// ServicePrincipalID is the Agent's ServicePrincipal, frozen (docs/design/seed-000.md).
	ServicePrincipalID string `json:"servicePrincipalId,omitempty"`
	// Resources are the Agent's requests and limits, frozen (nil: the
	// compute driver's defaults).
	Resources *AgentResources `json:"resources,omitempty"`
}

// Work kinds.
const (
	WorkActivate = "activate" // bring a revision up and activate it
	WorkStop     = "stop"     // stop an Agent's runtimes, clear its active revision
	WorkDelete   = "delete"   // retire every revision, delete runtime credentials, remove the Agent
)

// Work states.
const (
	WorkQueued     = "queued"
	WorkClaimed    = "claimed"
	WorkCompleted  = "completed"
	WorkFailed     = "failed"
	WorkSuperseded = "superseded"
)

// Progress phases of activate work, shown by occ agent deploy --wait.
const (
	PhaseQueued    = "queued"
	PhaseStopping  = "stopping-predecessors" // also the phase of stop work
	PhasePreparing = "preparing"
	PhaseReady     = "ready"
	PhaseActive    = "active"
)

// Work is one unit of revision work, claimed under a lease.
type Work struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	NamespaceID string    `json:"namespaceId"`
	AgentID     string    `json:"agentId"`
	RevisionID  string    `json:"revisionId,omitempty"`
	State       string    `json:"state"`
	Phase       string    `json:"phase,omitempty"`
	Attempts    int       `json:"attempts"`
	MaxAttempts int       `json:"maxAttempts"`
	AvailableAt time.Time `json:"availableAt"`
	Owner       string    `json:"owner,omitempty"`
	LeaseExpiry time.Time `json:"leaseExpiry,omitempty"`
	LastCode    string    `json:"lastCode,omitempty"`
	LastDetail  string    `json:"lastDetail,omitempty"`
	Actor       string    `json:"actor,omitempty"` // who requested it; the completion audit carries it
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// ActorGroups are the groups an external identity provider asserted for
	// Actor when the work was requested; the engine reauthorizes the actor
	// with them. The slice is never modified in place.
	ActorGroups []string `json:"actorGroups,omitempty"`
}

// MaxPredecessorStops bounds the predecessor-stop records kept per Agent.
const MaxPredecessorStops = 4096

// PredecessorStop records that an earlier revision's runtime was stopped, so
// later passes skip it until its re-stop is due (after 1, 2, 4… leases).
type PredecessorStop struct {
	AgentID     string    `json:"agentId"`
	RevisionID  string    `json:"revisionId"`
	StoppedAt   time.Time `json:"stoppedAt"`
	Restops     int       `json:"restops"`
	NextCheckAt time.Time `json:"nextCheckAt"`
}

// Audit actions.
const (
	AuditActivate = "openclaw.agents.lifecycle.activate"
	AuditDeploy   = "openclaw.agents.lifecycle.deploy"
	AuditStop     = "openclaw.agents.lifecycle.stop"
	AuditDelete   = "openclaw.agents.lifecycle.delete"
	AuditFail     = "openclaw.agents.lifecycle.fail"

	AuditStopRequest         = "openclaw.agents.lifecycle.stop.request"
	AuditDeleteRequest       = "openclaw.agents.lifecycle.delete.request"
	AuditNamespaceCreate     = "oce.namespaces.create"
	AuditConfigurationCreate = "oce.configurations.create"
	AuditConfigurationUpdate = "oce.configurations.update"
	AuditNamespaceDelete     = "oce.namespaces.delete"
	AuditNamespaceQuota      = "oce.namespaces.quota"
	AuditConfigurationDelete = "oce.configurations.delete"
	AuditAgentCreate         = "oce.agents.create"
	AuditAgentUpdate         = "oce.agents.update"
	// AuditRepair records one object of an active Agent's runtime the
	// health watcher restored after it was deleted or edited by hand (drift
	// repair): details name its kind, namespace, name and action. It is
	// appended through RecordAudit by the system actor SystemRepairActor.
	AuditRepair = "openclaw.agents.lifecycle.repair"
	// AuditWorkspaceWrite records one write of an Agent workspace document
	// (the API appends it: the write is an effect on the runtime).
	AuditWorkspaceWrite = "oce.agents.workspace.write"
)

// SystemRepairActor is the actor of drift repair records (AuditRepair).
const SystemRepairActor = "system:drift-repair"

// AuditRecord is one append-only audit entry. Seq is assigned by Apply.
type AuditRecord struct {
	Seq         int64             `json:"seq"`
	Time        time.Time         `json:"time"`
	Action      string            `json:"action"`
	Actor       string            `json:"actor,omitempty"`
	NamespaceID string            `json:"namespaceId,omitempty"`
	AgentID     string            `json:"agentId,omitempty"`
	RevisionID  string            `json:"revisionId,omitempty"`
	Details     map[string]string `json:"details,omitempty"`
	// Resource is the exact resource acted on (a Cedar entity UID of names,
	// e.g. Agent::"team/bot"); Outcome is success, denied or failure.
	Resource string `json:"resource,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
}

// Installation holds installation-wide settings the admission rules consult.
type Installation struct {
	// NativeWorkerSupport declares that the pinned runtime image supports
	// dedicated native OpenClaw workers ("pinned-runtime"), empty otherwise.
	NativeWorkerSupport string `json:"nativeWorkerSupport,omitempty"`
	// SandboxDriver names a qualifying SandboxDriver with networking,
	// filesystem and process containment; empty when there is none.
	SandboxDriver string `json:"sandboxDriver,omitempty"`
	// CredentialGateway names a selected Credential Gateway; empty when none.
	CredentialGateway string `json:"credentialGateway,omitempty"`
}
