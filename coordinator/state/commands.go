package state

import (
	"encoding/json"
	"errors"
	"time"
)

// Command is the envelope of one Raft log entry. Time is stamped by the
// leader before the entry is proposed and is the only clock Apply sees.
type Command struct {
	Type    string          `json:"type"`
	Time    time.Time       `json:"time"`
	Actor   string          `json:"actor,omitempty"`
	Payload json.RawMessage `json:"payload"`
	// Idempotency is set for a request that carried an Idempotency-Key
	// (idempotency.go).
	Idempotency *Idempotency `json:"idempotency,omitempty"`
}

// The command table (table.go) names each payload struct below.

// CreateNamespace creates a Namespace. ID is minted by the leader.
type CreateNamespace struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// PutConfiguration creates a Configuration (ID new) or replaces its document
// (ID existing); Apply increments the generation. Labels are a new
// Configuration's; a replacement keeps the stored ones (SetLabels changes
// them).
type PutConfiguration struct {
	ID          string            `json:"id"`
	NamespaceID string            `json:"namespaceId"`
	Name        string            `json:"name"`
	Document    json.RawMessage   `json:"document"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// DeleteNamespace removes an empty Namespace: Apply refuses (ErrConflict)
// while it holds any Agent or Configuration.
type DeleteNamespace struct {
	ID string `json:"id"`
}

// DeleteConfiguration removes a Configuration no Agent references (else
// ErrConflict). Revisions froze their own copy of the document.
type DeleteConfiguration struct {
	ID string `json:"id"`
}

// CreateAgent creates an Agent; an empty ExecutionMode means embedded.
type CreateAgent struct {
	ID              string       `json:"id"`
	NamespaceID     string       `json:"namespaceId"`
	Name            string       `json:"name"`
	ExecutionMode   string       `json:"executionMode,omitempty"`
	ConfigurationID string       `json:"configurationId"`
	HarnessAuth     *HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID       string       `json:"computeId,omitempty"`
	Plugins         []string     `json:"plugins,omitempty"`
	// Rollback is the Agent's opt-in rollback policy (activation.go).
	Rollback *RollbackPolicy `json:"rollback,omitempty"`
	// Resources are the Agent's container requests and limits (nil: the
	// compute driver's defaults).
	Resources *AgentResources `json:"resources,omitempty"`
	// ServicePrincipalID names the Agent's ServicePrincipal: an existing one
	// of the Namespace, or, with OwnServicePrincipal, a new one Apply creates
	// under this ID, named like the Agent and owned by it.
	ServicePrincipalID  string `json:"servicePrincipalId,omitempty"`
	OwnServicePrincipal bool   `json:"ownServicePrincipal,omitempty"`
	// Labels are the Agent's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// UpdateAgent changes the fields that are set; an omitted ExecutionMode
// preserves the Agent's mode.
type UpdateAgent struct {
	AgentID         string       `json:"agentId"`
	ExecutionMode   *string      `json:"executionMode,omitempty"`
	ConfigurationID *string      `json:"configurationId,omitempty"`
	HarnessAuth     *HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID       *string      `json:"computeId,omitempty"`
	Plugins         *[]string    `json:"plugins,omitempty"`
	// Rollback replaces the rollback policy when set (Enabled false clears it).
	Rollback *RollbackPolicy `json:"rollback,omitempty"`
	// Resources replaces the Agent's requests and limits when set (an empty
	// one restores the driver's defaults).
	Resources *AgentResources `json:"resources,omitempty"`
}

// SetNamespaceQuota sets (or, with a nil or empty Quota, removes) a
// Namespace's quota. It changes no running Agent: deploy admission applies
// it from the next deploy on.
type SetNamespaceQuota struct {
	NamespaceID string          `json:"namespaceId"`
	Quota       *NamespaceQuota `json:"quota,omitempty"`
}

// Applied returns a with the update's Agent fields applied (the rollback
// policy is not an Agent field): what Apply stores, and what the API
// authorizes an update against besides the Agent as it is. It does not
// validate; Apply does.
func (p UpdateAgent) Applied(a Agent) Agent {
	a = cloneAgent(a)
	if p.ExecutionMode != nil {
		a.ExecutionMode = *p.ExecutionMode
	}
	if p.ConfigurationID != nil {
		a.ConfigurationID = *p.ConfigurationID
	}
	if p.HarnessAuth != nil {
		a.HarnessAuth = cloneAuth(p.HarnessAuth)
	}
	if p.ComputeID != nil {
		a.ComputeID = *p.ComputeID
	}
	if p.Plugins != nil {
		a.Plugins = cloneStrings(*p.Plugins)
	}
	if p.Resources != nil {
		a.Resources = cloneResources(p.Resources)
	}
	return a
}

// AdmitRevision freezes an admitted revision and enqueues its activate work
// in one entry. Apply assigns Revision.Number (Agent.RevisionCount+1), sets
// the status pending, creates queued activate work (Phase queued, AvailableAt
// = the entry's Time; MaxAttempts 0 means DefaultMaxAttempts) and appends a
// deploy audit record. It fails with ErrConflict when the Agent is deleting,
// the revision's Configuration or Mode is not the Agent's, or the Configuration's
// current Generation differs from Revision.ConfigurationGeneration (the
// configuration changed since admission was decided). Admitting a newer
// revision does not touch older work; the engine supersedes it. Apply
// returns an Admitted.
type AdmitRevision struct {
	Revision    Revision `json:"revision"`
	WorkID      string   `json:"workId"`
	MaxAttempts int      `json:"maxAttempts"`
	ActorGroups []string `json:"actorGroups,omitempty"` // Work.ActorGroups
}

// RequestStop enqueues stop work for an Agent.
type RequestStop struct {
	AgentID     string   `json:"agentId"`
	WorkID      string   `json:"workId"`
	MaxAttempts int      `json:"maxAttempts"`
	ActorGroups []string `json:"actorGroups,omitempty"` // Work.ActorGroups
}

// RequestDelete marks an Agent deleting and enqueues delete work.
type RequestDelete struct {
	AgentID     string   `json:"agentId"`
	WorkID      string   `json:"workId"`
	MaxAttempts int      `json:"maxAttempts"`
	ActorGroups []string `json:"actorGroups,omitempty"` // Work.ActorGroups
}

// ClaimWork claims queued work whose AvailableAt has passed, for Owner until
// LeaseExpiry, and increments Attempts. It fails with ErrNotClaimable when
// the work is not queued, not yet available, out of attempts (Attempts >=
// MaxAttempts), or another work of its Agent holds a live claim. A claimed
// work whose lease has expired (entry Time > LeaseExpiry) may be claimed
// again; its LastCode becomes LEASE_EXPIRED. Apply returns a *ClaimResult.
type ClaimWork struct {
	WorkID      string    `json:"workId"`
	Owner       string    `json:"owner"`
	LeaseExpiry time.Time `json:"leaseExpiry"`
}

// ClaimRef names a live claim; every engine command carries one, and Apply
// fails it with ErrClaimLost when the work is gone or not claimed, its owner
// differs, or the entry's Time is after its LeaseExpiry.
type ClaimRef struct {
	WorkID string `json:"workId"`
	Owner  string `json:"owner"`
}

// RenewClaim extends a live claim.
type RenewClaim struct {
	ClaimRef
	LeaseExpiry time.Time `json:"leaseExpiry"`
}

// SetWorkPhase records progress of a live claim.
type SetWorkPhase struct {
	ClaimRef
	Phase string `json:"phase"`
}

// RequeueWork releases a live claim for a later retry at AvailableAt,
// recording the code of the failed attempt. Defer marks a pass that did not
// fail (the revision is simply not ready yet): its attempt is given back.
type RequeueWork struct {
	ClaimRef
	AvailableAt time.Time `json:"availableAt"`
	Code        string    `json:"code"`
	Detail      string    `json:"detail,omitempty"`
	Defer       bool      `json:"defer,omitempty"`
}

// FailWork ends work permanently; for activate work the revision is marked
// failed with Code (unless it already is the Agent's active revision) and a
// fail audit record is appended.
type FailWork struct {
	ClaimRef
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
}

// SupersedeWork ends activate work because a newer revision of the same
// Agent exists (else ErrConflict); a pending revision becomes superseded.
type SupersedeWork struct {
	ClaimRef
}

// RecordPredecessorStop records (or refreshes) the stop of another revision
// of the claimed work's Agent. StoppedAt becomes the entry's Time. At most
// MaxPredecessorStops records are kept per Agent; the oldest is evicted.
type RecordPredecessorStop struct {
	ClaimRef
	RevisionID  string    `json:"revisionId"`
	Restops     int       `json:"restops"`
	NextCheckAt time.Time `json:"nextCheckAt"`
}

// DropPredecessorStop forgets predecessor records of the claimed work's
// Agent: the named revisions, or all when RevisionIDs is empty.
type DropPredecessorStop struct {
	ClaimRef
	RevisionIDs []string `json:"revisionIds,omitempty"`
}

// ActivateRevision compare-and-sets the Agent's activeRevisionId from
// Expected to the claimed work's revision, marks it active and sets the work
// phase active; ErrActiveRevisionChanged on mismatch. Expected equal to the
// work's revision is an idempotent re-commit.
type ActivateRevision struct {
	ClaimRef
	Expected string `json:"expected"`
}

// CompleteActivation completes activate work, marks the listed predecessors
// retired (dropping their predecessor-stop records), and appends exactly one
// activate audit record — only when the Agent's active revision is the
// work's revision (else ErrActiveRevisionChanged). The work is no longer
// claimed afterwards, so a repeat fails with ErrClaimLost.
type CompleteActivation struct {
	ClaimRef
	Retired []string `json:"retired,omitempty"`
}

// SetRevisionStatus changes a revision's status (stopped, retired) under a
// live claim of its Agent's work.
type SetRevisionStatus struct {
	ClaimRef
	RevisionID string `json:"revisionId"`
	Status     string `json:"status"`
}

// CompleteStop clears the active revision when it still equals Expected
// (else ErrActiveRevisionChanged), marks that revision stopped, completes the
// stop work and appends a stop audit record.
type CompleteStop struct {
	ClaimRef
	Expected string `json:"expected"`
}

// CompleteDeletion removes the deleting Agent with its revisions, work
// (including this one) and predecessor-stop records, keeping the audit log,
// and appends a delete audit record.
type CompleteDeletion struct {
	ClaimRef
}

// SetInstallation replaces the installation settings.
type SetInstallation struct {
	Installation Installation `json:"installation"`
}

// ExpireWork ends work that can never be claimed again: queued, or claimed
// with an expired lease, and Attempts >= MaxAttempts. The work fails with
// MAX_ATTEMPTS_EXHAUSTED (revision failed unless active); otherwise
// ErrNotClaimable.
type ExpireWork struct {
	WorkID string `json:"workId"`
}

// Admitted is what a successful AdmitRevision returns: the frozen revision
// and the id of its activate work.
type Admitted struct {
	Revision Revision `json:"revision"`
	WorkID   string   `json:"workId"`
}

// ReleaseClaims returns every claimed work whose Owner is not Keep to the
// queue at once (AvailableAt = the entry's Time, LastCode LEADER_CHANGED),
// live lease or not. A new leader's engine proposes it, with its own owner,
// after verifying its leadership: claims of earlier leaders' engines can no
// longer write anything (every engine command names its owner), so their
// work need not wait out the lease. Attempts are kept, as after a lapsed
// lease. Apply returns the released work IDs, sorted.
type ReleaseClaims struct {
	Keep string `json:"keep"`
}

// ClaimResult is what a successful ClaimWork returns.
type ClaimResult struct {
	Work     Work      `json:"work"`
	Revision *Revision `json:"revision,omitempty"` // the frozen revision of activate work
}

// DefaultMaxAttempts applies when a request carries MaxAttempts 0.
const DefaultMaxAttempts = 10

// Codes Apply itself records.
const (
	CodeLeaseExpired         = "LEASE_EXPIRED"
	CodeMaxAttemptsExhausted = "MAX_ATTEMPTS_EXHAUSTED"
	CodeLeaderChanged        = "LEADER_CHANGED"
)

// Sentinel errors callers branch on; Apply returns them wrapped.
var (
	ErrNotFound              = errors.New("state: not found")
	ErrConflict              = errors.New("state: conflict")
	ErrInvalid               = errors.New("state: invalid command")
	ErrNotClaimable          = errors.New("state: work not claimable")
	ErrClaimLost             = errors.New("state: claim lost")
	ErrActiveRevisionChanged = errors.New("state: ACTIVE_REVISION_CHANGED")
)
