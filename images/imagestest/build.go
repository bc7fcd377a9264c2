// Package imagestest gives tests oce's container images: Build runs `make
// images` (scripts/images.sh) and returns the OCI archives; Unpack turns an
// archive into a root filesystem; Pod runs the containers of a rendered Pod
// spec with runc the way kubelet would (user, read-only root, volumes in
// kubelet's layout, capabilities dropped). No registry is involved.
package imagestest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"oce.dev/oce/shared/netns"
)

// Image names built by scripts/images.sh.
const (
	Coordinator = "coordinator"
	Gateway     = "gateway"
	Harness     = "harness"
)

// Image is one built image.
type Image struct {
	Name    string // coordinator, gateway or harness
	Ref     string // localhost/oce/<name>:<key>, also the archive's io.containerd.image.name
	Archive string // OCI archive (importable with `ctr -n k8s.io images import`)
	Bytes   int64  // archive size
}

// ErrBuild reports a failed image build.
var ErrBuild = errors.New("imagestest: image build failed")

var (
	buildOnce sync.Once
	built     map[string]Image
	buildErr  error
)

// Build builds (or finds, keyed by their inputs) the three images once per
// process and returns them by name. It may install Debian and npm packages,
// so call it before a test binary enters its loopback-only namespace (see
// netns.Reexecuted). The build's progress goes to stderr.
func Build(ctx context.Context) (map[string]Image, error) {
	buildOnce.Do(func() { built, buildErr = build(ctx) })
	return built, buildErr
}

func build(ctx context.Context) (map[string]Image, error) {
	script, err := repoFile("scripts", "images.sh")
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "build")
	// the smoke checks isolate themselves; from a suite on the host network
	// they must not take its namespace for a loopback-only one
	cmd.Env = netns.FreshEnv()
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBuild, script, err)
	}
	return parseManifest(out.Bytes())
}

// Load returns the images of the last build (the manifest scripts/images.sh
// wrote) without building; inside a loopback-only namespace this is the way
// to find what Build produced before it.
func Load() (map[string]Image, error) {
	b, err := os.ReadFile(filepath.Join(CacheDir(), "out", "images.env"))
	if err != nil {
		return nil, fmt.Errorf("%w: no manifest (run make images): %v", ErrBuild, err)
	}
	return parseManifest(b)
}

func parseManifest(b []byte) (map[string]Image, error) {
	imgs := map[string]Image{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: manifest line %q", ErrBuild, sc.Text())
		}
		imgs[f[0]] = Image{Name: f[0], Ref: f[1], Archive: f[2], Bytes: n}
	}
	for _, name := range []string{Coordinator, Gateway, Harness} {
		img, ok := imgs[name]
		if !ok {
			return nil, fmt.Errorf("%w: manifest has no %s image", ErrBuild, name)
		}
		if _, err := os.Stat(img.Archive); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBuild, name, err)
		}
	}
	return imgs, nil
}

// CacheDir is ${XDG_CACHE_HOME:-$HOME/.cache}/oce/images.
func CacheDir() string {
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "oce", "images")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "oce", "images")
}

// repoFile finds a file of the repository by walking up to go.mod.
func repoFile(elem ...string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(append([]string{dir}, elem...)...)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%w: %v", ErrBuild, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod above the working directory", ErrBuild)
		}
		dir = parent
	}
}
