package runtimes

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakePackage writes an openclaw package (package.json with version and
// mtime) and returns its openclaw.mjs.
func fakePackage(t *testing.T, version string, mtime time.Time) string {
	dir := filepath.Join(t.TempDir(), "openclaw")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	pj := filepath.Join(dir, "package.json")
	require.NoError(t, os.WriteFile(pj, []byte(`{"name":"openclaw","version":"`+version+`"}`), 0o644))
	require.NoError(t, os.Chtimes(pj, mtime, mtime))
	mjs := filepath.Join(dir, "openclaw.mjs")
	require.NoError(t, os.WriteFile(mjs, nil, 0o644))
	return mjs
}

// The key is the launcher's: openclaw/<sanitized version>/<mtime ms>-<size>.
func TestCompileCacheKey(t *testing.T) {
	at := time.UnixMilli(1795935387668).Add(123 * time.Microsecond) // sub-millisecond part truncated
	mjs := fakePackage(t, "2026.9.6", at)
	key, err := CompileCacheKey(mjs)
	require.NoError(t, err)
	size := len(`{"name":"openclaw","version":"2026.9.6"}`)
	require.Equal(t, filepath.Join("openclaw", "2026.9.6", "1795935387668-"+strconv.Itoa(size)), key)
	odd := fakePackage(t, " 1.0/beta+x ", at)
	key, err = CompileCacheKey(odd)
	require.NoError(t, err)
	require.Equal(t, "1.0_beta_x", filepath.Base(filepath.Dir(key)), "the launcher's segment sanitizer")
	_, err = CompileCacheKey(filepath.Join(t.TempDir(), "openclaw.mjs"))
	require.ErrorIs(t, err, ErrCompileCacheKey)
}

// SeedCompileCache links a prebuilt cache of exactly this runtime, or a
// writable shared one; a read-only cache of another runtime (a bump) or
// none gets a private directory; an existing base is kept.
func TestSeedCompileCache(t *testing.T) {
	at := time.Unix(1795935387, 0)
	mjs := fakePackage(t, "2026.9.6", at)
	key, err := CompileCacheKey(mjs)
	require.NoError(t, err)
	filled := func(t *testing.T, k string) string {
		base := t.TempDir()
		dir := filepath.Join(base, k, "v26.10.0-x64-abc-"+strconv.Itoa(os.Getuid()))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "f0dd69b3"), []byte("x"), 0o644))
		return base
	}
	readOnly := func(t *testing.T, dir string) {
		if os.Geteuid() == 0 {
			t.Log("root writes anyway: the stale case is decided by its entries alone")
		}
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	}
	for _, tc := range []struct {
		name     string
		prebuilt func(t *testing.T) string
		state    CompileCacheState
		linked   bool
	}{
		{"none", func(*testing.T) string { return "" }, CompileCacheNone, false},
		{"missing dir", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, CompileCacheNone, false},
		{"prebuilt for this runtime", func(t *testing.T) string { return filled(t, key) }, CompileCachePrebuilt, true},
		{"prebuilt for this runtime and another user", func(t *testing.T) string {
			b := filled(t, key)
			sub := filepath.Join(b, key, "v26.10.0-x64-abc-"+strconv.Itoa(os.Getuid()))
			require.NoError(t, os.Rename(sub, filepath.Join(b, key, "v26.10.0-x64-abc-4242")))
			readOnly(t, b)
			return b
		}, CompileCacheStale, os.Geteuid() == 0},
		{"writable, empty: shared", func(t *testing.T) string { return t.TempDir() }, CompileCacheStale, true},
		{"another runtime, read-only", func(t *testing.T) string {
			b := filled(t, filepath.Join("openclaw", "2026.1.1", "1-2"))
			readOnly(t, b)
			return b
		}, CompileCacheStale, os.Geteuid() == 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prebuilt := tc.prebuilt(t)
			tmp := t.TempDir()
			base, state, err := SeedCompileCache(tmp, prebuilt, mjs)
			require.NoError(t, err)
			require.Equal(t, tc.state, state)
			require.Equal(t, filepath.Join(tmp, CompileCacheDirName), base)
			fi, err := os.Lstat(base)
			require.NoError(t, err)
			if tc.linked {
				require.Equal(t, os.ModeSymlink, fi.Mode().Type())
				target, err := os.Readlink(base)
				require.NoError(t, err)
				require.Equal(t, prebuilt, target)
			} else {
				require.True(t, fi.IsDir(), "a private directory")
				require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
			}
			// a second seed (a restarted container) keeps what is there
			again, _, err := SeedCompileCache(tmp, "", mjs)
			require.NoError(t, err)
			require.Equal(t, base, again)
			fi2, err := os.Lstat(base)
			require.NoError(t, err)
			require.Equal(t, fi.Mode(), fi2.Mode())
		})
	}
}
