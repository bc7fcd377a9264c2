package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	require.NoError(t, Write(p, []byte("new"), 0o600))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the new file carries the requested mode, not the old one's")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}

func TestWriteFromFailureLeavesTargetAlone(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "record")
	require.NoError(t, os.WriteFile(p, []byte("kept"), 0o600))
	boom := errors.New("boom")
	err := WriteFrom(p, 0o600, func(w io.Writer) error {
		_, _ = w.Write([]byte("partial"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "kept", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary file is removed")
}

func TestWriteMissingDir(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "absent", "f"), []byte("x"), 0o600)
	require.Error(t, err)
}
