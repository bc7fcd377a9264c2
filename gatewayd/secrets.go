package gatewayd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/shared/logging"
)

// ErrInsecureSecret rejects a secret file readable by group or others.
var ErrInsecureSecret = errors.New("gatewayd: secret file must not be readable by group or others")

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

// readSecretFile reads one secret from a mode 0400/0600 file (a Kubernetes
// Secret volume entry is a symlink to such a file, so it is followed).
func readSecretFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: not a regular file", ErrInsecureSecret)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", ErrInsecureSecret
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(b), "\r\n")
	logging.Scrub(v)
	return v, nil
}
