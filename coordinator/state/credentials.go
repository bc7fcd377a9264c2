package state

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Credential sources (issue 22): the credentials an Agent's
// harnessAuth.sourceRef may name belong to its oce Namespace. The state
// holds only what describes a source — its name, the names of its keys, its
// version and who created and rotated it when — never a value: the API's
// leader writes the value through the compute driver (a Kubernetes Secret in
// the Namespace's own Kubernetes namespace, a 0600 file of the local
// driver), then commits the metadata (docs/credentials.md).

// CredentialSource is the metadata of one credential source of a Namespace.
type CredentialSource struct {
	ID          string `json:"id"`
	NamespaceID string `json:"namespaceId"`
	Name        string `json:"name"`
	// Keys are the names of the values the source holds, sorted.
	Keys []string `json:"keys"`
	// Version counts the values written: 1 at creation, +1 per rotation.
	Version int64 `json:"version"`
	// RegisteredFrom is the location a cluster admin registered the source
	// from (its value was copied from there); empty for a source created
	// with its value through the API.
	RegisteredFrom string    `json:"registeredFrom,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	CreatedBy      string    `json:"createdBy,omitempty"`
	RotatedAt      time.Time `json:"rotatedAt,omitzero"`
	RotatedBy      string    `json:"rotatedBy,omitempty"`
}

// CreateCredentialSource records a source whose value version 1 the API
// has written through the compute driver.
type CreateCredentialSource struct {
	ID             string   `json:"id"`
	NamespaceID    string   `json:"namespaceId"`
	Name           string   `json:"name"`
	Keys           []string `json:"keys"`
	RegisteredFrom string   `json:"registeredFrom,omitempty"`
}

// RotateCredentialSource records that the API has written Version (the
// source's current version + 1) of the source's value.
type RotateCredentialSource struct {
	ID             string   `json:"id"`
	Version        int64    `json:"version"`
	Keys           []string `json:"keys"`
	RegisteredFrom string   `json:"registeredFrom,omitempty"`
}

// WithdrawCredentialSource removes a source's metadata.
type WithdrawCredentialSource struct {
	ID string `json:"id"`
}

// Audit actions of credential sources.
const (
	AuditCredentialCreate   = "oce.credentials.create"
	AuditCredentialRegister = "oce.credentials.register"
	AuditCredentialRotate   = "oce.credentials.rotate"
	AuditCredentialWithdraw = "oce.credentials.withdraw"
)

// Bounds of credential sources.
const (
	MaxCredentialKeys     = 8
	MaxCredentialLocation = 512
)

// credentialKey is a Kubernetes Secret data key.
var credentialKey = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)

// ValidCredentialKeys checks the key names of a source's value: 1 to
// MaxCredentialKeys distinct keys of Secret data key syntax, sorted.
func ValidCredentialKeys(keys []string) error {
	if len(keys) == 0 || len(keys) > MaxCredentialKeys {
		return fmt.Errorf("%w: a credential source holds 1 to %d keys", ErrInvalid, MaxCredentialKeys)
	}
	for i, k := range keys {
		if !credentialKey.MatchString(k) || k == "." || k == ".." {
			return fmt.Errorf("%w: credential key %q", ErrInvalid, k)
		}
		if i > 0 && keys[i-1] >= k {
			return fmt.Errorf("%w: credential keys must be sorted and distinct", ErrInvalid)
		}
	}
	return nil
}

func validLocation(from string) error {
	if len(from) > MaxCredentialLocation || strings.IndexFunc(from, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}) >= 0 {
		return fmt.Errorf("%w: registration location", ErrInvalid)
	}
	return nil
}

func applyCreateCredentialSource(d *data, c Command, p CreateCredentialSource) (CredentialSource, error) {
	if p.ID == "" || !identName.MatchString(p.Name) {
		return CredentialSource{}, fmt.Errorf("%w: credential source id and a DNS-label name are required", ErrInvalid)
	}
	if err := ValidCredentialKeys(p.Keys); err != nil {
		return CredentialSource{}, err
	}
	if err := validLocation(p.RegisteredFrom); err != nil {
		return CredentialSource{}, err
	}
	if _, ok := d.namespaces[p.NamespaceID]; !ok {
		return CredentialSource{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.NamespaceID)
	}
	if _, ok := d.creds[p.ID]; ok {
		return CredentialSource{}, fmt.Errorf("%w: credential source %q exists", ErrConflict, p.ID)
	}
	if _, ok := d.credByName[nameKey{p.NamespaceID, p.Name}]; ok {
		return CredentialSource{}, fmt.Errorf("%w: credential source name %q is taken", ErrConflict, p.Name)
	}
	s := CredentialSource{ID: p.ID, NamespaceID: p.NamespaceID, Name: p.Name, Keys: cloneStrings(p.Keys), Version: 1,
		RegisteredFrom: p.RegisteredFrom, CreatedAt: c.Time, CreatedBy: c.Actor}
	d.putCredential(s)
	action, details := AuditCredentialCreate, credentialDetails(s)
	if s.RegisteredFrom != "" {
		action, details["from"] = AuditCredentialRegister, s.RegisteredFrom
	}
	d.audit3(c, action, d.credResource(s), s.NamespaceID, "", details)
	return cloneCredential(s), nil
}

func applyRotateCredentialSource(d *data, c Command, p RotateCredentialSource) (CredentialSource, error) {
	s, ok := d.creds[p.ID]
	if !ok {
		return CredentialSource{}, fmt.Errorf("%w: credential source %q", ErrNotFound, p.ID)
	}
	if err := ValidCredentialKeys(p.Keys); err != nil {
		return CredentialSource{}, err
	}
	if err := validLocation(p.RegisteredFrom); err != nil {
		return CredentialSource{}, err
	}
	if p.Version != s.Version+1 {
		return CredentialSource{}, fmt.Errorf("%w: credential source %q is at version %d, not %d", ErrConflict, s.Name, s.Version, p.Version-1)
	}
	s.Keys, s.Version, s.RotatedAt, s.RotatedBy = cloneStrings(p.Keys), p.Version, c.Time, c.Actor
	if p.RegisteredFrom != "" {
		s.RegisteredFrom = p.RegisteredFrom
	}
	d.putCredential(s)
	details := credentialDetails(s)
	if p.RegisteredFrom != "" {
		details["from"] = p.RegisteredFrom
	}
	d.audit3(c, AuditCredentialRotate, d.credResource(s), s.NamespaceID, "", details)
	return cloneCredential(s), nil
}

func applyWithdrawCredentialSource(d *data, c Command, p WithdrawCredentialSource) (CredentialSource, error) {
	s, ok := d.creds[p.ID]
	if !ok {
		return CredentialSource{}, fmt.Errorf("%w: credential source %q", ErrNotFound, p.ID)
	}
	delete(d.creds, s.ID)
	delete(d.credByName, nameKey{s.NamespaceID, s.Name})
	d.audit3(c, AuditCredentialWithdraw, d.credResource(s), s.NamespaceID, "", credentialDetails(s))
	return cloneCredential(s), nil
}

// credentialDetails are the audit details of a source's change.
func credentialDetails(s CredentialSource) map[string]string {
	return map[string]string{"version": strconv.FormatInt(s.Version, 10), "keys": strings.Join(s.Keys, ",")}
}

// putCredential stores a source and indexes its name.
func (d *data) putCredential(s CredentialSource) {
	d.creds[s.ID] = s
	d.credByName[nameKey{s.NamespaceID, s.Name}] = s.ID
}

func (d *data) credResource(s CredentialSource) string {
	return ScopedResource("CredentialSource", d.nsName(s.NamespaceID), s.Name)
}

func (d *data) credentialsIn(nsID string) int {
	n := 0
	for _, s := range d.creds {
		if s.NamespaceID == nsID {
			n++
		}
	}
	return n
}

func cloneCredential(s CredentialSource) CredentialSource {
	s.Keys = cloneStrings(s.Keys)
	return s
}

// CredentialSource returns one credential source.
func (m *Machine) CredentialSource(id string) (CredentialSource, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.d.creds[id]
	return cloneCredential(s), ok
}

// CredentialSourceByName returns the credential source named name in a
// Namespace.
func (m *Machine) CredentialSourceByName(nsID, name string) (CredentialSource, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.d.credByName[nameKey{nsID, name}]
	if !ok {
		return CredentialSource{}, false
	}
	return cloneCredential(m.d.creds[id]), true
}

// CredentialSources returns a Namespace's credential sources ("" = all)
// ordered by Namespace and name.
func (m *Machine) CredentialSources(nsID string) []CredentialSource {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := sortedValues(m.d.creds, func(s CredentialSource) bool { return nsID == "" || s.NamespaceID == nsID },
		cloneCredential, func(a, b CredentialSource) int {
			return cmp.Or(cmp.Compare(a.NamespaceID, b.NamespaceID), cmp.Compare(a.Name, b.Name))
		})
	return slices.Clip(out)
}

// marshalCredentials writes the snapshot section "credentials": every
// source's metadata by ID.
func marshalCredentials(e *snapEnc, d *data) {
	encodeSorted(e, d.creds, func(s CredentialSource) {
		e.str(s.ID)
		e.str(s.NamespaceID)
		e.str(s.Name)
		e.strs(s.Keys)
		e.int(s.Version)
		e.str(s.RegisteredFrom)
		e.time(s.CreatedAt)
		e.str(s.CreatedBy)
		e.time(s.RotatedAt)
		e.str(s.RotatedBy)
	})
}

func unmarshalCredentials(r *snapDec, d *data) {
	for range r.count() {
		s := CredentialSource{ID: r.str(), NamespaceID: r.sym(), Name: r.str(), Keys: r.strs(), Version: r.int(),
			RegisteredFrom: r.str(), CreatedAt: r.time(), CreatedBy: r.sym(), RotatedAt: r.time(), RotatedBy: r.sym()}
		if r.err != nil {
			return
		}
		if _, ok := d.creds[s.ID]; ok {
			r.fail(errDuplicate("credential source", s.ID))
			return
		}
		if _, ok := d.credByName[nameKey{s.NamespaceID, s.Name}]; ok {
			r.fail(errDuplicate("credential source name", s.Name))
			return
		}
		d.putCredential(s)
	}
}
