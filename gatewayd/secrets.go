package gatewayd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/secretfile"
)

// ErrInsecureSecret rejects a secret file others could read or change (the
// shared rule of package secretfile).
var ErrInsecureSecret = secretfile.ErrInsecure

// readSecret returns the secret file name in dir when it exists, else the
// first non-empty variable of envs. Every value found is registered with the
// log redactor at once.
func readSecret(dir, name string, envs ...string) (string, error) {
	v, err := readSecretFile(filepath.Join(dir, name))
	if err == nil && v != "" {
		return v, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	for _, e := range envs {
		if v := os.Getenv(e); v != "" {
			logging.Scrub(v)
			return v, nil
		}
	}
	return "", nil
}

// readSecretFile reads one secret file under the shared rule: owner-only, or
// group-readable by this process's group as kubelet delivers a Secret volume
// with an fsGroup (symlinks followed).
func readSecretFile(path string) (string, error) { return secretfile.Read(path) }
