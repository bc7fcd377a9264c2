// Package ocproto speaks the OpenClaw gateway protocol (v4, v3 fallback for
// nodes) as a client: closed req/res/event frames, the connect.challenge →
// connect → hello-ok handshake with an Ed25519 device identity, the tick
// watchdog, reconnect backoff, and the operator calls oce needs
// (device.pair.setupCode, node.pair.*, node.list, node.invoke). nodehost,
// gatewayd and occ share it.
package ocproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Frame type names.
const (
	TypeReq   = "req"
	TypeRes   = "res"
	TypeEvent = "event"
)

// Protocol versions.
const (
	ProtocolVersion       = 4
	LegacyProtocolVersion = 3
)

// ErrBadFrame reports a frame that is not a closed req/res/event object.
var ErrBadFrame = errors.New("ocproto: malformed frame")

// Request is a req frame. Both sides send requests.
type Request struct {
	Type              string          `json:"type"`
	ID                string          `json:"id"`
	Method            string          `json:"method"`
	Params            json.RawMessage `json:"params,omitempty"`
	Traceparent       string          `json:"traceparent,omitempty"`
	ExpectedProfileID string          `json:"expectedProfileId,omitempty"`
}

// ErrorShape is the error of a failed res frame.
type ErrorShape struct {
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	Details      json.RawMessage `json:"details,omitempty"`
	Retryable    *bool           `json:"retryable,omitempty"`
	RetryAfterMs *int64          `json:"retryAfterMs,omitempty"`
}

// Response is a res frame answering the request with the same id.
type Response struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *ErrorShape     `json:"error,omitempty"`
}

// Event is an event frame pushed by the gateway.
type Event struct {
	Type               string          `json:"type"`
	Event              string          `json:"event"`
	Payload            json.RawMessage `json:"payload,omitempty"`
	Seq                *int64          `json:"seq,omitempty"`
	StateVersion       json.RawMessage `json:"stateVersion,omitempty"`
	RecipientProfileID string          `json:"recipientProfileId,omitempty"`
}

// Frame is one decoded frame: exactly one of Req, Res, Event is set.
type Frame struct {
	Req   *Request
	Res   *Response
	Event *Event
}

// DecodeFrame decodes a frame strictly: unknown properties, a missing or
// unknown type and trailing data are errors.
func DecodeFrame(b []byte) (Frame, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	var f Frame
	var err error
	switch head.Type {
	case TypeReq:
		f.Req = &Request{}
		err = strictUnmarshal(b, f.Req)
		if err == nil && (f.Req.ID == "" || f.Req.Method == "") {
			err = errors.New("req needs id and method")
		}
	case TypeRes:
		f.Res = &Response{}
		err = strictUnmarshal(b, f.Res)
		if err == nil && f.Res.ID == "" {
			err = errors.New("res needs id")
		}
	case TypeEvent:
		f.Event = &Event{}
		err = strictUnmarshal(b, f.Event)
		if err == nil && f.Event.Event == "" {
			err = errors.New("event needs a name")
		}
	default:
		err = fmt.Errorf("unknown frame type %q", head.Type)
	}
	if err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	return f, nil
}

// strictUnmarshal decodes one JSON value rejecting unknown fields and
// trailing data.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// StrictUnmarshal is strictUnmarshal for command parameter decoders.
func StrictUnmarshal(b []byte, v any) error { return strictUnmarshal(b, v) }
