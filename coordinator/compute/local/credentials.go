package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/contract"
)

// ErrBadSourceRef reports a harnessAuth sourceRef CredentialFiles cannot
// resolve.
var ErrBadSourceRef = errors.New("local: sourceRef must name a credential source of the Agent's Namespace (credential:<name>[#<key>])")

// CredentialFiles keeps the credential sources of each oce Namespace as
// files: Dir/<namespace id>/<source name>, mode 0600 in 0700 directories,
// each holding the source's version and values (docs/credentials.md). A
// revision's reference resolves only among the files of its own
// Namespace. ImportDir is the shared secrets directory of earlier releases
// (--local-secrets-dir, where local:<name> used to resolve): a cluster admin
// registers a file of it as a Namespace's source (ReadLocation).
type CredentialFiles struct {
	Dir       string
	ImportDir string
}

var (
	_ compute.Credentials     = CredentialFiles{}
	_ compute.CredentialStore = CredentialFiles{}
)

// storedFile is the content of one source's file.
type storedFile struct {
	Version int64             `json:"version"`
	Values  map[string][]byte `json:"values"`
}

// path is the file of source name of Namespace nsID, once both are safe
// path components.
func (f CredentialFiles) path(nsID, name string) (string, error) {
	if f.Dir == "" || checkIDs(nsID) != nil || !credref.ValidName(name) {
		return "", fmt.Errorf("%w: namespace %q, source %q", ErrBadSourceRef, nsID, name)
	}
	return filepath.Join(f.Dir, nsID, name), nil
}

// PutCredential implements compute.CredentialStore: the file is replaced
// atomically.
func (f CredentialFiles) PutCredential(_ context.Context, ns state.Namespace, name string, version int64, values map[string][]byte) error {
	p, err := f.path(ns.ID, name)
	if err != nil {
		return err
	}
	if err := mkdirs(f.Dir, filepath.Dir(p)); err != nil {
		return err
	}
	b, err := json.Marshal(storedFile{Version: version, Values: values})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(p, b, 0o600); err != nil {
		return fmt.Errorf("local: write credential source %s: %w", name, err)
	}
	return nil
}

// DeleteCredential implements compute.CredentialStore.
func (f CredentialFiles) DeleteCredential(_ context.Context, ns state.Namespace, name string) error {
	p, err := f.path(ns.ID, name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: delete credential source %s: %w", name, err)
	}
	return nil
}

// DeleteNamespace removes the Namespace's directory of sources (the API
// deletes a Namespace only once it holds none; this removes any value a
// write left behind without its metadata).
func (f CredentialFiles) DeleteNamespace(nsID string) error {
	if f.Dir == "" || checkIDs(nsID) != nil {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(f.Dir, nsID)); err != nil {
		return fmt.Errorf("local: delete credential sources: %w", err)
	}
	return nil
}

// importName is a file name of the shared secrets directory.
var importName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ReadLocation implements compute.CredentialStore: from is local:<file>, a
// file of ImportDir (mode 0600 or 0400); its trimmed content is the value
// of key "value".
func (f CredentialFiles) ReadLocation(_ context.Context, _ state.Namespace, from string) (map[string][]byte, error) {
	name, ok := strings.CutPrefix(from, "local:")
	if !ok || !importName.MatchString(name) || name == "." || name == ".." || f.ImportDir == "" {
		return nil, fmt.Errorf("%w: the local driver registers local:<file of %s>", compute.ErrLocationInvalid, f.ImportDir)
	}
	v, err := readPrivate(filepath.Join(f.ImportDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", compute.ErrLocationNotFound, from)
	}
	if err != nil {
		return nil, err
	}
	v = []byte(strings.TrimSpace(string(v)))
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", compute.ErrLocationNotFound, from)
	}
	return map[string][]byte{"value": v}, nil
}

// readPrivate reads a regular file no one but its owner may read.
func readPrivate(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", compute.ErrLocationRefused, filepath.Base(path))
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("local: %s must be mode 0600", filepath.Base(path))
	}
	return os.ReadFile(path)
}

// values reads the values of source name of Namespace nsID.
func (f CredentialFiles) values(nsID, name string) (map[string][]byte, error) {
	p, err := f.path(nsID, name)
	if err != nil {
		return nil, err
	}
	b, err := readPrivate(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", compute.ErrNoSource, name, err)
	}
	var s storedFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("local: credential source %s is malformed", name)
	}
	return s.Values, nil
}

// Resolve implements compute.Credentials: the value the revision's
// reference names, read from its own Namespace's files only, goes to the
// secret file the revision's topology and method need: model-api-key
// (embedded), openai-api-key (dedicated api_key) or codex-access-token
// (dedicated codex_pat).
func (f CredentialFiles) Resolve(_ context.Context, rev state.Revision) (map[string][]byte, error) {
	a := rev.HarnessAuth
	if a == nil {
		return nil, nil
	}
	if _, err := credref.Parse(a.SourceRef); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSourceRef, err)
	}
	v, _, err := compute.SourceValue(rev, f.values)
	if err != nil {
		return nil, err
	}
	key := contract.SecretModelAPIKey
	if rev.Mode == state.ModeDedicated {
		switch a.Method {
		case "api_key":
			key = contract.SecretOpenAIAPIKey
		case "codex_pat":
			key = contract.SecretCodexAccessToken
		default:
			return nil, fmt.Errorf("local: harnessAuth method %q is not delivered by the local driver", a.Method)
		}
	}
	return map[string][]byte{key: v}, nil
}
