package nodehost

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/secretfile/secretfiletest"
)

func TestEnrollmentFileRules(t *testing.T) {
	dir := t.TempDir()
	code := ocproto.SetupCode{URL: "ws://127.0.0.1:1", BootstrapToken: "bt", ExpiresAtMs: time.Now().Add(time.Hour).UnixMilli()}.Encode()
	path := filepath.Join(dir, "enroll")
	require.NoError(t, os.WriteFile(path, []byte(code), 0o644))
	_, err := readEnrollment(path)
	require.ErrorIs(t, err, ErrEnrollmentInsecure)
	require.NoError(t, os.Chmod(path, 0o600))
	c, err := readEnrollment(path)
	require.NoError(t, err)
	require.Equal(t, "bt", c.BootstrapToken)
	// a Secret volume as kubelet delivers it (symlinked ..data layout,
	// root-owned, group-readable by the fsGroup) is accepted
	vol := filepath.Join(dir, "vol")
	require.NoError(t, secretfiletest.KubeletVolume(vol, map[string][]byte{"enrollment": []byte(code)}, 0o600, os.Getegid()))
	c, err = readEnrollment(filepath.Join(vol, "enrollment"))
	require.NoError(t, err)
	require.Equal(t, "bt", c.BootstrapToken)
	// group-readable by a group this process is not in: refused
	foreign := filepath.Join(dir, "foreign")
	require.NoError(t, secretfiletest.KubeletVolume(foreign, map[string][]byte{"enrollment": []byte(code)}, 0o600, 4244))
	_, err = readEnrollment(filepath.Join(foreign, "enrollment"))
	require.ErrorIs(t, err, ErrEnrollmentInsecure)
	missing, err := readEnrollment(filepath.Join(dir, "none"))
	require.NoError(t, err)
	require.Nil(t, missing)
}

func TestRunRefusesWithoutEnrollment(t *testing.T) {
	dir := t.TempDir()
	h, err := New(Config{StateDir: filepath.Join(dir, "s"), Workspace: filepath.Join(dir, "w")})
	require.NoError(t, err)
	require.ErrorIs(t, h.Run(context.Background()), ErrNotEnrolled)

	expired := filepath.Join(dir, "expired")
	require.NoError(t, os.WriteFile(expired, []byte(ocproto.SetupCode{URL: "ws://127.0.0.1:1", BootstrapToken: "b", ExpiresAtMs: 1}.Encode()), 0o600))
	h.cfg.EnrollmentFile = expired
	require.ErrorIs(t, h.Run(context.Background()), ErrEnrollmentExpired)
}

func TestMainExitCodes(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.Equal(t, ExitEnroll, Main(context.Background(), []string{"run", "--state-dir", filepath.Join(dir, "s"), "--workspace", filepath.Join(dir, "w")}, &out, &errb))
	require.Contains(t, errb.String(), "not enrolled")

	t.Setenv(CapacityEnv, "0")
	errb.Reset()
	require.Equal(t, ExitBadInput, Main(context.Background(), []string{"run", "--state-dir", filepath.Join(dir, "s"), "--workspace", filepath.Join(dir, "w")}, &out, &errb))
	require.Contains(t, errb.String(), "1 to 1024")

	out.Reset()
	require.Equal(t, ExitOK, Main(context.Background(), []string{"identity", "--json", "--state-dir", filepath.Join(dir, "s")}, &out, &errb))
	require.Regexp(t, `^\{"deviceId":"[0-9a-f]{64}"\}\n$`, out.String())
	require.Equal(t, ExitError, Main(context.Background(), []string{"identity", "--json", "--state-dir", filepath.Join(dir, "nothing")}, &out, &errb))
}
