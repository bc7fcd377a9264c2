package status

import (
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/phase"
)

// FailureOf turns a failed phase's error into the RuntimeFailure to Hold:
// the code, cause and check of a *phase.CodedError in err's chain, else
// UNAVAILABLE; check falls back to the phase name. Component and CheckedAt
// are filled by Hold.
func FailureOf(err error, phaseName string) RuntimeFailure {
	f := RuntimeFailure{Check: phase.CheckOf(err, phaseName), Code: phase.CodeOf(err), Cause: phase.CauseOf(err)}
	if f.Code == "" {
		f.Code = codes.Unavailable
	}
	return f
}
