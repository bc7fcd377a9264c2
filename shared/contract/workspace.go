package contract

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The Agent documents of the workspace files editor (docs/design/seed-003.md): the four
// documents OCC reads and writes through the Agent's Gateway, and nothing
// else of the workspace.
const (
	DocAgents   = "AGENTS.md"
	DocSoul     = "SOUL.md"
	DocIdentity = "IDENTITY.md"
	DocUser     = "USER.md"
)

// WorkspaceDocuments lists the four documents in the order the editor shows
// them (OpenClaw's prompt order).
func WorkspaceDocuments() []string { return []string{DocAgents, DocSoul, DocIdentity, DocUser} }

// IsWorkspaceDocument reports whether name is exactly one of the four.
func IsWorkspaceDocument(name string) bool {
	switch name {
	case DocAgents, DocSoul, DocIdentity, DocUser:
		return true
	}
	return false
}

// MaxDocumentBytes bounds one Agent document. An Agent document is prompt
// text: OpenClaw truncates each bootstrap file in the prompt far below
// this, and its own write bound (2 MiB) and every body limit on the path
// (API, status routes) are above it, so anything accepted here reaches the
// workspace whole.
const MaxDocumentBytes = 512 << 10

// VersionAbsent is the version a write names when it replaces a document
// that does not exist yet.
const VersionAbsent = "absent"

// Workspace routes on a Gateway's status server (bearer SecretStatusToken),
// which the coordinator calls for the Agent's serving Gateway: embedded,
// gatewayd uses the gateway's own Agent workspace (agents.files.*);
// dedicated, the enrolled workspace node's file commands (node.invoke
// file.*) through the gateway, so the node's path policy and bindings stay
// authoritative.
const (
	// RouteWorkspaceFiles (GET) lists the four documents: WorkspaceFiles.
	RouteWorkspaceFiles = "/oce/v1/workspace/files"
	// RouteWorkspaceFile (GET, PUT; {name} one of the four) reads a
	// document (WorkspaceFile with Content) or writes one
	// (WorkspaceWrite → WorkspaceFile without Content).
	RouteWorkspaceFile = RouteWorkspaceFiles + "/{name}"
)

// WorkspaceFileRoute is RouteWorkspaceFile for name.
func WorkspaceFileRoute(name string) string { return RouteWorkspaceFiles + "/" + name }

// WorkspaceFile is one document as the workspace holds it. SHA256 (hex) is
// the version a later write names; a missing document has none.
type WorkspaceFile struct {
	Name        string `json:"name"`
	Missing     bool   `json:"missing,omitempty"`
	Size        int64  `json:"size"`
	UpdatedAtMs int64  `json:"updatedAtMs,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	Content     string `json:"content,omitempty"`
}

// WorkspaceFiles is the answer of RouteWorkspaceFiles.
type WorkspaceFiles struct {
	Files []WorkspaceFile `json:"files"`
}

// WorkspaceWrite is the body of a PUT of RouteWorkspaceFile. Replaces is
// the SHA256 of the version the write replaces (VersionAbsent for a new
// document); a different current version is a conflict. Force writes
// whatever is there (last write wins) and ignores Replaces.
type WorkspaceWrite struct {
	Content  string `json:"content"`
	Replaces string `json:"replaces,omitempty"`
	Force    bool   `json:"force,omitempty"`
}

// WorkspaceError is the body of a failed workspace route: a closed code
// (codes.Workspace*, INVALID_REQUEST, UNAVAILABLE) and, for a conflict, the
// current version.
type WorkspaceError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	Current string `json:"current,omitempty"`
}

// DocumentProblem reports why name and content cannot be a workspace
// document write, as a closed reason ("" when they can): a name outside the
// four (with or without a path separator), oversized or non-UTF-8 content.
func DocumentProblem(name string, content []byte) (reason, message string) {
	if p := DocumentNameProblem(name); p != "" {
		return p, "document must be one of " + strings.Join(WorkspaceDocuments(), ", ")
	}
	if len(content) > MaxDocumentBytes {
		return ReasonDocumentTooLarge, fmt.Sprintf("document is larger than the %d KiB limit", MaxDocumentBytes>>10)
	}
	if !utf8.Valid(content) {
		return ReasonDocumentNotUTF8, "document is not valid UTF-8 text"
	}
	if strings.ContainsRune(string(content), 0) {
		return ReasonDocumentNotUTF8, "document contains a NUL byte"
	}
	return "", ""
}

// DocumentNameProblem is the closed reason a name is not one of the four.
func DocumentNameProblem(name string) string {
	switch {
	case IsWorkspaceDocument(name):
		return ""
	case strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") || strings.ContainsRune(name, 0):
		return ReasonDocumentPath
	}
	return ReasonDocumentName
}

// Closed reasons of a refused document write (details.reason of the API's
// INVALID_REQUEST, code of a WorkspaceError).
const (
	ReasonDocumentName     = "DOCUMENT_NAME_INVALID" // not one of the four
	ReasonDocumentPath     = "DOCUMENT_PATH_INVALID" // a path (separators, "..") instead of a name
	ReasonDocumentTooLarge = "DOCUMENT_TOO_LARGE"    // over MaxDocumentBytes
	ReasonDocumentNotUTF8  = "DOCUMENT_NOT_UTF8"     // not UTF-8 text
	ReasonVersionRequired  = "VERSION_REQUIRED"      // neither replaces nor force
)
