package nodehost

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/ocproto"
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

// A provisioned identity (the coordinator's, issue 23) becomes the node's:
// on a fresh state, over a different stored identity (whose device token is
// dropped), or unchanged over the same one (token kept); the provisioned
// file is deleted; a readable-by-others file is refused.
func TestProvisionedIdentityAdopted(t *testing.T) {
	prov, err := ocproto.NewIdentity()
	require.NoError(t, err)
	other, err := ocproto.NewIdentity()
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		stored    *ocproto.Identity
		mode      os.FileMode
		wantToken bool
		err       error
	}{
		{"fresh state", nil, 0o600, false, nil},
		{"another identity stored", other, 0o600, false, nil},
		{"the same identity stored", prov, 0o600, true, nil},
		{"readable by others", nil, 0o644, false, ErrEnrollmentInsecure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st := state{dir: filepath.Join(dir, "state")}
			require.NoError(t, st.ensure())
			if tc.stored != nil {
				require.NoError(t, tc.stored.Save(st.path(identityFile)))
				require.NoError(t, st.saveToken("tok-of-the-stored-device"))
			}
			b, err := prov.Marshal()
			require.NoError(t, err)
			file := filepath.Join(dir, "node-identity")
			require.NoError(t, os.WriteFile(file, b, tc.mode))
			require.NoError(t, os.Chmod(file, tc.mode))
			id, err := st.identity(file)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, prov.DeviceID, id.DeviceID)
			saved, err := IdentityDeviceID(st.dir)
			require.NoError(t, err)
			require.Equal(t, prov.DeviceID, saved)
			require.NoFileExists(t, file)
			require.Equal(t, tc.wantToken, st.token() != "")
			again, err := st.identity(file) // nothing provisioned any more: the stored one
			require.NoError(t, err)
			require.Equal(t, prov.DeviceID, again.DeviceID)
		})
	}
}
