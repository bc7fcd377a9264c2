package compute

import (
	"context"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// CredentialChecker is optionally implemented by a driver that can check a
// revision's model credential from the coordinator, a trusted component,
// before any predecessor is stopped or cut over (issue 14, M14): the same
// request and closed diagnostics as the runtime's upfront check, with 401
// and 403 both rejecting. The engine calls it once per revision.
type CredentialChecker interface {
	CheckCredential(ctx context.Context, rev state.Revision) (CredentialCheck, error)
}

// CredentialCheck is the outcome of a pre-cutover credential check.
type CredentialCheck struct {
	// Outcome is state.CredentialPassed, CredentialRejected or
	// CredentialSkipped (the check does not apply, or the provider could
	// not be reached: the runtime's own startup check decides then).
	Outcome string
	// HeldCode is AUTHENTICATION_FAILED when rejected.
	HeldCode codes.Code
	// Reason is the closed skip reason or HTTP status class.
	Reason string
	// Diagnostics are the closed-set diagnostics of a rejection
	// (providerCode, responseHeaderMarker, bodyShape, providerErrorCode,
	// providerErrorType, status).
	Diagnostics map[string]string
}
