package admission

import (
	"errors"
	"fmt"
	"net/http"
)

// Closed error codes the API layer maps to HTTP statuses.
const (
	CodeInvalidRequest   = "INVALID_REQUEST"
	CodeNotFound         = "NOT_FOUND"
	CodeResourceConflict = "RESOURCE_CONFLICT"
)

// Sentinels callers branch on with errors.Is; every *Error matches exactly
// the one for its Code.
var (
	ErrInvalidRequest = errors.New("admission: invalid request")
	ErrNotFound       = errors.New("admission: not found")
	ErrConflict       = errors.New("admission: resource conflict")
)

// Error is an admission refusal: an HTTP status, a closed-set code, a message
// safe to show the caller (it names settings and rules, never credential
// values) and optional details. Details always carries "rule", the name of
// the admission rule that refused the request.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches the sentinel for e.Code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeInvalidRequest:
		return target == ErrInvalidRequest
	case CodeNotFound:
		return target == ErrNotFound
	case CodeResourceConflict:
		return target == ErrConflict
	}
	return false
}

// Rule returns the name of the rule that refused the request.
func (e *Error) Rule() string {
	r, _ := e.Details["rule"].(string)
	return r
}

// ValidCode reports whether code belongs to the closed set.
func ValidCode(code string) bool {
	return code == CodeInvalidRequest || code == CodeNotFound || code == CodeResourceConflict
}

func newError(status int, code, rule, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...), Details: map[string]any{"rule": rule}}
}

func invalid(rule, format string, args ...any) *Error {
	return newError(http.StatusBadRequest, CodeInvalidRequest, rule, format, args...)
}

func conflict(rule, format string, args ...any) *Error {
	return newError(http.StatusConflict, CodeResourceConflict, rule, format, args...)
}

func notFound(rule, format string, args ...any) *Error {
	return newError(http.StatusNotFound, CodeNotFound, rule, format, args...)
}

// with adds a detail and returns e.
func (e *Error) with(key string, value any) *Error {
	e.Details[key] = value
	return e
}

// quote bounds and quotes a caller-supplied name (a key or reference, never a
// secret value) for a message.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}
