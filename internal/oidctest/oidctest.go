// Package oidctest is test support for the real OpenID provider
// scripts/oidc-provider builds: its binary (built and cached by its
// build.sh), its private JSON files and the issuer it announces.
package oidctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BuildTimeout bounds build.sh (a cold build fetches zitadel/oidc from
// the module proxy).
const BuildTimeout = 20 * time.Minute

// Binary returns the provider's executable, running
// <root>/scripts/oidc-provider/build.sh, which builds it when its cache
// lacks the build of the current sources.
func Binary(t *testing.T, root string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "oidc-provider", "build.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "scripts/oidc-provider/build.sh: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := lines[len(lines)-1]
	st, err := os.Stat(bin)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&0o111, "%s is not executable", bin)
	return bin
}

// WriteJSON writes v to path, mode 0600 (the provider's files hold
// secrets), through a rename: the provider re-reads its users file when it
// changes and never reads half of one.
func WriteJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// Start starts cmd (the provider, its stdout not yet taken), stops it when
// the test ends, and returns the issuer URL it prints once listening; logs
// (its stderr) is quoted should it not start.
func Start(t *testing.T, cmd *exec.Cmd, logs fmt.Stringer) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the provider did not start: %s", logs)
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "issuer ")
	require.True(t, ok, line)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return issuer
}
