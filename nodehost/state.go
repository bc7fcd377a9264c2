package nodehost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/secretfile"
)

// Files in the node's private state directory.
const (
	identityFile = "identity.json"
	tokenFile    = "device-token"
	gatewayFile  = "gateway.json"
)

// state is the node's private, persisted identity and credentials.
type state struct {
	dir string
}

func (s state) path(name string) string { return filepath.Join(s.dir, name) }

func (s state) ensure() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(s.dir, 0o700)
}

// identity loads the device identity, creating and saving one on first
// start. A provisioned identity (the coordinator's, so the Gateway starts
// pinned to it) is adopted first: it replaces a different stored identity
// (whose device token belonged to that other device and is dropped), and
// the provisioned file is deleted once saved.
func (s state) identity(provisioned string) (*ocproto.Identity, error) {
	if provisioned != "" {
		id, err := s.adopt(provisioned)
		if id != nil || err != nil {
			return id, err
		}
	}
	id, err := ocproto.LoadIdentity(s.path(identityFile))
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if id, err = ocproto.NewIdentity(); err != nil {
		return nil, err
	}
	return id, id.Save(s.path(identityFile))
}

// adopt saves the provisioned identity at path as the node's; (nil, nil)
// when there is none. The file must be private (package secretfile).
func (s state) adopt(path string) (*ocproto.Identity, error) {
	v, err := secretfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: provisioned identity: %w", ErrEnrollmentInsecure, err)
	}
	id, err := ocproto.ParseIdentity([]byte(v))
	if err != nil {
		return nil, err
	}
	cur, cerr := ocproto.LoadIdentity(s.path(identityFile))
	if cerr != nil || cur.DeviceID != id.DeviceID {
		if err := id.Save(s.path(identityFile)); err != nil {
			return nil, err
		}
		if err := s.clearToken(); err != nil {
			return nil, err
		}
	}
	_ = os.Remove(path)
	return id, nil
}

func (s state) token() string {
	b, err := os.ReadFile(s.path(tokenFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (s state) saveToken(tok string) error {
	return atomicfile.Write(s.path(tokenFile), []byte(tok), 0o600)
}

func (s state) clearToken() error {
	err := os.Remove(s.path(tokenFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

type gatewayRecord struct {
	URL string `json:"url"`
}

func (s state) gatewayURL() string {
	b, err := os.ReadFile(s.path(gatewayFile))
	if err != nil {
		return ""
	}
	var g gatewayRecord
	if json.Unmarshal(b, &g) != nil {
		return ""
	}
	return g.URL
}

func (s state) saveGatewayURL(u string) error {
	b, _ := json.Marshal(gatewayRecord{URL: u})
	return atomicfile.Write(s.path(gatewayFile), b, 0o600)
}

// readEnrollment reads the one-use enrollment file under the shared secret
// file rule (package secretfile: owner-only, or group-readable by this
// process's group as kubelet delivers it; never readable by others). A
// missing file returns (nil, nil).
func readEnrollment(path string) (*ocproto.SetupCode, error) {
	if path == "" {
		return nil, nil
	}
	v, err := secretfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, secretfile.ErrInsecure) {
		return nil, fmt.Errorf("%w: %w", ErrEnrollmentInsecure, err)
	}
	if err != nil {
		return nil, err
	}
	code, err := ocproto.DecodeSetupCode(v)
	if err != nil {
		return nil, err
	}
	return &code, nil
}

// IdentityDeviceID prints what `nodehost identity --json` reports: the
// persisted device id, or an error when the node has no identity yet.
func IdentityDeviceID(stateDir string) (string, error) {
	id, err := ocproto.LoadIdentity(filepath.Join(stateDir, identityFile))
	if err != nil {
		return "", err
	}
	return id.DeviceID, nil
}
