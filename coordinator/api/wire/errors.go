package wire

import "oce.dev/oce/shared/codes"

// ErrorBody is the envelope of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a closed-set code (codes.IsAPI), a human message and
// optional details. A NOT_LEADER error carries details.leader, the leader's
// HTTP address, and details.outcomeUnknown when a write's fate is unknown.
type ErrorDetail struct {
	Code    codes.Code     `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// List is the envelope of every collection response.
type List[T any] struct {
	Items []T `json:"items"`
}
