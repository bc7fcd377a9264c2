package codes

// Codes of the coordinator API's error envelope (docs/API.md). Each has one
// HTTP status; the client branches on the code, never on the message.
const (
	InvalidRequest   Code = "INVALID_REQUEST"   // 400, also 413 for an oversized body
	Unauthorized     Code = "UNAUTHORIZED"      // 401
	Forbidden        Code = "FORBIDDEN"         // 403: authenticated, not authorized (details: action, resource)
	NotFound         Code = "NOT_FOUND"         // 404
	ResourceConflict Code = "RESOURCE_CONFLICT" // 409
	NotLeader        Code = "NOT_LEADER"        // 421 (leader known) or 503 (no leader)
	NotReady         Code = "NOT_READY"         // 503: /readyz, or a read this member cannot serve yet
	Internal         Code = "INTERNAL"          // 500
	// RateLimited (429): the caller (principal or source address) exceeded
	// its request rate; Retry-After says when to try again.
	RateLimited Code = "RATE_LIMITED"
	// WorkspaceUnavailable (503): the Agent's Gateway or its workspace node
	// cannot serve the workspace documents now; nothing stale is shown.
	WorkspaceUnavailable Code = "WORKSPACE_UNAVAILABLE"

	// OutcomeUnknown (503): a write may or may not have taken effect (the
	// leader was asked but its answer was lost, or leadership changed after
	// the entry reached the log). Retrying with the same Idempotency-Key is
	// safe; without one, check the state first.
	OutcomeUnknown Code = "OUTCOME_UNKNOWN"
	// QuotaExceeded (409): a deploy would take its Namespace past its quota
	// (details: quota, limit, used, requested); nothing was created.
	QuotaExceeded Code = "QUOTA_EXCEEDED"
	// IdempotencyKeyReused (422): the Idempotency-Key was used before for a
	// different request (method, path or body); nothing was applied.
	IdempotencyKeyReused Code = "IDEMPOTENCY_KEY_REUSED"
)

// WorkspaceConflict is details.reason of the 409 RESOURCE_CONFLICT a
// workspace document write gets when the document is no longer the version
// it names (details.current carries the current one).
const WorkspaceConflict Code = "WORKSPACE_CONFLICT"

// Reasons an INVALID_REQUEST of cluster administration carries in
// details.reason.
const (
	InvalidBackup Code = "INVALID_BACKUP" // a restore stream is not a backup of this store
	InvalidMember Code = "INVALID_MEMBER" // a join/remove/transfer names no valid member
	// InvalidLabels: a request's labels are malformed or too many (at
	// most 32; Kubernetes label syntax); nothing was stored.
	InvalidLabels Code = "INVALID_LABELS"
	// InvalidLabelSelector: a list's labelSelector is malformed.
	InvalidLabelSelector Code = "INVALID_LABEL_SELECTOR"
)

var api = set(InvalidRequest, Unauthorized, Forbidden, NotFound, ResourceConflict, NotLeader, NotReady, Internal,
	WorkspaceUnavailable, OutcomeUnknown, IdempotencyKeyReused, QuotaExceeded)

// IsAPI reports whether c is an API error code.
func IsAPI(c Code) bool { return api[c] }
