package codes

// Codes the activation engine records on revision work and revisions
// (docs/design/reference.md#s6-2, docs/design/reference.md#s6-3), and the codes compute drivers return through
// compute.Error. A held runtime failure is recorded as RevisionFailure(held)
// instead. The two codes the state machine itself records (LEASE_EXPIRED,
// MAX_ATTEMPTS_EXHAUSTED) live in coordinator/state, which imports only the
// standard library.
const (
	// Revision validation before any effect.
	InvalidTarget             Code = "INVALID_TARGET"
	InvalidRevisionOwner      Code = "INVALID_REVISION_OWNER"
	NamespaceNotReady         Code = "NAMESPACE_NOT_READY"
	InvalidAdmittedRevision   Code = "INVALID_ADMITTED_REVISION"
	HarnessDescriptorMismatch Code = "HARNESS_DESCRIPTOR_MISMATCH"
	ComputeDriverMismatch     Code = "COMPUTE_DRIVER_MISMATCH"
	InvalidActiveRevision     Code = "INVALID_ACTIVE_REVISION"
	HarnessAuthUnsupported    Code = "HARNESS_AUTH_UNSUPPORTED"
	// HarnessAuthRequired: the driver could not resolve the credential the
	// revision's harnessAuth binding names.
	HarnessAuthRequired Code = "HARNESS_AUTH_REQUIRED"
	// ReauthorizationDenied: at claim, before any effect, the work's
	// original actor is no longer allowed to do it (a revoked role, a
	// deleted principal, a Restriction added since admission).
	ReauthorizationDenied Code = "REAUTHORIZATION_DENIED"

	// Progress and retry.
	ActiveRevisionChanged  Code = "ACTIVE_REVISION_CHANGED"
	FinalizationIncomplete Code = "REVISION_FINALIZATION_INCOMPLETE"
	TransientDependency    Code = "TRANSIENT_DEPENDENCY"
	ActivationPending      Code = "ACTIVATION_PENDING"
	RevisionNotReady       Code = "REVISION_NOT_READY"

	// Driver refusals.
	ForeignWorkload   Code = "FOREIGN_WORKLOAD"    // an object exists with another owner
	NamespaceNotEmpty Code = "NAMESPACE_NOT_EMPTY" // a Namespace still holds Agent resources
	StopTimeout       Code = "STOP_TIMEOUT"        // runtimes outlived the stop budget
)

var work = set(InvalidTarget, InvalidRevisionOwner, NamespaceNotReady, InvalidAdmittedRevision,
	HarnessDescriptorMismatch, ComputeDriverMismatch, InvalidActiveRevision, HarnessAuthUnsupported,
	HarnessAuthRequired, ReauthorizationDenied, ActiveRevisionChanged, FinalizationIncomplete, TransientDependency, ActivationPending,
	RevisionNotReady, ForeignWorkload, NamespaceNotEmpty, StopTimeout,
	RevisionAuthenticationFailed, RevisionCPUStarved, RevisionModelProbeTimeout, RevisionModelProbeFailed,
	RevisionLoginFailed, RevisionStartupFailed, CrossNamespaceReference, CredentialSourceNotFound)

// IsWork reports whether c is a code the engine or a driver records on work.
func IsWork(c Code) bool { return work[c] }
