package memory

import (
	"context"
	"fmt"
	"maps"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// Operations of the credential store (fault rules and the call log name
// them with the id "<namespace id>/<source name>", or the location).
const (
	OpPutCredential    Op = "PutCredential"
	OpDeleteCredential Op = "DeleteCredential"
	OpReadLocation     Op = "ReadLocation"
)

// storedCredential is one source's value as the store keeps it.
type storedCredential struct {
	version int64
	values  map[string][]byte
}

var _ compute.CredentialStorer = (*Driver)(nil)

// CredentialStore implements compute.CredentialStorer: the driver keeps
// the values in this process's memory only.
func (d *Driver) CredentialStore() compute.CredentialStore { return credentials{d} }

type credentials struct{ d *Driver }

func credKey(nsID, name string) string { return nsID + "/" + name }

// PutCredential implements compute.CredentialStore.
func (c credentials) PutCredential(ctx context.Context, ns state.Namespace, name string, version int64, values map[string][]byte) error {
	k := credKey(ns.ID, name)
	if err := c.d.begin(ctx, OpPutCredential, k); err != nil {
		return err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.d.creds == nil {
		c.d.creds = map[string]storedCredential{}
	}
	c.d.creds[k] = storedCredential{version: version, values: cloneValues(values)}
	return nil
}

// DeleteCredential implements compute.CredentialStore.
func (c credentials) DeleteCredential(ctx context.Context, ns state.Namespace, name string) error {
	k := credKey(ns.ID, name)
	if err := c.d.begin(ctx, OpDeleteCredential, k); err != nil {
		return err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	delete(c.d.creds, k)
	return nil
}

// ReadLocation implements compute.CredentialStore: the locations tests set
// with SetLocation ("memory:<name>"); a location set to nil is refused.
func (c credentials) ReadLocation(ctx context.Context, _ state.Namespace, from string) (map[string][]byte, error) {
	if err := c.d.begin(ctx, OpReadLocation, from); err != nil {
		return nil, err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	v, ok := c.d.locations[from]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s", compute.ErrLocationNotFound, from)
	case v == nil:
		return nil, fmt.Errorf("%w: %s", compute.ErrLocationRefused, from)
	}
	return cloneValues(v), nil
}

// SetLocation makes from a location ReadLocation reads values from; nil
// values make it a location that is never a source.
func (d *Driver) SetLocation(from string, values map[string][]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.locations == nil {
		d.locations = map[string]map[string][]byte{}
	}
	d.locations[from] = cloneValues(values)
}

// Credential returns the value the store holds for source name of
// Namespace nsID and its version.
func (d *Driver) Credential(nsID, name string) (map[string][]byte, int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.creds[credKey(nsID, name)]
	return cloneValues(s.values), s.version, ok
}

// Resolve implements compute.Credentials over the stored values: the value
// the revision's reference names, in its own Namespace only, as the file
// model-api-key.
func (d *Driver) Resolve(_ context.Context, rev state.Revision) (map[string][]byte, error) {
	v, _, err := compute.SourceValue(rev, func(nsID, name string) (map[string][]byte, error) {
		vals, _, ok := d.Credential(nsID, name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", compute.ErrNoSource, name)
		}
		return vals, nil
	})
	if err != nil {
		return nil, err
	}
	return map[string][]byte{contract.SecretModelAPIKey: v}, nil
}

func cloneValues(v map[string][]byte) map[string][]byte {
	if v == nil {
		return nil
	}
	out := make(map[string][]byte, len(v))
	for k, b := range maps.All(v) {
		out[k] = append([]byte(nil), b...)
	}
	return out
}
