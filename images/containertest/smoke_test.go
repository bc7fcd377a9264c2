package containertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"oce.dev/oce/images/imagestest"
)

// The built images pass the smoke checks make images runs; a gateway image
// whose root lacks a shared library Node needs, or the codex plugin's
// offline npm cache, fails them with the check's name and what is missing.
func TestSmokeChecksNameWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{imagestest.Coordinator, imagestest.Gateway, imagestest.Harness} {
		img := images[name]
		require.NoError(t, imagestest.Smoke(ctx, img, unpacked[img.Ref], t.TempDir()), "the built %s image", name)
	}

	img := images[imagestest.Gateway]
	u := *unpacked[img.Ref]
	u.RootFS = overlay(t, u.RootFS, nil, "usr/lib/x86_64-linux-gnu/libatomic.so.1", "opt/oce/npm-cache")
	err := imagestest.Smoke(ctx, img, &u, t.TempDir())
	require.ErrorIs(t, err, imagestest.ErrSmoke)
	for _, want := range []string{"node: the image lacks Node", "libatomic1", "libatomic.so.1",
		"codex-plugin-cache: the image lacks the offline npm cache"} {
		require.ErrorContains(t, err, want)
	}

	// The fresh-machine failure: an openclaw tree whose package lifecycle
	// never ran (installed with --ignore-scripts, never started) tries to
	// finish it on its first run, in the read-only image, and exits 1 —
	// the model probe's MODEL_PROBE_FAILED and the plugin install's
	// UNAVAILABLE. make images never ships such a tree.
	const pending = "opt/oce/openclaw/node_modules/openclaw/.openclaw-lifecycle-pending"
	require.NoFileExists(t, filepath.Join(unpacked[img.Ref].RootFS, pending), "the built image carries a completed openclaw")
	u = *unpacked[img.Ref]
	u.RootFS = overlay(t, u.RootFS, map[string]string{pending: "pending"})
	err = imagestest.Smoke(ctx, img, &u, t.TempDir())
	require.ErrorIs(t, err, imagestest.ErrSmoke)
	require.ErrorContains(t, err, "openclaw: the image lacks openclaw")
	require.ErrorContains(t, err, "package lifecycle is incomplete")
}

// overlay returns root seen through an overlay in which files are added
// (path → content) and paths deleted (overlayfs whiteouts), leaving root
// itself untouched.
func overlay(t *testing.T, root string, files map[string]string, paths ...string) string {
	t.Helper()
	dir := t.TempDir()
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{upper, work, merged} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, p := range paths {
		w := filepath.Join(upper, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(w), 0o755))
		require.NoError(t, unix.Mknod(w, unix.S_IFCHR, 0), "whiteout %s", p)
	}
	for p, content := range files {
		f := filepath.Join(upper, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte(content), 0o644))
	}
	require.NoError(t, unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+root+",upperdir="+upper+",workdir="+work))
	t.Cleanup(func() { _ = unix.Unmount(merged, unix.MNT_DETACH) })
	return merged
}
