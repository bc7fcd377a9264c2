package codexprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"oce.dev/oce/shared/supervise"
)

// LoginTimeout bounds `codex login --with-api-key` (it only writes a file).
const LoginTimeout = 30 * time.Second

// ErrLogin reports a failed API-key login (LOGIN_FAILED); its text never
// carries the key or Codex's output.
var ErrLogin = errors.New("codexprobe: codex login failed")

// LoginWithAPIKey stores key in codexHome/auth.json (mode 0600) by running
// `codex -c cli_auth_credentials_store=file login --with-api-key` with the
// key on stdin (docs/design/codex.md#s2: it reads all of stdin, does not check the key).
// The child's argv and environment carry no key; a probe that then uses a
// provider with RequiresOpenAIAuth needs no key in any environment.
func LoginWithAPIKey(ctx context.Context, codex, codexHome string, key []byte) error {
	if len(bytes.TrimSpace(key)) == 0 {
		return fmt.Errorf("%w: empty key", ErrLogin)
	}
	if st, err := os.Stat(codexHome); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: CODEX_HOME must be an existing directory", ErrLogin)
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	res, err := supervise.RunCommand(ctx, supervise.RunSpec{Name: "codex-login", Path: codex,
		Args: []string{"-c", "cli_auth_credentials_store=file", "login", "--with-api-key"},
		Env:  []string{"PATH=" + path, "HOME=" + codexHome, "CODEX_HOME=" + codexHome, "RUST_LOG=error"},
		Dir:  codexHome, Stdin: key, Timeout: LoginTimeout})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrLogin, ctx.Err())
		}
		return fmt.Errorf("%w: %v", ErrLogin, err)
	}
	if !res.Status.Success() {
		return fmt.Errorf("%w: exit %d", ErrLogin, res.Status.ShellCode())
	}
	st, err := os.Stat(filepath.Join(codexHome, "auth.json"))
	if err != nil || st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: auth.json missing or not private", ErrLogin)
	}
	return nil
}
