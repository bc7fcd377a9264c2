// Package wire holds the JSON bodies of the coordinator's HTTP API that both
// the server (coordinator/api) and its client (coordinator/client) use. The
// entities themselves are coordinator/state types.
package wire

import (
	"encoding/json"

	"oce.dev/oce/coordinator/state"
)

// Error codes of the API's closed set.
const (
	CodeInvalidRequest   = "INVALID_REQUEST"   // 400, also 413 for an oversized body
	CodeUnauthorized     = "UNAUTHORIZED"      // 401
	CodeNotFound         = "NOT_FOUND"         // 404
	CodeResourceConflict = "RESOURCE_CONFLICT" // 409
	CodeNotLeader        = "NOT_LEADER"        // 421 (leader known) or 503 (no leader)
	CodeNotReady         = "NOT_READY"         // 503 from /readyz
	CodeInternal         = "INTERNAL"          // 500
)

// ErrorBody is the envelope of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the code, a human message and optional details. A
// NOT_LEADER error carries details.leader, the leader's HTTP address.
type ErrorDetail struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// List is the envelope of every collection response.
type List[T any] struct {
	Items []T `json:"items"`
}

// CreateNamespace is the body of POST /v1/namespaces.
type CreateNamespace struct {
	Name string `json:"name"`
}

// CreateConfiguration is the body of POST /v1/namespaces/{ns}/configurations.
type CreateConfiguration struct {
	Name     string          `json:"name"`
	Document json.RawMessage `json:"document"`
}

// UpdateConfiguration is the body of PUT /v1/namespaces/{ns}/configurations/{cfg}.
type UpdateConfiguration struct {
	Document json.RawMessage `json:"document"`
}

// CreateAgent is the body of POST /v1/namespaces/{ns}/agents.
// Configuration names the Configuration by id or name in the same Namespace.
type CreateAgent struct {
	Name          string             `json:"name"`
	Configuration string             `json:"configuration"`
	ExecutionMode string             `json:"executionMode,omitempty"`
	HarnessAuth   *state.HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID     string             `json:"computeId,omitempty"`
	Plugins       []string           `json:"plugins,omitempty"`
}

// UpdateAgent is the body of PATCH /v1/namespaces/{ns}/agents/{agent}; omitted
// fields keep their values.
type UpdateAgent struct {
	ExecutionMode *string            `json:"executionMode,omitempty"`
	Configuration *string            `json:"configuration,omitempty"`
	HarnessAuth   *state.HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID     *string            `json:"computeId,omitempty"`
	Plugins       *[]string          `json:"plugins,omitempty"`
}

// Deploy is the optional body of POST …/agents/{agent}/deploy.
type Deploy struct {
	// LogLevel is the runtime log level admission renders (default info).
	LogLevel string `json:"logLevel,omitempty"`
}

// DeployResult is the 202 answer of a deploy: the admitted revision and the
// id of its activate work.
type DeployResult struct {
	state.Revision
	WorkID string `json:"workId"`
}

// ClusterJoin is the body of POST /v1/cluster/join.
type ClusterJoin struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
}

// ClusterMember names a member for POST /v1/cluster/remove and
// /v1/cluster/transfer (an empty id lets Raft pick the transfer target).
type ClusterMember struct {
	ID string `json:"id"`
}

// Installation is the answer of GET /v1/installation (seed 001).
type Installation struct {
	Capabilities             Capabilities `json:"capabilities"`
	SandboxDriverUnavailable bool         `json:"sandboxDriverUnavailable,omitempty"`
	Compute                  *Compute     `json:"compute,omitempty"`
}

// Capabilities lists what Agents of this installation can deploy.
type Capabilities struct {
	OpenClaw      OpenClawCapabilities `json:"openclaw"`
	NativeWorkers *NativeWorkers       `json:"nativeWorkers,omitempty"`
}

// OpenClawCapabilities lists the OpenClaw execution modes an Agent can deploy in.
type OpenClawCapabilities struct {
	ExecutionModes []string `json:"executionModes"`
}

// NativeWorkers is present only with a qualifying SandboxDriver.
type NativeWorkers struct {
	Support string `json:"support"`
}

// Compute reports the selected compute driver.
type Compute struct {
	Driver      string   `json:"driver,omitempty"`
	HarnessAuth []string `json:"harnessAuth,omitempty"`
}

// Status is the answer of GET /v1/status: the cluster and an Agent summary.
type Status struct {
	Cluster json.RawMessage `json:"cluster"`
	Agents  []AgentSummary  `json:"agents"`
}

// AgentSummary is one Agent line of occ status.
type AgentSummary struct {
	Namespace        string `json:"namespace"`
	Name             string `json:"name"`
	ID               string `json:"id"`
	ExecutionMode    string `json:"executionMode"`
	ActiveRevisionID string `json:"activeRevisionId,omitempty"`
	RevisionCount    int64  `json:"revisionCount"`
	Deleting         bool   `json:"deleting,omitempty"`
}
