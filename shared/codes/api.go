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
	NotReady         Code = "NOT_READY"         // 503 from /readyz
	Internal         Code = "INTERNAL"          // 500
	// WorkspaceUnavailable (503): the Agent's Gateway or its workspace node
	// cannot serve the workspace documents now; nothing stale is shown.
	WorkspaceUnavailable Code = "WORKSPACE_UNAVAILABLE"
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
)

var api = set(InvalidRequest, Unauthorized, Forbidden, NotFound, ResourceConflict, NotLeader, NotReady, Internal,
	WorkspaceUnavailable)

// IsAPI reports whether c is an API error code.
func IsAPI(c Code) bool { return api[c] }
