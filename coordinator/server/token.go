package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/shared/secretfile"
)

// tokenBytes is the entropy of a generated bearer token.
const tokenBytes = 32

// ErrInsecureToken: the token file breaks the shared secret file rule
// (package secretfile: owner-only, or group-readable by this process's group
// as kubelet mounts a Secret with an fsGroup).
var ErrInsecureToken = errors.New("server: INSECURE_TOKEN_FILE")

// LoadOrCreateToken returns the bearer token stored at path, creating a new
// random one (mode 0600) when the file does not exist. An existing file (a
// mounted Secret shared by every member, for instance) must pass the secret
// file rule and hold a non-empty token.
func LoadOrCreateToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("server: read token: %w", err)
	}
	if _, err := secretfile.Check(path); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInsecureToken, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%w: %s is empty or malformed", ErrInsecureToken, filepath.Base(path))
	}
	return tok, nil
}

func createToken(path string) (string, error) {
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("server: generate token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("server: token dir: %w", err)
	}
	// O_EXCL: two processes racing on one data dir never overwrite a token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("server: create token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("server: write token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("server: write token: %w", err)
	}
	return tok, nil
}
