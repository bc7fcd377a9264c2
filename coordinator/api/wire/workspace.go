package wire

import "oce.dev/oce/shared/contract"

// The Agent documents of the workspace files editor (docs/design/seed-003.md).
const (
	DocAgents   = contract.DocAgents
	DocSoul     = contract.DocSoul
	DocIdentity = contract.DocIdentity
	DocUser     = contract.DocUser
	// MaxDocumentBytes bounds one document's content.
	MaxDocumentBytes = contract.MaxDocumentBytes
	// VersionAbsent is the Replaces of a write that creates a document.
	VersionAbsent = contract.VersionAbsent
)

// Closed details.reason values of a refused document write (400
// INVALID_REQUEST) and of a conflicting one (409 RESOURCE_CONFLICT).
const (
	ReasonDocumentName      = contract.ReasonDocumentName
	ReasonDocumentPath      = contract.ReasonDocumentPath
	ReasonDocumentTooLarge  = contract.ReasonDocumentTooLarge
	ReasonDocumentNotUTF8   = contract.ReasonDocumentNotUTF8
	ReasonVersionRequired   = contract.ReasonVersionRequired
	ReasonWorkspaceConflict = "WORKSPACE_CONFLICT"
)

// WorkspaceDocuments lists the four documents in editor order.
func WorkspaceDocuments() []string { return contract.WorkspaceDocuments() }

// WorkspaceFile is one Agent document as the Agent's workspace holds it
// now (GET …/files/{name}; lists and write answers carry no Content).
// SHA256 is the version a write names in Replaces.
type WorkspaceFile struct {
	Name        string `json:"name"`
	Missing     bool   `json:"missing,omitempty"`
	Size        int64  `json:"size"`
	UpdatedAtMs int64  `json:"updatedAtMs,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	Content     string `json:"content,omitempty"`
	// RevisionID is the revision whose Gateway served the answer.
	RevisionID string `json:"revisionId,omitempty"`
}

// WorkspaceFiles is the answer of GET …/agents/{agent}/files.
type WorkspaceFiles struct {
	RevisionID string          `json:"revisionId"`
	Files      []WorkspaceFile `json:"files"`
}

// PutWorkspaceFile is the body of PUT …/agents/{agent}/files/{name}.
// Replaces is the SHA256 of the version the write replaces (VersionAbsent
// for a new document); a different current version is 409
// RESOURCE_CONFLICT with details.reason WORKSPACE_CONFLICT and
// details.current. Force makes the write last-write-wins.
type PutWorkspaceFile struct {
	Content  string `json:"content"`
	Replaces string `json:"replaces,omitempty"`
	Force    bool   `json:"force,omitempty"`
}
