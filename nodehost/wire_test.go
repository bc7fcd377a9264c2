package nodehost

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// wireNormal replaces what differs between runs in a payloadJSON (the
// device and inode numbers of bindings, modification times, the size of a
// directory, which depends on the file system) by placeholders, keeping
// everything else byte for byte; each replaced number must be a decimal
// integer.
var wireNormal = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`"(device|inode|anchorDevice|anchorInode)":"[0-9]+"`), `"$1":"N"`},
	{regexp.MustCompile(`"(mtime|mtimeMs)":[1-9][0-9]*`), `"$1":T`},
	{regexp.MustCompile(`"size":[0-9]+,"type":"directory"`), `"size":D,"type":"directory"`},
	{regexp.MustCompile(`(\{"isDir":true,"mtime":T,"name":"[^"]*","path":"[^"]*","size":)[0-9]+\}`), `${1}D}`},
}

// TestFileCommandsWire pins the payloadJSON of every result shape of the
// file commands (stat, fetch, dir.list, write; preflight and real; every
// optional field present and absent) byte for byte against
// testdata/golden/file-commands.txt (go test -run TestFileCommandsWire
// -update rewrites it).
func TestFileCommandsWire(t *testing.T) {
	h, dir := newTestHost(t, false)
	ws := filepath.Join(dir, "workspace")
	require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "a.md"), []byte("alpha"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "b.json"), []byte(`{"b":1}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "noext"), nil, 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "memory", "sub"), 0o700))
	require.NoError(t, os.Symlink("a.md", filepath.Join(ws, "memory", "link.md")))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "empty"), 0o700))

	var golden strings.Builder
	run := func(name, cmd string, params map[string]any) map[string]any {
		t.Helper()
		b, err := json.Marshal(params)
		require.NoError(t, err)
		out, err := h.Dispatch(context.Background(), cmd, b)
		if err != nil {
			code, msg := codeOf(err)
			fmt.Fprintf(&golden, "%s: error %s %s\n", name, code, msg)
			return nil
		}
		s, err := marshalResult(out)
		require.NoError(t, err)
		norm := strings.ReplaceAll(s, dir, "$DIR")
		for _, n := range wireNormal {
			norm = n.re.ReplaceAllString(norm, n.repl)
		}
		fmt.Fprintf(&golden, "%s: %s\n", name, norm)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		return m
	}

	st := run("stat file", "file.stat", map[string]any{"path": "AGENTS.md"})
	run("stat directory", "file.stat", map[string]any{"path": "memory", "preflightOnly": true})
	run("stat bound", "file.stat", map[string]any{"path": "AGENTS.md", "expectedBinding": st["binding"],
		"expectedCanonicalPath": filepath.Join(ws, "AGENTS.md")})
	run("fetch preflight", "file.fetch", map[string]any{"path": "AGENTS.md", "preflightOnly": true})
	run("fetch", "file.fetch", map[string]any{"path": "AGENTS.md", "expectedBinding": st["binding"]})
	run("fetch json", "file.fetch", map[string]any{"path": "memory/b.json", "maxBytes": 100})
	run("fetch empty", "file.fetch", map[string]any{"path": "memory/noext"})
	run("fetch too large", "file.fetch", map[string]any{"path": "AGENTS.md", "maxBytes": 2})
	run("list", "dir.list", map[string]any{"path": "memory"})
	page := run("list page", "dir.list", map[string]any{"path": "memory", "maxEntries": 2})
	run("list next page", "dir.list", map[string]any{"path": "memory", "maxEntries": 2, "pageToken": page["nextPageToken"]})
	run("list past the end", "dir.list", map[string]any{"path": "memory", "pageToken": "zzz"})
	run("list empty", "dir.list", map[string]any{"path": "empty"})
	run("list a file", "dir.list", map[string]any{"path": "AGENTS.md"})
	pre := run("write preflight new", "file.write", map[string]any{"path": "memory/new/deep/x.md", "contentBase64": b64("x"),
		"preflightOnly": true})
	run("write new", "file.write", map[string]any{"path": "memory/new/deep/x.md", "contentBase64": b64("x"),
		"expectedBinding": pre["binding"]})
	run("write preflight new doc", "file.write", map[string]any{"path": "SOUL.md", "contentBase64": b64("soul"),
		"preflightOnly": true, "expectedCanonicalPath": filepath.Join(ws, "SOUL.md")})
	run("write not writable", "file.write", map[string]any{"path": "code.go", "contentBase64": b64("x")})
	run("write preflight existing", "file.write", map[string]any{"path": "AGENTS.md", "contentBase64": "",
		"preflightOnly": true})
	run("write overwrite", "file.write", map[string]any{"path": "AGENTS.md", "contentBase64": b64("# v2\n"),
		"expectedBinding": st["binding"]})
	run("write stale sha", "file.write", map[string]any{"path": "AGENTS.md", "contentBase64": b64("v3"),
		"expectedSha256": "00"})

	file := filepath.Join("testdata", "golden", "file-commands.txt")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte(golden.String()), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, string(want), golden.String())
}
