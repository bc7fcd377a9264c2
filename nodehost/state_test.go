package nodehost

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The node's credentials (identity, device token, enrollment copy) never
// lie where its file commands serve: a state directory or enrollment file
// inside the workspace or a Skill root, by name or through a symlink, is
// refused before anything is written.
func TestStateDirOutsideServedRoots(t *testing.T) {
	dir := t.TempDir()
	ws, skills := filepath.Join(dir, "ws"), filepath.Join(dir, "skills")
	require.NoError(t, os.MkdirAll(ws, 0o700))
	require.NoError(t, os.MkdirAll(skills, 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "hidden"), 0o700))
	require.NoError(t, os.Symlink(filepath.Join(ws, "hidden"), filepath.Join(dir, "via-link")))
	for _, tc := range []struct {
		name, state, enroll string
		err                 error
	}{
		{"beside the workspace", filepath.Join(dir, "state"), "", nil},
		{"in the workspace", filepath.Join(ws, ".oce-node", "a"), "", ErrStateServed},
		{"the workspace itself", ws, "", ErrStateServed},
		{"in a Skill root", filepath.Join(skills, "s"), "", ErrStateServed},
		{"a symlink into the workspace", filepath.Join(dir, "via-link"), "", ErrStateServed},
		{"enrollment in the workspace", filepath.Join(dir, "state2"), filepath.Join(ws, "enroll"), ErrStateServed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{StateDir: tc.state, Workspace: ws, SkillRoots: []string{skills}, EnrollmentFile: tc.enroll})
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
			_, err = os.Stat(filepath.Join(tc.state, identityFile))
			require.True(t, os.IsNotExist(err), "no identity was written there")
		})
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--state-dir", filepath.Join(ws, "state"), "--workspace", ws}, &out, &errb)
	require.Equal(t, ExitBadInput, code)
	require.Contains(t, errb.String(), "outside the workspace")
}
