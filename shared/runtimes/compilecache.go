package runtimes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Node's compile cache as the pinned OpenClaw launcher (openclaw.mjs) uses
// it: with NODE_COMPILE_CACHE unset it enables the cache in
// $TMPDIR/CompileCacheDirName/openclaw/<version>/<package.json mtime ms>-<size>
// (setting NODE_COMPILE_CACHE instead makes the launcher re-spawn itself).
// Node keeps one subdirectory per Node build and user below that
// (v<version>-<arch>-<V8 flags hash>-<uid>), and one entry per module,
// keyed by the module's absolute path and checked against its source: a
// cache filled by a boot of the same runtime at the same paths as the same
// uid is used as it is, also from a read-only directory.
const CompileCacheDirName = "node-compile-cache"

// ErrCompileCacheKey reports an OpenClaw package whose cache key cannot be
// computed (no readable package.json).
var ErrCompileCacheKey = errors.New("runtimes: no compile-cache key for the openclaw package")

var unsafeSegment = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// sanitizeSegment is the launcher's path-segment sanitizer.
func sanitizeSegment(s string) string {
	s = strings.Trim(unsafeSegment.ReplaceAllString(s, "_"), "_")
	if s == "" {
		return "unknown"
	}
	return s
}

// CompileCacheKey is the launcher's key directory below a cache base for the
// package of openclawMJS: openclaw/<version>/<mtime ms>-<size> of the
// package.json beside it.
func CompileCacheKey(openclawMJS string) (string, error) {
	pj := filepath.Join(filepath.Dir(openclawMJS), "package.json")
	b, err := os.ReadFile(pj)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrCompileCacheKey, err)
	}
	st, err := os.Stat(pj)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrCompileCacheKey, err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	version := "unknown"
	if json.Unmarshal(b, &meta) == nil && strings.TrimSpace(meta.Version) != "" {
		version = meta.Version
	}
	// JavaScript's Math.trunc(stat.mtimeMs): whole milliseconds
	marker := fmt.Sprintf("%d-%d", st.ModTime().UnixMilli(), st.Size())
	return filepath.Join("openclaw", sanitizeSegment(version), sanitizeSegment(marker)), nil
}

// CompileCacheState says what a prebuilt compile cache offers a runtime.
type CompileCacheState string

// States of a prebuilt compile cache (log values).
const (
	CompileCacheNone     CompileCacheState = "none"     // no prebuilt cache
	CompileCachePrebuilt CompileCacheState = "prebuilt" // filled for exactly this runtime
	CompileCacheStale    CompileCacheState = "stale"    // filled for another runtime (a bump)
)

// PrebuiltCompileCache reports whether the cache base prebuilt holds entries
// for the package of openclawMJS under the launcher's key, for this process's
// user.
func PrebuiltCompileCache(prebuilt, openclawMJS string) CompileCacheState {
	return PrebuiltCompileCacheFor(prebuilt, openclawMJS, os.Getuid())
}

// PrebuiltCompileCacheFor is PrebuiltCompileCache for the user uid (Node
// keeps one subdirectory per user).
func PrebuiltCompileCacheFor(prebuilt, openclawMJS string, uid int) CompileCacheState {
	if prebuilt == "" {
		return CompileCacheNone
	}
	if st, err := os.Stat(prebuilt); err != nil || !st.IsDir() {
		return CompileCacheNone
	}
	key, err := CompileCacheKey(openclawMJS)
	if err != nil {
		return CompileCacheStale
	}
	if UserCompileCacheEntries(filepath.Join(prebuilt, key), uid) == 0 {
		return CompileCacheStale
	}
	return CompileCachePrebuilt
}

// UserCompileCacheEntries counts the entries below keyDir (a launcher key
// directory) in Node's subdirectories for uid: what a process of that user
// can use.
func UserCompileCacheEntries(keyDir string, uid int) int {
	dirs, _ := filepath.Glob(filepath.Join(keyDir, fmt.Sprintf("v*-%d", uid)))
	n := 0
	for _, d := range dirs {
		n += CompileCacheEntries(d)
	}
	return n
}

// CompileCacheEntries counts the cache entries (regular files) below dir.
func CompileCacheEntries(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// SeedCompileCache makes tmpDir/CompileCacheDirName, the launcher's default
// cache base, the prebuilt one for the package of openclawMJS: a symbolic
// link to prebuilt when it holds entries for exactly this runtime, or when
// it is writable (a cache shared by the processes of one host, which fill
// it); a fresh private directory otherwise (no prebuilt cache, or a
// read-only one of another runtime, where nothing could be written), so
// every openclaw process sharing tmpDir (the probe, doctor, the gateway and
// its respawns) fills and reuses one cache. An existing entry is kept (a
// restarted container). It returns the cache base and what prebuilt offered.
func SeedCompileCache(tmpDir, prebuilt, openclawMJS string) (string, CompileCacheState, error) {
	base := filepath.Join(tmpDir, CompileCacheDirName)
	state := PrebuiltCompileCache(prebuilt, openclawMJS)
	if _, err := os.Lstat(base); err == nil {
		return base, state, nil
	}
	if state == CompileCachePrebuilt || (state == CompileCacheStale && writable(prebuilt)) {
		if err := os.Symlink(prebuilt, base); err != nil {
			return "", state, fmt.Errorf("runtimes: link the prebuilt compile cache: %w", err)
		}
		return base, state, nil
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", state, fmt.Errorf("runtimes: compile cache: %w", err)
	}
	return base, state, nil
}

// writable reports whether dir accepts new files.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".w-*")
	if err != nil {
		return false
	}
	f.Close()
	_ = os.Remove(f.Name())
	return true
}
