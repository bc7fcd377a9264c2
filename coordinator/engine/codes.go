package engine

// Codes the engine records on work and revisions (REFERENCE §6.2–6.3), in
// addition to codes.RevisionFailure for held runtime failures and the codes
// drivers return through compute.Error.
const (
	CodeInvalidTarget             = "INVALID_TARGET"
	CodeInvalidRevisionOwner      = "INVALID_REVISION_OWNER"
	CodeNamespaceNotReady         = "NAMESPACE_NOT_READY"
	CodeInvalidAdmittedRevision   = "INVALID_ADMITTED_REVISION"
	CodeHarnessDescriptorMismatch = "HARNESS_DESCRIPTOR_MISMATCH"
	CodeComputeDriverMismatch     = "COMPUTE_DRIVER_MISMATCH"
	CodeInvalidActiveRevision     = "INVALID_ACTIVE_REVISION"
	CodeHarnessAuthUnsupported    = "HARNESS_AUTH_UNSUPPORTED"
	CodeActiveRevisionChanged     = "ACTIVE_REVISION_CHANGED"
	CodeFinalizationIncomplete    = "REVISION_FINALIZATION_INCOMPLETE"
	CodeTransientDependency       = "TRANSIENT_DEPENDENCY"
	CodeActivationPending         = "ACTIVATION_PENDING"
	CodeRevisionNotReady          = "REVISION_NOT_READY"
)
