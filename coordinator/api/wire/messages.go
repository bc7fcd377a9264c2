package wire

import "oce.dev/oce/shared/codes"

// MessageRequest is the body of POST …/agents/{agent}/messages: one turn
// the coordinator relays to the Agent's active Gateway (OpenClaw operator
// protocol, chat.send).
type MessageRequest struct {
	// Session is the gateway session key; empty means "main".
	Session string `json:"session,omitempty"`
	Message string `json:"message"`
}

// MessageEvent is one line of the answer to POST …/messages
// (application/x-ndjson): the reply text as it streams, then exactly one
// last event — Done with the whole Reply, or Error — naming the revision
// whose Gateway answered.
type MessageEvent struct {
	RevisionID string       `json:"revisionId,omitempty"`
	Delta      string       `json:"delta,omitempty"`
	Done       bool         `json:"done,omitempty"`
	Reply      string       `json:"reply,omitempty"`
	Error      *ErrorDetail `json:"error,omitempty"`
}

// Codes of a MessageEvent's Error (the turn's own closed set; a request
// refused before the stream starts gets the API envelope instead).
const (
	// MessageUnavailable: the Gateway (or its supervisor) did not accept
	// the turn in time (still starting, or not running).
	MessageUnavailable = codes.Unavailable
	// MessageDisconnected: the connection ended before the turn did.
	MessageDisconnected = codes.Disconnected
	// MessageTurnFailed: the Gateway ended the turn with an error or abort.
	MessageTurnFailed codes.Code = "TURN_FAILED"
)
