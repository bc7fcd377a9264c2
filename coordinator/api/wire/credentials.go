package wire

import "time"

// Credential sources of a Namespace (docs/API.md, "Credential sources"):
// the credentials an Agent's harnessAuth.sourceRef names. A source's values
// are written once (created, rotated) and never read back by any route;
// what the API answers is its metadata.

// CredentialValueKey is the key of a value given without one (occ
// credential create reading one value from stdin).
const CredentialValueKey = "value"

// Bounds of a source's values.
const (
	MaxCredentialKeys       = 8
	MaxCredentialValueBytes = 16 << 10
)

// CredentialSource is a credential source's metadata.
type CredentialSource struct {
	ID          string   `json:"id"`
	NamespaceID string   `json:"namespaceId"`
	Name        string   `json:"name"`
	Keys        []string `json:"keys"`
	// Version is 1 at creation and grows by one with each rotation.
	Version int64 `json:"version"`
	// References are how an Agent's harnessAuth.sourceRef names each of
	// its keys (credential:<name> when it holds one key).
	References []string `json:"references"`
	// RegisteredFrom is the location a cluster admin registered it from.
	RegisteredFrom string    `json:"registeredFrom,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	CreatedBy      string    `json:"createdBy,omitempty"`
	RotatedAt      time.Time `json:"rotatedAt,omitzero"`
	RotatedBy      string    `json:"rotatedBy,omitempty"`
}

// CreateCredentialSource is the body of POST
// /v1/namespaces/{ns}/credentials: a name and exactly one of Values (key →
// value) and From (a location the compute driver registers from; cluster
// admins only).
type CreateCredentialSource struct {
	Name   string            `json:"name"`
	Values map[string]string `json:"values,omitempty"`
	From   string            `json:"from,omitempty"`
}

// RotateCredentialSource is the body of POST
// /v1/namespaces/{ns}/credentials/{cred}/rotate: the new values, or the
// location to copy them from again.
type RotateCredentialSource struct {
	Values map[string]string `json:"values,omitempty"`
	From   string            `json:"from,omitempty"`
}
