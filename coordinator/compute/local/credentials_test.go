package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// TestCredentialFiles: a source's value is a 0600 file in its Namespace's
// own 0700 directory, replaced by a rotation and removed by a withdrawal;
// a revision's reference resolves only among its own Namespace's files, to
// the secret file its topology and method need.
func TestCredentialFiles(t *testing.T) {
	root := t.TempDir()
	f := CredentialFiles{Dir: filepath.Join(root, "credentials"), ImportDir: filepath.Join(root, "secrets")}
	team, other := state.Namespace{ID: "ns-team", Name: "team"}, state.Namespace{ID: "ns-other", Name: "other"}
	ctx := t.Context()
	require.NoError(t, f.PutCredential(ctx, team, "model", 1, map[string][]byte{"value": []byte("sk-1")}))
	require.NoError(t, f.PutCredential(ctx, team, "model", 2, map[string][]byte{"value": []byte("sk-2")}), "a rotation replaces it")
	require.NoError(t, f.PutCredential(ctx, team, "pair", 1, map[string][]byte{"a": []byte("sk-a"), "b": []byte("sk-b")}))
	require.NoError(t, f.PutCredential(ctx, other, "theirs", 1, map[string][]byte{"value": []byte("sk-other")}))
	for _, p := range []string{f.Dir, filepath.Join(f.Dir, team.ID)} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), p)
	}
	st, err := os.Stat(filepath.Join(f.Dir, team.ID, "model"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	for _, tc := range []struct {
		mode, method, ref, key, value string
	}{
		{state.ModeEmbedded, "api_key", "credential:model", contract.SecretModelAPIKey, "sk-2"},
		{state.ModeEmbedded, "api_key", "local:model", contract.SecretModelAPIKey, "sk-2"},
		{state.ModeDedicated, "api_key", "credential:team/pair#a", contract.SecretOpenAIAPIKey, "sk-a"},
		{state.ModeDedicated, "codex_pat", "secret:pair#b", contract.SecretCodexAccessToken, "sk-b"},
		{state.ModeDedicated, "oauth", "credential:model", "", ""},
		{state.ModeEmbedded, "api_key", "credential:pair", "", ""},         // two keys: the reference names one
		{state.ModeEmbedded, "api_key", "credential:pair#c", "", ""},       // no such key
		{state.ModeEmbedded, "api_key", "credential:theirs", "", ""},       // another Namespace's source
		{state.ModeEmbedded, "api_key", "credential:other/theirs", "", ""}, // qualified: still only team's files
		{state.ModeEmbedded, "api_key", "local:../model", "", ""},
		{state.ModeEmbedded, "api_key", "model", "", ""},
	} {
		rev := state.Revision{NamespaceID: team.ID, Mode: tc.mode, HarnessAuth: &state.HarnessAuth{Method: tc.method, SourceRef: tc.ref}}
		got, err := f.Resolve(ctx, rev)
		if tc.key == "" {
			require.Error(t, err, tc.ref)
			require.NotContains(t, err.Error(), "sk-", "errors never carry a value")
			continue
		}
		require.NoError(t, err, tc.ref)
		require.Equal(t, map[string][]byte{tc.key: []byte(tc.value)}, got, tc.ref)
	}

	require.NoError(t, f.DeleteCredential(ctx, team, "model"))
	require.NoError(t, f.DeleteCredential(ctx, team, "model"), "withdrawing twice is no error")
	_, err = f.Resolve(ctx, state.Revision{NamespaceID: team.ID, Mode: state.ModeEmbedded,
		HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: "credential:model"}})
	require.ErrorIs(t, err, compute.ErrNoSource)
	require.NoError(t, f.DeleteNamespace(team.ID))
	_, err = os.Stat(filepath.Join(f.Dir, team.ID))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(f.Dir, other.ID, "theirs"))
	require.NoError(t, err, "another Namespace's sources stay")
}

// TestCredentialFilesRegister: a file of the shared secrets directory of
// earlier releases is read once for a registration (key "value", trimmed);
// anything else is refused with the closed errors.
func TestCredentialFilesRegister(t *testing.T) {
	root := t.TempDir()
	f := CredentialFiles{Dir: filepath.Join(root, "credentials"), ImportDir: filepath.Join(root, "secrets")}
	require.NoError(t, os.MkdirAll(f.ImportDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(f.ImportDir, "demo-key"), []byte(" sk-demo\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(f.ImportDir, "open"), []byte("sk-open"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(f.ImportDir, "demo-key"), filepath.Join(f.ImportDir, "link")))
	ns := state.Namespace{ID: "ns-team", Name: "team"}
	got, err := f.ReadLocation(t.Context(), ns, "local:demo-key")
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{"value": []byte("sk-demo")}, got)
	for from, want := range map[string]error{
		"local:missing": compute.ErrLocationNotFound, "local:../x": compute.ErrLocationInvalid, "demo-key": compute.ErrLocationInvalid,
		"secret:ns/x#k": compute.ErrLocationInvalid, "local:link": compute.ErrLocationRefused,
	} {
		_, err := f.ReadLocation(t.Context(), ns, from)
		require.ErrorIs(t, err, want, from)
	}
	_, err = f.ReadLocation(t.Context(), ns, "local:open")
	require.ErrorContains(t, err, "0600", "a file others may read is refused")
}

// FuzzCredentialFilesRef: whatever the reference, only a file of the
// revision's own Namespace resolves.
func FuzzCredentialFilesRef(f *testing.F) {
	root := f.TempDir()
	files := CredentialFiles{Dir: filepath.Join(root, "credentials")}
	own, other := state.Namespace{ID: "own", Name: "own"}, state.Namespace{ID: "other", Name: "other"}
	require.NoError(f, files.PutCredential(f.Context(), own, "ok", 1, map[string][]byte{"value": []byte("in")}))
	require.NoError(f, files.PutCredential(f.Context(), other, "theirs", 1, map[string][]byte{"value": []byte("out")}))
	require.NoError(f, os.WriteFile(filepath.Join(root, "outside"), []byte("out"), 0o600))
	for _, s := range []string{"credential:ok", "local:ok", "credential:theirs", "credential:other/theirs",
		"local:../outside", "secret://other/theirs#value", "local:", "credential:../../outside"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		got, err := files.Resolve(t.Context(), state.Revision{NamespaceID: own.ID, Mode: state.ModeEmbedded,
			HarnessAuth: &state.HarnessAuth{Method: "api_key", SourceRef: ref}})
		if err != nil {
			require.False(t, errors.Is(err, os.ErrPermission), "%q", ref)
			return
		}
		require.Equal(t, "in", string(got[contract.SecretModelAPIKey]), "only the Namespace's own sources resolve (ref %q)", ref)
		require.False(t, strings.Contains(ref, ".."))
	})
}
