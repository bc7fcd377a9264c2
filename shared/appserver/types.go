package appserver

import (
	"context"
	"encoding/json"
)

// Turn statuses of turn/completed (docs/design/codex.md#s6).
const (
	StatusCompleted   = "completed"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
	StatusInProgress  = "inProgress"
)

// Sandbox modes thread/start accepts (kebab-case, docs/design/codex.md#s6).
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
	SandboxFullAccess     = "danger-full-access"
)

// Approval policies thread/start accepts.
const (
	ApprovalUntrusted = "untrusted"
	ApprovalOnRequest = "on-request"
	ApprovalNever     = "never"
)

// Methods the client sends or consumes.
const (
	MethodInitialize     = "initialize"
	MethodInitialized    = "initialized"
	MethodThreadStart    = "thread/start"
	MethodTurnStart      = "turn/start"
	MethodTurnInterrupt  = "turn/interrupt"
	MethodTurnStarted    = "turn/started"
	MethodTurnCompleted  = "turn/completed"
	MethodItemStarted    = "item/started"
	MethodItemCompleted  = "item/completed"
	MethodAgentDelta     = "item/agentMessage/delta"
	MethodCommandDelta   = "item/commandExecution/outputDelta"
	MethodError          = "error"
	MethodPluginList     = "plugin/list"
	MethodPluginRead     = "plugin/read"
	MethodPluginInstall  = "plugin/install"
	MethodServerResolved = "serverRequest/resolved"
)

// ClientInfo names the client in initialize (it becomes the originator
// header Codex sends to the model provider).
type ClientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeResult is the answer to initialize.
type InitializeResult struct {
	UserAgent      string `json:"userAgent"`
	CodexHome      string `json:"codexHome"`
	PlatformFamily string `json:"platformFamily"`
	PlatformOS     string `json:"platformOs"`
}

// ThreadOptions are the thread/start parameters oce uses; empty fields are
// omitted so the server's configuration applies.
type ThreadOptions struct {
	Cwd            string `json:"cwd,omitempty"`
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	Sandbox        string `json:"sandbox,omitempty"`
	Model          string `json:"model,omitempty"`
	Ephemeral      bool   `json:"ephemeral,omitempty"`
}

// Thread is the thread part of the thread/start answer.
type Thread struct {
	ID            string `json:"id"`
	ModelProvider string `json:"modelProvider"`
	Model         string `json:"model"`
	Ephemeral     bool   `json:"ephemeral"`
}

// Item is one turn item (userMessage, agentMessage, commandExecution, …);
// Raw keeps every field for callers that need more.
type Item struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Text     string          `json:"text,omitempty"`
	Command  string          `json:"command,omitempty"`
	Status   string          `json:"status,omitempty"`
	ExitCode *int            `json:"exitCode,omitempty"`
	Output   string          `json:"aggregatedOutput,omitempty"`
	Raw      json.RawMessage `json:"-"`
}

// TurnError is turn.error of a failed turn.
type TurnError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo,omitempty"`
	AdditionalDetails *string         `json:"additionalDetails,omitempty"`
}

// Kind returns codexErrorInfo's variant: the string itself
// ("internalServerError", "other", …) or the single key of an object
// ("httpConnectionFailed", …); "" when absent.
func (e *TurnError) Kind() string {
	if e == nil || len(e.CodexErrorInfo) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(e.CodexErrorInfo, &s) == nil {
		return s
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(e.CodexErrorInfo, &m) == nil {
		for k := range m {
			return k
		}
	}
	return ""
}

// HTTPStatus returns the httpStatusCode inside an object-valued
// codexErrorInfo (401 → {"httpConnectionFailed":{"httpStatusCode":401}}),
// or 0.
func (e *TurnError) HTTPStatus() int {
	if e == nil {
		return 0
	}
	var m map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &m) != nil {
		return 0
	}
	for _, v := range m {
		if v.HTTPStatusCode != nil {
			return *v.HTTPStatusCode
		}
	}
	return 0
}

// Turn is a turn as turn/start answers and turn/completed reports it.
type Turn struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	Error      *TurnError `json:"error"`
	DurationMs *int64     `json:"durationMs,omitempty"`
}

// TurnResult is how a turn ended.
type TurnResult struct {
	ThreadID string
	TurnID   string
	// Status is completed, interrupted or failed. A turn whose connection
	// closed before turn/completed (the app-server stopped: SIGTERM sends no
	// turn/completed, docs/design/codex.md#s6) is interrupted, never completed.
	Status string
	// Error is turn.error of a failed turn.
	Error *TurnError
	// Text is the final agent message (the last completed agentMessage item,
	// else the concatenated deltas).
	Text string
	// Items are the items completed during the turn, in arrival order.
	Items []Item
	// Disconnected reports a turn cut off by the connection closing.
	Disconnected bool
}

// ApprovalRequest is a server→client request asking to approve a command,
// a file change or a permission grant.
type ApprovalRequest struct {
	Method   string
	ThreadID string
	TurnID   string
	ItemID   string
	Command  string
	Params   json.RawMessage
}

// Decision answers an approval request.
type Decision string

// Decisions. The v1 methods (execCommandApproval, applyPatchApproval) get
// them mapped to approved / denied / abort.
const (
	Accept  Decision = "accept"
	Decline Decision = "decline"
	Cancel  Decision = "cancel"
)

// ApprovalPolicy decides approval requests. It runs on its own goroutine
// and may block until ctx (the connection's lifetime) ends.
type ApprovalPolicy func(ctx context.Context, req ApprovalRequest) Decision

// DeclineAll is the default policy: nothing runs without an explicit policy.
func DeclineAll(context.Context, ApprovalRequest) Decision { return Decline }

// AcceptAll approves everything (tests, trusted sandboxes).
func AcceptAll(context.Context, ApprovalRequest) Decision { return Accept }
