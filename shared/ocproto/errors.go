package ocproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of a connection.
var (
	ErrClosed        = errors.New("ocproto: connection closed")
	ErrTickTimeout   = errors.New("ocproto: no inbound traffic for two tick intervals")
	ErrFrameTooLarge = errors.New("ocproto: frame exceeds the size limit")
	ErrHandshake     = errors.New("ocproto: handshake failed")
)

// Error is a failed res frame.
type Error struct {
	Method       string
	Code         string
	Message      string
	DetailsCode  string
	Details      map[string]any
	Retryable    bool
	RetryAfterMs int64
}

func (e *Error) Error() string {
	s := fmt.Sprintf("ocproto: %s: %s: %s", e.Method, e.Code, e.Message)
	if e.DetailsCode != "" {
		s += " (" + e.DetailsCode + ")"
	}
	return s
}

// Fatal reports an error that must end a node process so its supervisor
// restarts it: AUTH_* detail codes and CLIENT_VERSION_MISMATCH.
func (e *Error) Fatal() bool {
	return strings.HasPrefix(e.DetailsCode, "AUTH_") || e.DetailsCode == "CLIENT_VERSION_MISMATCH"
}

// ExpectedProtocol returns details.expectedProtocol, or 0.
func (e *Error) ExpectedProtocol() int {
	if v, ok := e.Details["expectedProtocol"].(float64); ok {
		return int(v)
	}
	return 0
}

func newError(method string, s *ErrorShape) *Error {
	e := &Error{Method: method, Code: s.Code, Message: s.Message}
	if s.Retryable != nil {
		e.Retryable = *s.Retryable
	}
	if s.RetryAfterMs != nil {
		e.RetryAfterMs = *s.RetryAfterMs
	}
	if len(s.Details) > 0 {
		_ = json.Unmarshal(s.Details, &e.Details)
		if c, ok := e.Details["code"].(string); ok {
			e.DetailsCode = c
		}
	}
	return e
}

// IsFatal reports whether err carries a fatal connect error.
func IsFatal(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Fatal()
}

// DetailsCode returns the details.code of a protocol error in err, or "".
func DetailsCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.DetailsCode
	}
	return ""
}
