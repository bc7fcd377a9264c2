package secretfile_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/secretfile"
	"oce.dev/oce/shared/secretfile/secretfiletest"
)

// Run as root (make test): files are chowned to other users and groups.
func TestRule(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "the ownership cases need root")
	own := os.Getegid()
	foreignGroup := 4242
	for _, tc := range []struct {
		name     string
		mode     os.FileMode
		uid, gid int
		ok       bool
	}{
		{"owner-only 0600", 0o600, 0, own, true},
		{"owner-only 0400", 0o400, 0, own, true},
		{"group-readable, own group (kubelet fsGroup)", 0o440, 0, own, true},
		{"group-readable, foreign group", 0o440, 0, foreignGroup, false},
		{"world-readable", 0o444, 0, own, false},
		{"world-readable 0644", 0o644, 0, own, false},
		{"group-writable", 0o660, 0, own, false},
		{"other user's file", 0o600, 1234, own, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "key")
			require.NoError(t, os.WriteFile(f, []byte(" s3cret\n"), 0o600))
			require.NoError(t, os.Chown(f, tc.uid, tc.gid))
			require.NoError(t, os.Chmod(f, tc.mode))
			v, err := secretfile.Read(f)
			if !tc.ok {
				require.ErrorIs(t, err, secretfile.ErrInsecure)
				require.NotContains(t, err.Error(), filepath.Dir(f), "no path in the error")
				return
			}
			require.NoError(t, err)
			require.Equal(t, "s3cret", v)
		})
	}
}

// A Secret volume as kubelet writes it (defaultMode 0400 + fsGroup → 0440,
// root-owned, ..data symlinks) is accepted by a process of the fsGroup; the
// same volume without the group is refused.
func TestKubeletLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, secretfiletest.KubeletVolume(dir, map[string][]byte{"gateway-password": []byte("pw\n")}, 0o400, os.Getegid()))
	lst, err := os.Lstat(filepath.Join(dir, "gateway-password"))
	require.NoError(t, err)
	require.NotZero(t, lst.Mode()&os.ModeSymlink, "the key is a symlink into ..data")
	st, err := secretfile.Check(filepath.Join(dir, "gateway-password"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o440), st.Mode().Perm())
	require.Equal(t, uint32(0), st.Sys().(*syscall.Stat_t).Uid)
	v, err := secretfile.Read(filepath.Join(dir, "gateway-password"))
	require.NoError(t, err)
	require.Equal(t, "pw", v)

	other := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, secretfiletest.KubeletVolume(other, map[string][]byte{"k": []byte("v")}, 0o400, 4243))
	_, err = secretfile.Read(filepath.Join(other, "k"))
	require.ErrorIs(t, err, secretfile.ErrInsecure)

	world := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, secretfiletest.KubeletVolume(world, map[string][]byte{"k": []byte("v")}, 0o644, os.Getegid()))
	_, err = secretfile.Read(filepath.Join(world, "k"))
	require.ErrorIs(t, err, secretfile.ErrInsecure)

	_, err = secretfile.Read(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = secretfile.Read(dir)
	require.ErrorIs(t, err, secretfile.ErrInsecure, "a directory is not a secret file")
}
