package wire

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

// Cluster is the answer of GET /v1/cluster (and of the cluster writes), as
// seen by the answering node.
type Cluster struct {
	NodeID      string   `json:"nodeId"`
	State       string   `json:"state"` // Leader, Follower, Candidate
	LeaderID    string   `json:"leaderId,omitempty"`
	LeaderHTTP  string   `json:"leaderHttp,omitempty"`
	Term        uint64   `json:"term"`
	LastIndex   uint64   `json:"lastIndex"`
	CommitIndex uint64   `json:"commitIndex"`
	Members     []Member `json:"members"`
	// LastApplied is the index of the last entry applied to the answering
	// node's state and Digest the state's digest at exactly that index: two
	// nodes with equal LastApplied report equal Digests.
	LastApplied uint64 `json:"lastApplied"`
	Digest      string `json:"digest"`
	// Quiescent: the answering node leads and its activation engine writes
	// nothing more until a request is applied or an observation changes
	// (no open work, no owed finalization, a whole health round over the
	// current state). Digests compared once the leader is quiescent and
	// every member has applied as far compare settled states.
	Quiescent bool `json:"quiescent,omitempty"`
}

// Member is one Raft server of the cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr,omitempty"`
	Suffrage string `json:"suffrage"` // voter | nonvoter | staging
	Leader   bool   `json:"leader"`
}

// Installation is the answer of GET /v1/installation (docs/design/seed-001.md).
type Installation struct {
	Capabilities             Capabilities `json:"capabilities"`
	SandboxDriverUnavailable bool         `json:"sandboxDriverUnavailable,omitempty"`
	Compute                  *Compute     `json:"compute,omitempty"`
}

// Capabilities lists what Agents of this installation can deploy.
type Capabilities struct {
	OpenClaw      OpenClawCapabilities `json:"openclaw"`
	NativeWorkers *NativeWorkers       `json:"nativeWorkers,omitempty"`
	// Runtimes lists every (harness, execution mode) an Agent can deploy
	// in here — dedicated Codex included — in a fixed order: embedded
	// OpenClaw, dedicated Codex, dedicated OpenClaw.
	Runtimes []RuntimeCapability `json:"runtimes"`
}

// RuntimeCapability is one runtime an Agent can deploy in: a harness, an
// execution mode, and the harnessAuth methods the compute driver delivers
// for it (absent without a driver: admission's own rules apply).
type RuntimeCapability struct {
	Harness     string   `json:"harness"`
	Mode        string   `json:"mode"`
	HarnessAuth []string `json:"harnessAuth,omitempty"`
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
	// Cluster is present for callers who may view the cluster.
	Cluster *Cluster       `json:"cluster,omitempty"`
	Agents  []AgentSummary `json:"agents"`
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
	// State and Reason are the Agent's observed state (wire/truth.go).
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// ActiveRevision is the active revision's number (0: none).
	ActiveRevision int64 `json:"activeRevision,omitempty"`
}

// Endpoints is the answer of GET …/agents/{agent}/endpoints: where the
// Agent's stable Gateway can be reached, as the compute driver reports it.
type Endpoints struct {
	AgentID    string `json:"agentId"`
	RevisionID string `json:"revisionId,omitempty"` // the revision the endpoint routes to
	// Gateway is the Gateway's stable URL (ws:// or http://) inside the
	// compute target (a Service DNS name on Kubernetes).
	Gateway string `json:"gateway,omitempty"`
	// Socket is a Unix socket on the coordinator's host that forwards to
	// the Gateway (the local driver), for clients on the same machine.
	Socket string `json:"socket,omitempty"`
	// PasswordFile is the file (mode 0600) holding the Agent's gateway
	// password on the coordinator's host (the local driver); the API never
	// returns the password itself.
	PasswordFile string `json:"passwordFile,omitempty"`
}

// Version is the answer of GET /v1/version: what the answering coordinator
// was built from and the native runtime versions it supervises.
type Version struct {
	Version   string   `json:"version"`
	Commit    string   `json:"commit,omitempty"`
	Modified  bool     `json:"modified,omitempty"`
	GoVersion string   `json:"goVersion"`
	Runtimes  Runtimes `json:"runtimes"`
}

// Runtimes are pinned native runtime versions.
type Runtimes struct {
	Node     string `json:"node"`
	OpenClaw string `json:"openclaw"`
	Codex    string `json:"codex"`
}
