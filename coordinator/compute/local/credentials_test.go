package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

func TestSecretDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k"), []byte(" sk-1\n"), 0o600))
	creds := SecretDir(dir)
	for _, tc := range []struct {
		mode, method, ref, key string
		err                    bool
	}{
		{state.ModeEmbedded, "api_key", "local:k", contract.SecretModelAPIKey, false},
		{state.ModeDedicated, "api_key", "k", contract.SecretOpenAIAPIKey, false},
		{state.ModeDedicated, "codex_pat", "local:k", contract.SecretCodexAccessToken, false},
		{state.ModeDedicated, "oauth", "local:k", "", true},
		{state.ModeEmbedded, "api_key", "local:../k", "", true},
		{state.ModeEmbedded, "api_key", "secret://ns/name#key", "", true},
		{state.ModeEmbedded, "api_key", "local:missing", "", true},
	} {
		rev := state.Revision{Mode: tc.mode, HarnessAuth: &state.HarnessAuth{Method: tc.method, SourceRef: tc.ref}}
		got, err := creds.Resolve(t.Context(), rev)
		if tc.err {
			require.Error(t, err, tc.ref)
			require.NotContains(t, err.Error(), "sk-1", "errors never carry the secret")
			continue
		}
		require.NoError(t, err, tc.ref)
		require.Equal(t, map[string][]byte{tc.key: []byte("sk-1")}, got)
	}
}

func FuzzSecretDirRef(f *testing.F) {
	root := f.TempDir()
	dir := filepath.Join(root, "secrets")
	require.NoError(f, os.MkdirAll(dir, 0o700))
	require.NoError(f, os.WriteFile(filepath.Join(dir, "ok"), []byte("in"), 0o600))
	require.NoError(f, os.WriteFile(filepath.Join(root, "outside"), []byte("out"), 0o600))
	for _, s := range []string{"local:ok", "ok", "local:../outside", "../outside", "local:", "local:/etc/passwd"} {
		f.Add(s)
	}
	creds := SecretDir(dir)
	f.Fuzz(func(t *testing.T, ref string) {
		got, err := creds.Resolve(t.Context(), state.Revision{Mode: state.ModeEmbedded,
			HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: ref}})
		if err != nil {
			return
		}
		require.Equal(t, "in", string(got[contract.SecretModelAPIKey]), "only files inside the secrets dir resolve (ref %q)", ref)
		require.False(t, strings.Contains(ref, "/"))
	})
}
