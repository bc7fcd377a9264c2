package appserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// message is one JSON-RPC frame of the app-server protocol: JSON-RPC 2.0
// without the "jsonrpc" field (docs/design/codex.md#s6). Which fields are present decides
// the kind: id+method is a server request, method alone a notification, id
// with result or error a response.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

type kind int

const (
	kindInvalid kind = iota
	kindResponse
	kindRequest
	kindNotification
)

func (m *message) kind() kind {
	hasID := len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
	switch {
	case m.Method != "" && hasID:
		return kindRequest
	case m.Method != "":
		return kindNotification
	case hasID && (m.Result != nil || m.Error != nil):
		return kindResponse
	}
	return kindInvalid
}

// idKey normalizes an id (number or string) into a map key: the server may
// answer 7 or "7" for our 7, and its own request ids are a separate sequence.
func idKey(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	switch t := v.(type) {
	case json.Number:
		return "n:" + t.String()
	case string:
		return "n:" + t
	}
	return string(raw)
}

// RPCError is a JSON-RPC error object (the app-server uses code -32600 for
// "Not initialized", unknown methods and bad enums).
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// ErrRPC matches every *RPCError with errors.Is.
var ErrRPC = errors.New("appserver: request failed")

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("appserver: rpc error %d: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRPC) hold for any RPC error.
func (e *RPCError) Is(target error) bool { return target == ErrRPC }

// Notification is a server notification the client did not consume itself.
type Notification struct {
	Method string
	Params json.RawMessage
}

// scope is the thread/turn a notification belongs to (most carry threadId
// and turnId at the top of params; turn/* carry the turn under params.turn).
type scope struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	Turn     *struct {
		ID string `json:"id"`
	} `json:"turn"`
}

func scopeOf(params json.RawMessage) (thread, turn string) {
	var s scope
	if len(params) == 0 || json.Unmarshal(params, &s) != nil {
		return "", ""
	}
	turn = s.TurnID
	if turn == "" && s.Turn != nil {
		turn = s.Turn.ID
	}
	return s.ThreadID, turn
}
