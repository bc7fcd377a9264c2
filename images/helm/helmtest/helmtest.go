// Package helmtest finds the pinned Helm CLI for tests: scripts/helm.sh
// builds it from the Go module proxy into the shared cache once (keyed by
// the Helm and Go versions); a missing one is built, never skipped.
package helmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// BuildTimeout bounds a cold build of helm (docs/OPERATIONS.md has the
// measured figure).
const BuildTimeout = 40 * time.Minute

// ErrNoHelm is returned when scripts/helm.sh did not produce a helm binary.
var ErrNoHelm = errors.New("helmtest: no helm binary")

var once struct {
	sync.Once
	path string
	err  error
}

// RepoRoot is the repository's top directory, found above the working
// directory by scripts/helm.sh.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "helm.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("helmtest: scripts/helm.sh not found above the working directory")
		}
		dir = parent
	}
}

// ChartDir is the oce chart's directory (images/helm/oce).
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "images", "helm", "oce"), nil
}

// Binary returns the pinned helm's path, running scripts/helm.sh (which
// does nothing when the cache holds it) once per process.
func Binary(ctx context.Context) (string, error) {
	once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			once.err = err
			return
		}
		ctx, cancel := context.WithTimeout(ctx, BuildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "helm.sh"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			once.err = fmt.Errorf("%w: scripts/helm.sh: %w\n%s", ErrNoHelm, err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		p := lines[len(lines)-1]
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			once.err = fmt.Errorf("%w: scripts/helm.sh printed %q (%v)\n%s", ErrNoHelm, p, err, stderr.String())
			return
		}
		once.path = p
	})
	return once.path, once.err
}

// Env is the environment helm runs with: its config, cache and data
// directories under dir (nothing of the user's), and no repository index.
func Env(dir string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HELM_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return append(env, "HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
		"HELM_DATA_HOME="+filepath.Join(dir, "data"))
}
