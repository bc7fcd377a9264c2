package local

// EnsureNamespace and DeleteNamespace.

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// EnsureNamespace implements compute.Driver.
func (d *Driver) EnsureNamespace(_ context.Context, ns state.Namespace) error {
	if err := checkIDs(ns.ID); err != nil {
		return err
	}
	return mkdirs(filepath.Join(d.cfg.DataDir, dirRuntimes), d.nsDir(ns.ID))
}

// DeleteNamespace implements compute.Driver: the Namespace's directory goes
// once no Agent directory is left in it, with its credential sources'
// directory.
func (d *Driver) DeleteNamespace(_ context.Context, ns state.Namespace) error {
	if err := checkIDs(ns.ID); err != nil {
		return err
	}
	entries, err := os.ReadDir(d.nsDir(ns.ID))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return compute.Transient(codes.TransientDependency, err)
	}
	if len(entries) > 0 {
		return compute.Transient(codes.NamespaceNotEmpty, errors.New("local: namespace still holds Agent runtimes"))
	}
	if f, ok := d.cfg.Credentials.(CredentialFiles); ok {
		if err := f.DeleteNamespace(ns.ID); err != nil {
			return compute.Transient(codes.TransientDependency, err)
		}
	}
	if err != nil { // no directory
		return nil
	}
	return os.Remove(d.nsDir(ns.ID))
}

// CredentialStore implements compute.CredentialStorer: the configured
// Credentials, when they keep values (CredentialFiles).
func (d *Driver) CredentialStore() compute.CredentialStore {
	s, _ := d.cfg.Credentials.(compute.CredentialStore)
	return s
}
