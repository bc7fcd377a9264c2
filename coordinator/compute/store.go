package compute

import (
	"context"
	"errors"
	"fmt"

	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/state"
)

// CredentialStore keeps the values of the credential sources of oce
// Namespaces where the driver's workloads can be given them — never in the
// replicated state, which holds only their metadata (docs/credentials.md).
// The API's leader writes a value here first and commits its metadata
// second, so every method is idempotent: a retried write repeats it.
type CredentialStore interface {
	// PutCredential writes version of source name of ns, replacing any
	// value it held.
	PutCredential(ctx context.Context, ns state.Namespace, name string, version int64, values map[string][]byte) error
	// DeleteCredential removes source name of ns; an absent one is no
	// error.
	DeleteCredential(ctx context.Context, ns state.Namespace, name string) error
	// ReadLocation reads the values at an existing location a cluster
	// admin registers as a source of ns (the credentials of releases before
	// sources belonged to Namespaces). It refuses what is never a source:
	// ErrLocationInvalid, ErrLocationRefused, ErrLocationNotFound.
	ReadLocation(ctx context.Context, ns state.Namespace, from string) (map[string][]byte, error)
}

// CredentialStorer is implemented by a driver that keeps credential
// values; CredentialStore answers nil when this instance keeps none.
type CredentialStorer interface {
	CredentialStore() CredentialStore
}

// StoreOf returns the credential store of d, or nil.
func StoreOf(d Driver) CredentialStore {
	if s, ok := d.(CredentialStorer); ok {
		return s.CredentialStore()
	}
	return nil
}

// Refusals of ReadLocation.
var (
	// ErrLocationInvalid: from is not a location this driver reads.
	ErrLocationInvalid = errors.New("compute: not a location this driver registers credentials from")
	// ErrLocationRefused: the location is never a credential source (the
	// coordinator's own Secrets, objects oce manages, another Namespace's
	// runtime namespaces).
	ErrLocationRefused = errors.New("compute: the location is never a credential source")
	// ErrLocationNotFound: nothing is at the location.
	ErrLocationNotFound = errors.New("compute: no credential at the location")
)

// ErrNoSource: the store holds no value for a revision's reference.
var ErrNoSource = errors.New("compute: the credential source holds no value")

// SourceValue is the value a revision's reference names among the values
// its source holds (the reference's key, or the source's only key), and
// the source's values.
func SourceValue(rev state.Revision, lookup func(nsID, name string) (map[string][]byte, error)) ([]byte, map[string][]byte, error) {
	if rev.HarnessAuth == nil {
		return nil, nil, fmt.Errorf("%w: the revision binds no credential", ErrNoSource)
	}
	ref, err := credref.Parse(rev.HarnessAuth.SourceRef)
	if err != nil {
		return nil, nil, err
	}
	// The reference resolves in the revision's own Namespace whatever it
	// is qualified with: the deploy decision refused any other.
	values, err := lookup(rev.NamespaceID, ref.Name)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	key, err := ref.KeyIn(keys)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: source %s: %w", ErrNoSource, ref.Name, err)
	}
	if len(values[key]) == 0 {
		return nil, nil, fmt.Errorf("%w: source %s key %s is empty", ErrNoSource, ref.Name, key)
	}
	return values[key], values, nil
}
