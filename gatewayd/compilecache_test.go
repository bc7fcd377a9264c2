package gatewayd

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/logtest"
	"oce.dev/oce/shared/runtimes"
)

// gatewayd links the image's read-only compile cache as the launcher's
// default base when it was filled for exactly this runtime, makes a private
// one when it was filled for another (a runtime bump), and says which in
// one record; a command that is not the launcher is left alone.
func TestSeedCompileCacheFromImage(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "openclaw")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version":"2026.9.6"}`), 0o644))
	mjs := filepath.Join(pkg, "openclaw.mjs")
	key, err := runtimes.CompileCacheKey(mjs)
	require.NoError(t, err)
	fill := func(k string) string {
		base := filepath.Join(t.TempDir(), "compile-cache")
		d := filepath.Join(base, k, fmt.Sprintf("v26.10.0-x64-00000000-%d", os.Getuid()))
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "0badcafe"), []byte("code"), 0o644))
		// read-only as in the image (the test binary runs in a private mount namespace)
		require.NoError(t, syscall.Mount(base, base, "", syscall.MS_BIND, ""))
		t.Cleanup(func() { _ = syscall.Unmount(base, syscall.MNT_DETACH) })
		require.NoError(t, syscall.Mount("", base, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
		return base
	}
	for _, tc := range []struct {
		name     string
		cmd      []string
		prebuilt string
		state    string
		linked   bool
	}{
		{"this runtime's cache", []string{"node", mjs}, fill(key), "prebuilt", true},
		{"another runtime's cache", []string{"node", mjs}, fill(filepath.Join("openclaw", "2026.1.1", "1-2")), "stale", false},
		{"no cache", []string{"node", mjs}, "", "none", false},
		{"not the launcher", []string{"/bin/fake-openclaw"}, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			var log logtest.Buffer
			g := &Gatewayd{cfg: Config{OpenClawCommand: tc.cmd, CompileCache: tc.prebuilt}, log: logging.New(&log, slog.LevelInfo, "gatewayd")}
			g.seedCompileCache()
			base := filepath.Join(tmp, runtimes.CompileCacheDirName)
			var state string
			for _, r := range log.JSONRecords() {
				if r["msg"] == "compile cache" {
					state, _ = r["prebuilt"].(string)
				}
			}
			require.Equal(t, tc.state, state)
			if tc.state == "" {
				require.Empty(t, g.compileCacheBase)
				require.NoFileExists(t, base)
				return
			}
			require.Equal(t, base, g.compileCacheBase, "the probe shares it")
			fi, err := os.Lstat(base)
			require.NoError(t, err)
			require.Equal(t, tc.linked, fi.Mode().Type() == os.ModeSymlink)
			require.NotContains(t, log.String(), dir, "no path in the logs")
		})
	}
}
