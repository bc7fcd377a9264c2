package appserver

import (
	"encoding/json"
)

// Server→client request methods (codex app-server 0.169.0 ServerRequest).
const (
	MethodCommandApproval     = "item/commandExecution/requestApproval"
	MethodFileChangeApproval  = "item/fileChange/requestApproval"
	MethodLegacyExecApproval  = "execCommandApproval"
	MethodLegacyPatchApproval = "applyPatchApproval"
)

// CodeMethodNotFound answers server requests this client does not serve
// (user input, dynamic tools, token refresh, …), so the server never waits.
const CodeMethodNotFound = -32601

type approvalParams struct {
	ThreadID       string          `json:"threadId"`
	TurnID         string          `json:"turnId"`
	ItemID         string          `json:"itemId"`
	Command        json.RawMessage `json:"command"`
	ConversationID string          `json:"conversationId"`
	CallID         string          `json:"callId"`
}

// serveRequest answers one server request by its method; it runs on its own
// goroutine so a slow policy never stalls the read loop.
func (c *Client) serveRequest(m *message) {
	resp := map[string]any{"id": m.ID}
	switch m.Method {
	case MethodCommandApproval, MethodFileChangeApproval, MethodLegacyExecApproval, MethodLegacyPatchApproval:
		var p approvalParams
		_ = json.Unmarshal(m.Params, &p)
		req := ApprovalRequest{Method: m.Method, ThreadID: p.ThreadID, TurnID: p.TurnID, ItemID: p.ItemID,
			Command: commandText(p.Command), Params: m.Params}
		if req.ThreadID == "" {
			req.ThreadID = p.ConversationID
		}
		if req.ItemID == "" {
			req.ItemID = p.CallID
		}
		d := c.opts.policy(c.ctx, req)
		resp["result"] = map[string]any{"decision": wireDecision(m.Method, d)}
	default:
		resp["error"] = RPCError{Code: CodeMethodNotFound, Message: "not supported by this client: " + m.Method}
	}
	_ = c.write(c.ctx, resp)
}

// wireDecision maps a Decision to the method's enum: v2 approvals take
// accept/decline/cancel, the v1 ones approved/denied/abort. Anything unknown
// declines.
func wireDecision(method string, d Decision) string {
	legacy := method == MethodLegacyExecApproval || method == MethodLegacyPatchApproval
	switch {
	case d == Accept && legacy:
		return "approved"
	case d == Accept:
		return "accept"
	case d == Cancel && legacy:
		return "abort"
	case d == Cancel:
		return "cancel"
	case legacy:
		return "denied"
	}
	return "decline"
}

// commandText renders a command given as a string or an argv array.
func commandText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		out := ""
		for i, a := range argv {
			if i > 0 {
				out += " "
			}
			out += a
		}
		return out
	}
	return ""
}
