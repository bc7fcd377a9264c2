package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Error is an API error: an HTTP status, a closed-set code, a message and
// optional details. Handlers return it; writeError renders the envelope.
type Error struct {
	Status  int
	Code    codes.Code
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func invalid(format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: codes.InvalidRequest, Message: fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: codes.NotFound, Message: fmt.Sprintf(format, a...)}
}

func conflict(format string, a ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: codes.ResourceConflict, Message: fmt.Sprintf(format, a...)}
}

// NotLeader is what a Backend's Propose error (or anything it wraps) offers
// when this node is not the Raft leader; store.NotLeaderError implements it.
type NotLeader interface {
	LeaderHTTPAddr() string
}

func notLeader(leader string) *Error {
	if leader == "" {
		return &Error{Status: http.StatusServiceUnavailable, Code: codes.NotLeader,
			Message: "no leader is known; retry later"}
	}
	return &Error{Status: http.StatusMisdirectedRequest, Code: codes.NotLeader,
		Message: "this node is not the leader", Details: map[string]any{"leader": leader}}
}

// outcomeUnknown answers a write that may or may not have taken effect.
func outcomeUnknown(why string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: codes.OutcomeUnknown,
		Message: why + "; retry with the same " + IdempotencyKeyHeader + ", or check the state before retrying without one",
		Details: map[string]any{"outcomeUnknown": true}}
}

// toError maps any error a handler meets onto the closed set.
func toError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var adm *admission.Error
	if errors.As(err, &adm) {
		e := &Error{Status: adm.Status, Code: adm.Code, Message: adm.Message}
		if len(adm.Details) > 0 {
			e.Details = map[string]any{}
			for k, v := range adm.Details {
				e.Details[k] = v
			}
		}
		if e.Status == 0 {
			e.Status = http.StatusBadRequest
		}
		return e
	}
	// A proposal whose fate is unknown (leadership lost after hand-off, or a
	// timeout) must not be replayed blindly: only with its Idempotency-Key.
	if strings.Contains(err.Error(), "outcome unknown") {
		return outcomeUnknown("the request reached the log but its outcome is unknown (leadership changed or it timed out)")
	}
	if errors.Is(err, state.ErrIdempotencyMismatch) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: codes.IdempotencyKeyReused,
			Message: err.Error() + "; nothing was applied"}
	}
	var nl NotLeader
	if errors.As(err, &nl) {
		return notLeader(nl.LeaderHTTPAddr())
	}
	// Store refusals carry their closed code in the message (the API does
	// not import the store); they are the caller's mistake.
	for _, c := range []codes.Code{codes.InvalidBackup, codes.InvalidMember} {
		if strings.Contains(err.Error(), string(c)) {
			return &Error{Status: http.StatusBadRequest, Code: codes.InvalidRequest, Message: err.Error(),
				Details: map[string]any{"reason": c}}
		}
	}
	switch {
	case errors.Is(err, state.ErrLabels):
		return invalidLabels(err)
	case errors.Is(err, state.ErrNotFound):
		return notFound("%v", err)
	case errors.Is(err, state.ErrInvalid):
		return invalid("%v", err)
	case errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrActiveRevisionChanged),
		errors.Is(err, state.ErrNotClaimable), errors.Is(err, state.ErrClaimLost):
		return conflict("%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Error{Status: http.StatusServiceUnavailable, Code: codes.Internal, Message: "request timed out"}
	}
	return &Error{Status: http.StatusInternalServerError, Code: codes.Internal, Message: err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	e := toError(err)
	writeJSON(w, e.Status, wire.ErrorBody{Error: wire.ErrorDetail{Code: e.Code, Message: e.Message, Details: e.Details}})
}
