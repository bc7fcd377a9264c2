package harnessd

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A delivered enrollment file that nodehost would refuse (a Secret volume's
// root-owned, group-readable file) reaches nodehost as a private 0600 copy;
// once the node holds a device token no copy is made.
func TestPrivateEnrollmentCopy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "mounted", "enrollment")
	require.NoError(t, os.MkdirAll(filepath.Dir(src), 0o755))
	require.NoError(t, os.WriteFile(src, []byte("c2V0dXAtY29kZQ"), 0o640))
	state := filepath.Join(dir, "node-state")
	h := &harness{cfg: Config{NodehostEnrollment: src, NodehostStateDir: state, Workspace: dir}, log: slog.New(slog.DiscardHandler)}

	args := h.nodeArgs()
	dst := filepath.Join(state, NodeEnrollmentCopy)
	require.Contains(t, args, dst)
	require.NotContains(t, args, src)
	st, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "c2V0dXAtY29kZQ", string(b))

	// enrolled: the token exists, no copy is passed, the delivered file goes
	require.NoError(t, os.Remove(dst))
	require.NoError(t, os.WriteFile(filepath.Join(state, NodeTokenFile), []byte("tok"), 0o600))
	args = h.nodeArgs()
	require.NotContains(t, args, "--enrollment-file")
	_, err = os.Stat(dst)
	require.True(t, os.IsNotExist(err))
	_, err = os.Stat(src)
	require.True(t, os.IsNotExist(err))
}
