// Package runtimes locates the pinned native runtimes (Node + OpenClaw,
// Codex, tini) that scripts/runtimes.sh installs into the shared cache, and
// installs them when they are missing.
package runtimes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"oce.dev/oce/shared/contract"
)

// Pinned versions; scripts/runtimes.sh carries the same numbers.
const (
	NodeVersion     = "26.10.0"
	OpenClawVersion = "2026.9.6"
	CodexVersion    = "0.169.0"
)

// ErrMissing reports runtimes that are not installed and could not be.
var ErrMissing = errors.New("runtimes: pinned runtimes are not installed")

// Paths are the executables of the installed runtimes.
type Paths struct {
	Node        string // node binary
	OpenClawMJS string // openclaw.mjs, run as Node <OpenClawMJS> …
	Codex       string // native codex binary
	Tini        string // /usr/bin/tini
	// NPMCache is an npm cache holding the gateway's codex plugin
	// (@openclaw/codex) for offline installs (an older manifest without it
	// is reinstalled by Ensure).
	NPMCache string
}

// Environment names of the runtime locations: the manifest's keys, which a
// container image sets as its environment (images/*/Containerfile).
const (
	EnvNode        = contract.EnvNode
	EnvOpenClawMJS = contract.EnvOpenClawMJS
	EnvNPMCache    = contract.EnvNPMCache
	EnvCodex       = "OCE_CODEX" // manifest only: images set contract.EnvCodexBin
	EnvTini        = "OCE_TINI"  // manifest only
)

// ErrMissingInImage reports a runtime location the environment names but
// that does not exist.
var ErrMissingInImage = errors.New("runtimes: the runtime the environment names is missing")

// OpenClawFromEnv returns the openclaw command the environment names: Node
// ($OCE_NODE, else node in PATH) running $OCE_OPENCLAW_MJS. ok is false when
// OCE_OPENCLAW_MJS is unset; an error names what is missing.
func OpenClawFromEnv(getenv func(string) string) (cmd []string, ok bool, err error) {
	mjs := getenv(EnvOpenClawMJS)
	if mjs == "" {
		return nil, false, nil
	}
	if _, err := os.Stat(mjs); err != nil {
		return nil, true, fmt.Errorf("%w: %s (%s)", ErrMissingInImage, EnvOpenClawMJS, filepath.Base(mjs))
	}
	node := getenv(EnvNode)
	if node == "" {
		p, err := exec.LookPath("node")
		if err != nil {
			return nil, true, fmt.Errorf("%w: node (no %s and none in PATH)", ErrMissingInImage, EnvNode)
		}
		node = p
	} else if _, err := os.Stat(node); err != nil {
		return nil, true, fmt.Errorf("%w: %s (%s)", ErrMissingInImage, EnvNode, filepath.Base(node))
	}
	return []string{node, mjs}, true, nil
}

// OpenClawCommand returns argv for running the openclaw CLI with args.
func (p Paths) OpenClawCommand(args ...string) []string {
	return append([]string{p.Node, p.OpenClawMJS}, args...)
}

// CacheDir is ${XDG_CACHE_HOME:-$HOME/.cache}/oce.
func CacheDir() string {
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "oce")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "oce")
}

func manifestPath() string {
	return filepath.Join(CacheDir(), "runtimes",
		fmt.Sprintf("manifest-%s-%s-%s.env", NodeVersion, OpenClawVersion, CodexVersion))
}

// Load reads the manifest scripts/runtimes.sh wrote and checks every file.
func Load() (Paths, error) {
	f, err := os.Open(manifestPath())
	if err != nil {
		return Paths{}, fmt.Errorf("%w: %v (run make runtimes)", ErrMissing, err)
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			vals[k] = v
		}
	}
	p := Paths{Node: vals[EnvNode], OpenClawMJS: vals[EnvOpenClawMJS], Codex: vals[EnvCodex], Tini: vals[EnvTini],
		NPMCache: vals[EnvNPMCache]}
	for name, file := range map[string]string{"node": p.Node, "openclaw": p.OpenClawMJS, "codex": p.Codex, "tini": p.Tini,
		"npm cache": p.NPMCache} {
		if file == "" {
			return Paths{}, fmt.Errorf("%w: manifest names no %s", ErrMissing, name)
		}
		if _, err := os.Stat(file); err != nil {
			return Paths{}, fmt.Errorf("%w: %s: %v", ErrMissing, name, err)
		}
	}
	return p, nil
}

var ensureMu sync.Mutex

// Ensure returns the runtime paths, running scripts/runtimes.sh (found by
// walking up from the working directory to go.mod) when they are missing.
func Ensure(ctx context.Context) (Paths, error) {
	ensureMu.Lock()
	defer ensureMu.Unlock()
	if p, err := Load(); err == nil {
		return p, nil
	}
	script, err := findScript()
	if err != nil {
		return Paths{}, err
	}
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return Paths{}, fmt.Errorf("%w: %s failed: %v", ErrMissing, script, err)
	}
	return Load()
}

func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(dir, "scripts", "runtimes.sh")
			if _, err := os.Stat(s); err != nil {
				return "", fmt.Errorf("%w: %s: %v", ErrMissing, s, err)
			}
			return s, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod above the working directory", ErrMissing)
		}
		dir = parent
	}
}
