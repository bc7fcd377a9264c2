package wire

import (
	"encoding/json"
	"time"

	"oce.dev/oce/shared/contract"
)

// Execution modes and harness ids.
const (
	ModeEmbedded    = contract.ModeEmbedded
	ModeDedicated   = contract.ModeDedicated
	HarnessOpenClaw = contract.HarnessOpenClaw
	HarnessCodex    = contract.HarnessCodex
)

// Namespace is a tenant boundary.
type Namespace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// Quota bounds the Namespace's Agents (absent: unbounded).
	Quota *NamespaceQuota `json:"quota,omitempty"`
	// Labels are the Namespace's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// NamespaceQuota is a Namespace's quota, the body of PUT
// /v1/namespaces/{ns}/quota (all zero: none). Quantities are Kubernetes
// quantities ("4", "500m", "8Gi"); an empty one or zero agents bounds
// nothing. Agents counts the Agents deployed at least once and not deleted;
// cpu and memory the container limits of the Agents that run or are being
// deployed; storage their claims.
type NamespaceQuota struct {
	Agents  int64  `json:"agents,omitempty"`
	CPU     string `json:"cpu,omitempty"`
	Memory  string `json:"memory,omitempty"`
	Storage string `json:"storage,omitempty"`
}

// ContainerResources are one container's requests and limits (Kubernetes
// quantities; empty: the compute driver's default).
type ContainerResources struct {
	CPURequest    string `json:"cpuRequest,omitempty"`
	MemoryRequest string `json:"memoryRequest,omitempty"`
	CPULimit      string `json:"cpuLimit,omitempty"`
	MemoryLimit   string `json:"memoryLimit,omitempty"`
}

// AgentResources are an Agent's requests and limits per container: its
// Gateway's and (dedicated) its Harness's. Each revision freezes them.
type AgentResources struct {
	Gateway ContainerResources `json:"gateway,omitzero"`
	Harness ContainerResources `json:"harness,omitzero"`
}

// Configuration is a native OpenClaw configuration document; every update
// increments Generation.
type Configuration struct {
	ID          string          `json:"id"`
	NamespaceID string          `json:"namespaceId"`
	Name        string          `json:"name"`
	Generation  int64           `json:"generation"`
	Document    json.RawMessage `json:"document"`
	CreatedAt   time.Time       `json:"createdAt"`
	UpdatedAt   time.Time       `json:"updatedAt"`
	// Labels are the Configuration's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// HarnessAuth is an Agent's model-auth binding: a reference to a credential
// source, never secret bytes.
type HarnessAuth struct {
	Method         string `json:"method"`
	CredentialKind string `json:"credentialKind,omitempty"`
	SourceRef      string `json:"sourceRef,omitempty"`
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
	// Status is the Agent's observed state (truth.go).
	Status   *AgentStatus    `json:"status,omitempty"`
	Rollback *RollbackPolicy `json:"rollback,omitempty"`
	// ServicePrincipal names the Agent's ServicePrincipal (its stable
	// identity, frozen in every revision).
	ServicePrincipal string `json:"servicePrincipal,omitempty"`
	// Resources are the Agent's own requests and limits (absent: the
	// compute driver's defaults).
	Resources *AgentResources `json:"resources,omitempty"`
	// Namespace, Configuration and ActiveRevision name what the ids above
	// point at: the Namespace's and Configuration's names and the active
	// revision's number (AgentOverview's fields of the same names agree).
	Namespace      string `json:"namespace,omitempty"`
	Configuration  string `json:"configuration,omitempty"`
	ActiveRevision int64  `json:"activeRevision,omitempty"`
	// Labels are the Agent's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// HarnessIdentity is the server-approved harness a revision runs.
type HarnessIdentity struct {
	ID      string `json:"id"`
	Version string `json:"version"`
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

// RevisionStatuses lists every revision status.
func RevisionStatuses() []string {
	return []string{RevisionPending, RevisionActive, RevisionFailed, RevisionSuperseded, RevisionRetired, RevisionStopped}
}

// Revision is an immutable AgentRevision; only Status, FailureCode and
// FailureDetail change after admission.
type Revision struct {
	ID                      string          `json:"id"`
	AgentID                 string          `json:"agentId"`
	NamespaceID             string          `json:"namespaceId"`
	Number                  int64           `json:"number"`
	Document                json.RawMessage `json:"document"`
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
	// Runtime is what the engine observed of the revision's runtime.
	Runtime            *RevisionRuntime `json:"runtime,omitempty"`
	ServicePrincipalID string           `json:"servicePrincipalId,omitempty"`
	// Resources are the frozen requests and limits (absent: defaults).
	Resources *AgentResources `json:"resources,omitempty"`
}

// Work kinds.
const (
	WorkActivate = "activate"
	WorkStop     = "stop"
	WorkDelete   = "delete"
)

// Work states.
const (
	WorkQueued     = "queued"
	WorkClaimed    = "claimed"
	WorkCompleted  = "completed"
	WorkFailed     = "failed"
	WorkSuperseded = "superseded"
)

// WorkKinds and WorkStates list the closed sets.
func WorkKinds() []string { return []string{WorkActivate, WorkStop, WorkDelete} }

// WorkStates lists every work state.
func WorkStates() []string {
	return []string{WorkQueued, WorkClaimed, WorkCompleted, WorkFailed, WorkSuperseded}
}

// Progress phases of activate work (and PhaseStopping of stop work).
const (
	PhaseQueued    = "queued"
	PhaseStopping  = "stopping-predecessors"
	PhasePreparing = "preparing"
	PhaseReady     = "ready"
	PhaseActive    = "active"
)

// Work is one unit of revision work.
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
	Actor       string    `json:"actor,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// ActorGroups are the groups an OIDC issuer asserted for Actor.
	ActorGroups []string `json:"actorGroups,omitempty"`
	// Namespace, Agent and Revision name what the ids above point at
	// while it exists: the names and the revision's number.
	Namespace string `json:"namespace,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
}

// Audit actions.
const (
	AuditActivate = "openclaw.agents.lifecycle.activate"
	AuditDeploy   = "openclaw.agents.lifecycle.deploy"
	AuditStop     = "openclaw.agents.lifecycle.stop"
	AuditDelete   = "openclaw.agents.lifecycle.delete"
	AuditFail     = "openclaw.agents.lifecycle.fail"
	// AuditWorkspaceWrite is one write of a workspace document: details
	// name the document and the version written (or the refusal's code).
	AuditWorkspaceWrite = "oce.agents.workspace.write"
)

// AuditRecord is one append-only audit entry.
type AuditRecord struct {
	Seq         int64             `json:"seq"`
	Time        time.Time         `json:"time"`
	Action      string            `json:"action"`
	Actor       string            `json:"actor,omitempty"`
	NamespaceID string            `json:"namespaceId,omitempty"`
	AgentID     string            `json:"agentId,omitempty"`
	RevisionID  string            `json:"revisionId,omitempty"`
	Details     map[string]string `json:"details,omitempty"`
	// Resource is the exact resource acted on (Agent::"team/bot");
	// Outcome is success, denied or failure.
	Resource string `json:"resource,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	// Namespace, Agent and Revision name what the ids above point at
	// while it exists: the names and the revision's number.
	Namespace string `json:"namespace,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
}
