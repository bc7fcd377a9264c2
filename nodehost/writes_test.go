package nodehost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// system.run resolves its cwd beneath the workspace with the path policy;
// a refused cwd runs nothing.
func TestSystemRunCwdPolicy(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		require.NoError(t, os.MkdirAll(filepath.Join(ws, "src", "pkg"), 0o700))
		require.NoError(t, os.Symlink(dir, filepath.Join(ws, "escape")))
		require.NoError(t, os.Symlink("src", filepath.Join(ws, "srclink")))
		for _, tc := range []struct {
			name, cwd string
			code      Code
		}{
			{"symlink to outside", "escape", CodeSymlink},
			{"symlink inside", "srclink", CodeSymlink},
			{"below a symlink", "srclink/pkg", CodeSymlink},
			{"a file", "AGENTS.md", CodeNotDirectory},
			{"below a file", "AGENTS.md/x", CodeNotDirectory},
			{"missing", "nope", CodeNotFound},
			{"dotdot", "src/../..", CodeTraversal},
			{"absolute outside", dir, CodeRunDenied},
			{"root", "/", CodeRunDenied},
			{"skill root", filepath.Join(dir, "skills-root", "s1"), CodeRunDenied},
			{"NUL", "src\x00", CodeInvalidRequest},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := call(t, h, "system.run", map[string]any{"command": []string{"touch", "ran"}, "cwd": tc.cwd})
				requireCode(t, err, tc.code)
			})
		}
		for _, p := range []string{filepath.Join(dir, "ran"), filepath.Join(ws, "ran"), filepath.Join(ws, "src", "ran")} {
			_, err := os.Stat(p)
			require.True(t, os.IsNotExist(err), "a refused cwd ran the command (%s)", p)
		}
		out, err := call(t, h, "system.run", map[string]any{"command": []string{"sh", "-c", "pwd; /bin/pwd; touch ran"}, "cwd": "src/pkg"})
		require.NoError(t, err)
		require.Equal(t, true, out["success"], out)
		want := filepath.Join(ws, "src", "pkg")
		require.Equal(t, want+"\n"+want+"\n", out["stdout"])
		require.FileExists(t, filepath.Join(want, "ran"))
		// A request env cannot pose as another working directory.
		out, err = call(t, h, "system.run", map[string]any{"command": []string{"sh", "-c", "echo $PWD"}, "env": map[string]string{"PWD": "/etc"}})
		require.NoError(t, err)
		require.Equal(t, ws+"\n", out["stdout"])
	})
}

// Bindings fail closed, a preflight has no side effects, and long names and
// deep paths write correctly in both resolution modes.
func TestWriteBindingsFailClosed(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "a.md"), []byte("a"), 0o600))
		st, err := call(t, h, "file.stat", map[string]any{"path": "memory/a.md"})
		require.NoError(t, err)
		existing := st["binding"].(map[string]any)

		for _, tc := range []struct {
			name    string
			binding map[string]any
			path    string
			code    Code
		}{
			{"unknown kind", map[string]any{"kind": "whatever", "device": "1", "inode": "2"}, "memory/a.md", CodeInvalidRequest},
			{"empty kind", map[string]any{"device": "1", "inode": "2"}, "memory/a.md", CodeInvalidRequest},
			{"existing without inode", map[string]any{"kind": "existing", "device": "1"}, "memory/a.md", CodeInvalidRequest},
			{"write without anchor", map[string]any{"kind": "write", "anchorDevice": "1", "anchorInode": "2"}, "memory/a.md", CodeInvalidRequest},
			{"existing bound file gone", existing, "memory/gone.md", CodeBindingMismatch},
			{"existing other file", existing, "SOUL.md", CodeBindingMismatch},
			{"write anchored elsewhere", map[string]any{"kind": "write", "anchorPath": filepath.Join(ws, "inputs"), "anchorDevice": "1", "anchorInode": "2"}, "memory/a.md", CodeBindingMismatch},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := call(t, h, "file.write", map[string]any{"path": tc.path, "contentBase64": b64("new"), "expectedBinding": tc.binding})
				requireCode(t, err, tc.code)
			})
		}
		for _, p := range []string{"memory/gone.md", "SOUL.md"} {
			_, err := os.Stat(filepath.Join(ws, p))
			require.True(t, os.IsNotExist(err), "%s was created", p)
		}
		b, _ := os.ReadFile(filepath.Join(ws, "memory", "a.md"))
		require.Equal(t, "a", string(b))
		// Reads take only an existing binding.
		_, err = call(t, h, "file.fetch", map[string]any{"path": "memory/a.md", "expectedBinding": map[string]any{"kind": "odd"}})
		requireCode(t, err, CodeInvalidRequest)
		_, err = call(t, h, "file.fetch", map[string]any{"path": "memory/a.md",
			"expectedBinding": map[string]any{"kind": "write", "anchorPath": ws, "anchorDevice": "1", "anchorInode": "1"}})
		requireCode(t, err, CodeBindingMismatch)
		_, err = call(t, h, "file.write", map[string]any{"path": "memory/a.md", "contentBase64": b64("ok"), "expectedBinding": existing})
		require.NoError(t, err)

		// A preflight of a deep new path creates nothing; its anchor is the
		// deepest existing directory, which the real write checks.
		pre, err := call(t, h, "file.write", map[string]any{"path": "memory/x/y/z/n.md", "contentBase64": b64("n"), "preflightOnly": true})
		require.NoError(t, err)
		_, err = os.Stat(filepath.Join(ws, "memory", "x"))
		require.True(t, os.IsNotExist(err), "the preflight created a directory")
		anchor := pre["binding"].(map[string]any)
		require.Equal(t, filepath.Join(ws, "memory"), anchor["anchorPath"])
		_, err = call(t, h, "file.write", map[string]any{"path": "memory/x/y/z/n.md", "contentBase64": b64("n"), "expectedBinding": anchor})
		require.NoError(t, err)
		b, _ = os.ReadFile(filepath.Join(ws, "memory", "x", "y", "z", "n.md"))
		require.Equal(t, "n", string(b))
		// The anchor is replaced between preflight and write: refused.
		pre, err = call(t, h, "file.write", map[string]any{"path": "inputs/q/f.png", "contentBase64": b64("f"), "preflightOnly": true})
		require.NoError(t, err)
		require.Equal(t, ws, pre["binding"].(map[string]any)["anchorPath"])
		require.NoError(t, os.MkdirAll(filepath.Join(ws, "inputs", "q"), 0o700))
		pre2, err := call(t, h, "file.write", map[string]any{"path": "inputs/q/f.png", "contentBase64": b64("f"), "preflightOnly": true})
		require.NoError(t, err)
		require.NoError(t, os.Rename(filepath.Join(ws, "inputs", "q"), filepath.Join(ws, "inputs", "q-old")))
		require.NoError(t, os.MkdirAll(filepath.Join(ws, "inputs", "q"), 0o700))
		_, err = call(t, h, "file.write", map[string]any{"path": "inputs/q/f.png", "contentBase64": b64("f"), "expectedBinding": pre2["binding"]})
		requireCode(t, err, CodeBindingMismatch)
		_, err = call(t, h, "file.write", map[string]any{"path": "inputs/q/f.png", "contentBase64": b64("f"), "expectedBinding": pre["binding"]})
		require.NoError(t, err, "the workspace root anchor is unchanged")

		// ENOTDIR is NOT_A_DIRECTORY, for reads and writes alike.
		_, err = call(t, h, "file.write", map[string]any{"path": "memory/a.md/x.md", "contentBase64": b64("x")})
		requireCode(t, err, CodeNotDirectory)
		_, err = call(t, h, "file.write", map[string]any{"path": "memory/a.md/x.md", "contentBase64": b64("x"), "preflightOnly": true})
		requireCode(t, err, CodeNotDirectory)
		_, err = call(t, h, "file.fetch", map[string]any{"path": "memory/a.md/x.md"})
		requireCode(t, err, CodeNotDirectory)
	})
}

func TestWriteLongNamesAndDeepPaths(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		for _, n := range []int{200, 233, 234, 240, 254, MaxComponentBytes} {
			name := strings.Repeat("n", n-3) + ".md"
			_, err := call(t, h, "file.write", map[string]any{"path": "memory/" + name, "contentBase64": b64(name[:8])})
			require.NoError(t, err, "a %d-byte name", n)
			b, err := os.ReadFile(filepath.Join(ws, "memory", name))
			require.NoError(t, err)
			require.Equal(t, name[:8], string(b))
		}
		_, err := call(t, h, "file.write", map[string]any{"path": "memory/" + strings.Repeat("n", MaxComponentBytes+1), "contentBase64": b64("x")})
		requireCode(t, err, CodeTooLarge)
		ents, err := os.ReadDir(filepath.Join(ws, "memory"))
		require.NoError(t, err)
		for _, e := range ents {
			require.False(t, strings.HasPrefix(e.Name(), ".oce-tmp-"), "a temporary file was left behind")
		}
		// The deepest path the policy admits (2,000+ components) is created
		// one component at a time (linear in both modes).
		deep := "memory/" + strings.Repeat("d/", (MaxPathBytes-len("memory/")-len("f.md"))/2) + "f.md"
		require.LessOrEqual(t, len(deep), MaxPathBytes)
		_, err = call(t, h, "file.write", map[string]any{"path": deep, "contentBase64": b64("deep")})
		require.NoError(t, err)
		got, err := call(t, h, "file.fetch", map[string]any{"path": deep})
		require.NoError(t, err)
		require.Equal(t, b64("deep"), got["base64"])
	})
}
