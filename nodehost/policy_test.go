package nodehost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// newTestHost builds a host over a temp workspace; walk forces the
// O_NOFOLLOW walk instead of openat2.
func newTestHost(t *testing.T, walk bool) (*Host, string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	skills := filepath.Join(dir, "skills-root")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "memory"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(skills, "s1"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("# agents\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "code.go"), []byte("package x\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(skills, "s1", "SKILL.md"), []byte("skill"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside"), 0o600))
	h, err := New(Config{StateDir: filepath.Join(dir, "state"), Workspace: ws, SkillRoots: []string{skills}})
	require.NoError(t, err)
	if walk {
		h.policy.openat2 = false
	}
	return h, dir
}

func call(t *testing.T, h *Host, cmd string, params any) (map[string]any, error) {
	t.Helper()
	b, err := json.Marshal(params)
	require.NoError(t, err)
	out, err := h.Dispatch(context.Background(), cmd, b)
	if err != nil {
		return nil, err
	}
	s, err := marshalResult(out)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m, nil
}

func requireCode(t *testing.T, err error, code Code) {
	t.Helper()
	require.Error(t, err)
	got, _ := codeOf(err)
	require.Equal(t, code, got, "error: %v", err)
}

func forBothResolvers(t *testing.T, f func(t *testing.T, walk bool)) {
	t.Run("openat2", func(t *testing.T) { f(t, false) })
	t.Run("nofollow-walk", func(t *testing.T) { f(t, true) })
}

func TestPathPolicyTable(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		require.NoError(t, os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(ws, "link.txt")))
		require.NoError(t, os.Symlink(dir, filepath.Join(ws, "linkdir")))
		for _, tc := range []struct {
			name, cmd string
			params    any
			code      Code // "" = ok
		}{
			{"read workspace file", "file.fetch", map[string]any{"path": filepath.Join(ws, "AGENTS.md")}, ""},
			{"read relative path", "file.fetch", map[string]any{"path": "code.go"}, ""},
			{"read skill root", "file.fetch", map[string]any{"path": filepath.Join(dir, "skills-root", "s1", "SKILL.md")}, ""},
			{"dotdot refused", "file.fetch", map[string]any{"path": ws + "/../secret.txt"}, CodeTraversal},
			{"relative dotdot refused", "file.stat", map[string]any{"path": "memory/../../secret.txt"}, CodeTraversal},
			{"absolute outside roots", "file.fetch", map[string]any{"path": filepath.Join(dir, "secret.txt")}, CodeOutsideRoot},
			{"prefix sibling is outside", "file.stat", map[string]any{"path": ws + "2/x"}, CodeOutsideRoot},
			{"NUL byte", "file.stat", map[string]any{"path": "AGENTS.md\x00x"}, CodeInvalidRequest},
			{"symlink leaf not followed", "file.fetch", map[string]any{"path": "link.txt"}, CodeSymlink},
			{"symlink dir not followed", "file.fetch", map[string]any{"path": "linkdir/secret.txt"}, CodeSymlink},
			{"long component", "file.stat", map[string]any{"path": strings.Repeat("a", 300)}, CodeTooLarge},
			{"long path", "file.stat", map[string]any{"path": strings.Repeat("a/", 2100)}, CodeTooLarge},
			{"odd but legal name", "file.stat", map[string]any{"path": "memory/ünï cödé -- $(x).md"}, CodeNotFound},
			{"missing file", "file.stat", map[string]any{"path": "nope.md"}, CodeNotFound},
			{"unknown field refused", "file.stat", map[string]any{"path": "AGENTS.md", "access": 1}, CodeInvalidRequest},
			{"write agents doc", "file.write", map[string]any{"path": "AGENTS.md", "contentBase64": b64("new")}, ""},
			{"write memory", "file.write", map[string]any{"path": "memory/2026/notes.md", "contentBase64": b64("m")}, ""},
			{"write staged input", "file.write", map[string]any{"path": "inputs/a.png", "contentBase64": b64("i")}, ""},
			{"write skill state", "file.write", map[string]any{"path": "skills/s1/state/x.json", "contentBase64": b64("{}")}, ""},
			{"write code refused", "file.write", map[string]any{"path": "code.go", "contentBase64": b64("x")}, CodeNotWritable},
			{"write skill source refused", "file.write", map[string]any{"path": "skills/s1/SKILL.md", "contentBase64": b64("x")}, CodeNotWritable},
			{"write outside refused", "file.write", map[string]any{"path": filepath.Join(dir, "secret.txt"), "contentBase64": b64("x")}, CodeNotWritable},
			{"write into skill root refused", "file.write", map[string]any{"path": filepath.Join(dir, "skills-root", "s1", "SKILL.md"), "contentBase64": b64("x")}, CodeNotWritable},
			{"write through symlinked dir refused", "file.write", map[string]any{"path": "memory/../linkdir/x", "contentBase64": b64("x")}, CodeTraversal},
			{"write oversized", "file.write", map[string]any{"path": "memory/big.md", "contentBase64": strings.Repeat("A", (MaxWriteBytes/3+2)*4)}, CodeTooLarge},
			{"write bad base64", "file.write", map[string]any{"path": "memory/x.md", "contentBase64": "!!"}, CodeInvalidRequest},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := call(t, h, tc.cmd, tc.params)
				if tc.code == "" {
					require.NoError(t, err)
				} else {
					requireCode(t, err, tc.code)
				}
			})
		}
		// the secret outside was never touched
		b, err := os.ReadFile(filepath.Join(dir, "secret.txt"))
		require.NoError(t, err)
		require.Equal(t, "outside", string(b))
	})
}

func TestWriteRefusesSymlinkTarget(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		require.NoError(t, os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(ws, "memory", "evil.md")))
		require.NoError(t, os.Symlink(dir, filepath.Join(ws, "memory", "escape")))
		_, err := call(t, h, "file.write", map[string]any{"path": "memory/evil.md", "contentBase64": b64("pwned")})
		requireCode(t, err, CodeSymlink)
		_, err = call(t, h, "file.write", map[string]any{"path": "memory/escape/x.md", "contentBase64": b64("pwned")})
		requireCode(t, err, CodeSymlink)
		b, _ := os.ReadFile(filepath.Join(dir, "secret.txt"))
		require.Equal(t, "outside", string(b))
		_, err = os.Stat(filepath.Join(dir, "x.md"))
		require.True(t, os.IsNotExist(err))
	})
}

// A symlink swapped in and out of a directory component while reads race
// never yields the outside file's content.
func TestSymlinkSwapRacingReads(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		real := filepath.Join(ws, "memory", "d")
		require.NoError(t, os.MkdirAll(real, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(real, "secret.txt"), []byte("inside"), 0o600))
		outside := filepath.Join(dir, "outdir")
		require.NoError(t, os.MkdirAll(outside, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o600))
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			parked := real + ".parked"
			for i := 0; i < 2000 && !stop.Load(); i++ {
				_ = os.Rename(real, parked)
				_ = os.Symlink(outside, real)
				_ = os.Remove(real)
				_ = os.Rename(parked, real)
			}
		}()
		leaks, oks := 0, 0
		for i := 0; i < 2000; i++ {
			m, err := call(t, h, "file.fetch", map[string]any{"path": "memory/d/secret.txt"})
			if err != nil {
				code, _ := codeOf(err)
				// NOT_A_DIRECTORY: the walk met the symlink, and by the time it
				// looked again the directory was back.
				require.Contains(t, []Code{CodeSymlink, CodeNotFound, CodeNotDirectory}, code)
				continue
			}
			data, _ := base64.StdEncoding.DecodeString(m["base64"].(string))
			if string(data) == "outside" {
				leaks++
			}
			oks++
		}
		stop.Store(true)
		wg.Wait()
		require.Zero(t, leaks, "a read followed the swapped-in symlink")
		t.Logf("%d of 2000 racing reads succeeded", oks)
		// with the real directory back in place the same read succeeds
		m, err := call(t, h, "file.fetch", map[string]any{"path": "memory/d/secret.txt"})
		require.NoError(t, err)
		data, _ := base64.StdEncoding.DecodeString(m["base64"].(string))
		require.Equal(t, "inside", string(data))
	})
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
