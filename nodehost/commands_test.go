package nodehost

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFileCommandsTwoPhase(t *testing.T) {
	h, dir := newTestHost(t, false)
	ws := filepath.Join(dir, "workspace")
	path := filepath.Join(ws, "AGENTS.md")

	st, err := call(t, h, "file.stat", map[string]any{"path": path, "preflightOnly": true})
	require.NoError(t, err)
	require.Equal(t, "file", st["type"])
	binding := st["binding"].(map[string]any)
	require.Equal(t, "existing", binding["kind"])

	pre, err := call(t, h, "file.fetch", map[string]any{"path": path, "preflightOnly": true})
	require.NoError(t, err)
	require.NotContains(t, pre, "base64")

	got, err := call(t, h, "file.fetch", map[string]any{"path": path, "followSymlinks": false,
		"expectedCanonicalPath": path, "expectedBinding": binding})
	require.NoError(t, err)
	data, _ := base64.StdEncoding.DecodeString(got["base64"].(string))
	require.Equal(t, "# agents\n", string(data))
	sum := sha256.Sum256(data)
	require.Equal(t, hex.EncodeToString(sum[:]), got["sha256"])

	// the file is replaced between preflight and fetch → binding mismatch
	require.NoError(t, os.Rename(path, path+".old"))
	require.NoError(t, os.WriteFile(path, []byte("swapped"), 0o600))
	_, err = call(t, h, "file.fetch", map[string]any{"path": path, "expectedCanonicalPath": path, "expectedBinding": binding})
	requireCode(t, err, CodeBindingMismatch)
	_, err = call(t, h, "file.fetch", map[string]any{"path": path, "expectedCanonicalPath": path + "x"})
	requireCode(t, err, CodeCanonicalMismatch)

	// write: preflight writes nothing; expectedSha256 guards lost updates
	w, err := call(t, h, "file.write", map[string]any{"path": "SOUL.md", "contentBase64": b64("soul"), "preflightOnly": true})
	require.NoError(t, err)
	require.Equal(t, false, w["overwritten"])
	_, err = os.Stat(filepath.Join(ws, "SOUL.md"))
	require.True(t, os.IsNotExist(err))
	wb := w["binding"].(map[string]any)
	require.Equal(t, "write", wb["kind"])
	_, err = call(t, h, "file.write", map[string]any{"path": "SOUL.md", "contentBase64": b64("soul"), "expectedBinding": wb})
	require.NoError(t, err)
	_, err = call(t, h, "file.write", map[string]any{"path": "SOUL.md", "contentBase64": b64("v2"), "expectedSha256": "00"})
	requireCode(t, err, CodeSHA256Mismatch)
	s1 := sha256.Sum256([]byte("soul"))
	out, err := call(t, h, "file.write", map[string]any{"path": "SOUL.md", "contentBase64": b64("v2"), "expectedSha256": hex.EncodeToString(s1[:])})
	require.NoError(t, err)
	require.Equal(t, true, out["overwritten"])
	b, _ := os.ReadFile(filepath.Join(ws, "SOUL.md"))
	require.Equal(t, "v2", string(b))
	fi, _ := os.Stat(filepath.Join(ws, "SOUL.md"))
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestDirListPaging(t *testing.T) {
	h, dir := newTestHost(t, false)
	ws := filepath.Join(dir, "workspace")
	for _, n := range []string{"a.md", "b.md", "c.md"} {
		require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", n), []byte(n), 0o600))
	}
	page, err := call(t, h, "dir.list", map[string]any{"path": "memory", "maxEntries": 2})
	require.NoError(t, err)
	require.Equal(t, true, page["truncated"])
	require.Len(t, page["entries"], 2)
	rest, err := call(t, h, "dir.list", map[string]any{"path": "memory", "maxEntries": 2, "pageToken": page["nextPageToken"]})
	require.NoError(t, err)
	require.Len(t, rest["entries"], 1)
	require.Equal(t, "c.md", rest["entries"].([]any)[0].(map[string]any)["name"])
	_, err = call(t, h, "dir.list", map[string]any{"path": "AGENTS.md"})
	require.Error(t, err)
}

func TestSystemRunAndWhich(t *testing.T) {
	h, dir := newTestHost(t, false)
	t.Setenv("OCE_TEST_SECRET_TOKEN", "planted-secret-value")
	h.baseEnv = sanitizedEnv(os.Environ())
	out, err := call(t, h, "system.run", map[string]any{"command": []string{"sh", "-c", "pwd; env"}})
	require.NoError(t, err)
	require.Equal(t, true, out["success"])
	require.Contains(t, out["stdout"], filepath.Join(dir, "workspace"))
	require.NotContains(t, out["stdout"], "planted-secret-value")
	out, err = call(t, h, "system.run", map[string]any{"command": []string{"sh", "-c", "exit 7"}})
	require.NoError(t, err)
	require.EqualValues(t, 7, out["exitCode"])
	out, err = call(t, h, "system.run", map[string]any{"command": []string{"sleep", "10"}, "timeoutMs": 100})
	require.NoError(t, err)
	require.Equal(t, true, out["timedOut"])
	_, err = call(t, h, "system.run", map[string]any{"command": []string{"true"}, "cwd": "/"})
	requireCode(t, err, CodeRunDenied)
	_, err = call(t, h, "system.run", map[string]any{"command": []string{}})
	requireCode(t, err, CodeInvalidRequest)
	w, err := call(t, h, "system.which", map[string]any{"bins": []string{"sh", "definitely-not-a-binary", "../x"}})
	require.NoError(t, err)
	bins := w["bins"].(map[string]any)
	require.Contains(t, bins, "sh")
	require.Len(t, bins, 1)
	_, err = call(t, h, "no.such.command", map[string]any{})
	requireCode(t, err, CodeUnavailable)
}

func TestWorkspaceMemory(t *testing.T) {
	h, dir := newTestHost(t, false)
	ws := filepath.Join(dir, "workspace")
	require.NoError(t, os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("root memory"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "memory", "2026"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "2026", "day.md"), []byte("day"), 0o600))
	l, err := call(t, h, "workspace.memory", map[string]any{"op": "list"})
	require.NoError(t, err)
	require.Len(t, l["files"], 2)
	r, err := call(t, h, "workspace.memory", map[string]any{"op": "read", "path": "memory/2026/day.md"})
	require.NoError(t, err)
	data, _ := base64.StdEncoding.DecodeString(r["base64"].(string))
	require.Equal(t, "day", string(data))
	_, err = call(t, h, "workspace.memory", map[string]any{"op": "read", "path": "AGENTS.md"})
	requireCode(t, err, CodeOutsideRoot)
	_, err = call(t, h, "workspace.memory", map[string]any{"op": "delete"})
	requireCode(t, err, CodeInvalidRequest)
}
