package occ

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteSecretFile: --out creates the file 0600, fixes an existing
// file's mode before writing, and refuses symbolic links (the target is
// untouched), directories and FIFOs.
func TestWriteSecretFile(t *testing.T) {
	dir := t.TempDir()
	mode := func(p string) os.FileMode {
		st, err := os.Lstat(p)
		require.NoError(t, err)
		return st.Mode().Perm()
	}

	fresh := filepath.Join(dir, "fresh")
	require.NoError(t, writeSecretFile(fresh, []byte("s1\n")))
	require.Equal(t, os.FileMode(0o600), mode(fresh))

	loose := filepath.Join(dir, "loose")
	require.NoError(t, os.WriteFile(loose, []byte("an older, longer content\n"), 0o644))
	require.NoError(t, os.Chmod(loose, 0o644))
	require.NoError(t, writeSecretFile(loose, []byte("s2\n")))
	require.Equal(t, os.FileMode(0o600), mode(loose), "an existing file's mode is fixed")
	b, err := os.ReadFile(loose)
	require.NoError(t, err)
	require.Equal(t, "s2\n", string(b), "and its old content replaced")

	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o644))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	require.ErrorContains(t, writeSecretFile(link, []byte("s3\n")), "symbolic link")
	b, err = os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "keep", string(b), "a link's target is never written")
	require.Equal(t, os.FileMode(0o644), mode(target))

	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))
	require.Error(t, writeSecretFile(dangling, []byte("s4\n")))
	_, err = os.Stat(filepath.Join(dir, "nowhere"))
	require.True(t, os.IsNotExist(err), "a dangling link does not create its target")

	require.Error(t, writeSecretFile(dir, []byte("s5\n")), "a directory is refused")
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	require.Error(t, writeSecretFile(fifo, []byte("s6\n")), "a FIFO is refused without blocking")
}
