package admission

import (
	"errors"
	"fmt"

	"oce.dev/oce/shared/codes"
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
	Code    codes.Code
	Message string
	Details map[string]any
}

// Error implements error.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is matches the sentinel for e.Code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case codes.InvalidRequest:
		return target == ErrInvalidRequest
	case codes.NotFound:
		return target == ErrNotFound
	case codes.ResourceConflict:
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
func ValidCode(code codes.Code) bool {
	return code == codes.InvalidRequest || code == codes.NotFound || code == codes.ResourceConflict
}

// The HTTP statuses of refusals (the seeds' 400/404/409 rules), as numbers:
// admission decides, the API speaks HTTP, and the deploy decision
// (coordinator/policy) links no HTTP package.
const (
	statusBadRequest = 400
	statusNotFound   = 404
	statusConflict   = 409
)

func newError(status int, code codes.Code, rule, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...), Details: map[string]any{"rule": rule}}
}

func invalid(rule, format string, args ...any) *Error {
	return newError(statusBadRequest, codes.InvalidRequest, rule, format, args...)
}

func conflict(rule, format string, args ...any) *Error {
	return newError(statusConflict, codes.ResourceConflict, rule, format, args...)
}

func notFound(rule, format string, args ...any) *Error {
	return newError(statusNotFound, codes.NotFound, rule, format, args...)
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
