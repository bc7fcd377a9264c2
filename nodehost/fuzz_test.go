package nodehost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fuzzFixture is a workspace next to an outside tree that the workspace
// reaches in every way the policy must refuse: symlinks (to a file, to a
// directory, at a directory component), a hard link, a bind mount of an
// outside directory and of an outside file, a FIFO and a socket. fanotify
// watches every outside object for opens (an inode mark, so a hard link or
// the bind mount is caught too).
type fuzzFixture struct {
	dir, ws, outside string
	fan              int
	outsideFiles     []string
}

func newFuzzFixture(t testing.TB) *fuzzFixture {
	dir := t.TempDir()
	x := &fuzzFixture{dir: dir, ws: filepath.Join(dir, "workspace"), outside: filepath.Join(dir, "outside")}
	for _, d := range []string{"memory/sub", "inputs", "skills/s1/state", "memory/mnt"} {
		require.NoError(t, os.MkdirAll(filepath.Join(x.ws, d), 0o700))
	}
	for _, d := range []string{"dir", "bindsrc"} {
		require.NoError(t, os.MkdirAll(filepath.Join(x.outside, d), 0o700))
	}
	for p, c := range map[string]string{"AGENTS.md": "agents", "MEMORY.md": "mem", "memory/a.md": "a", "memory/sub/b.md": "b",
		"skills/s1/SKILL.md": "skill"} {
		require.NoError(t, os.WriteFile(filepath.Join(x.ws, p), []byte(c), 0o600))
	}
	for _, p := range []string{"secret.txt", "hard.txt", "dir/inner.txt", "bindsrc/mounted.txt", "bound.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(x.outside, p), []byte("outside:"+p), 0o600))
		x.outsideFiles = append(x.outsideFiles, filepath.Join(x.outside, p))
	}
	require.NoError(t, unix.Mkfifo(filepath.Join(x.ws, "memory", "pipe.md"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(x.ws, "memory", "bound.md"), nil, 0o600))
	bindMount(t, filepath.Join(x.outside, "bindsrc"), filepath.Join(x.ws, "memory", "mnt"))
	bindMount(t, filepath.Join(x.outside, "bound.txt"), filepath.Join(x.ws, "memory", "bound.md"))
	x.repair(t)

	fan, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	require.NoError(t, err, "fanotify (root)")
	x.fan = fan
	t.Cleanup(func() { unix.Close(fan) })
	mask := uint64(unix.FAN_OPEN | unix.FAN_OPEN_EXEC | unix.FAN_ONDIR | unix.FAN_EVENT_ON_CHILD)
	marks := append([]string{x.outside, filepath.Join(x.outside, "dir"), filepath.Join(x.outside, "bindsrc")}, x.outsideFiles...)
	for _, p := range marks {
		require.NoError(t, unix.FanotifyMark(fan, unix.FAN_MARK_ADD, mask, unix.AT_FDCWD, p), p)
	}
	x.drain()
	return x
}

// repair restores the links a write may legitimately have replaced.
func (x *fuzzFixture) repair(t testing.TB) {
	links := map[string]string{"link.txt": filepath.Join(x.outside, "secret.txt"), "linkdir": x.outside,
		"memory/esc": filepath.Join(x.outside, "dir"), "memory/rel.md": "../../outside/secret.txt"}
	for name, target := range links {
		p := filepath.Join(x.ws, name)
		if cur, err := os.Readlink(p); err != nil || cur != target {
			_ = os.RemoveAll(p)
			require.NoError(t, os.Symlink(target, p))
		}
	}
	hl := filepath.Join(x.ws, "memory", "hl.md")
	var a, b unix.Stat_t
	if unix.Lstat(hl, &a) != nil || unix.Stat(filepath.Join(x.outside, "hard.txt"), &b) != nil || a.Ino != b.Ino {
		_ = os.RemoveAll(hl)
		require.NoError(t, os.Link(filepath.Join(x.outside, "hard.txt"), hl))
	}
}

// drain reads pending fanotify events and returns the paths opened.
func (x *fuzzFixture) drain() []string {
	var opened []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(x.fan, buf)
		if err != nil || n <= 0 {
			return opened
		}
		for off := 0; off+int(unix.FAN_EVENT_METADATA_LEN) <= n; {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if m.Fd >= 0 {
				p, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(m.Fd)))
				opened = append(opened, p)
				unix.Close(int(m.Fd))
			}
			off += int(m.Event_len)
		}
	}
}

// snapshot records the outside tree: names, types, sizes and content.
func (x *fuzzFixture) snapshot(t testing.TB) string {
	var b strings.Builder
	require.NoError(t, filepath.WalkDir(x.outside, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", p, d.Type())
		if d.Type().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(c)
			fmt.Fprintf(&b, " %s", hex.EncodeToString(sum[:8]))
		}
		b.WriteByte('\n')
		return nil
	}))
	return b.String()
}

var fuzzCommands = []string{"file.stat", "file.fetch", "dir.list", "file.write", "workspace.memory"}

// FuzzFileCommands runs (command, params) pairs against a FileOnly node and
// asserts that no object outside the roots is opened (fanotify sees no
// open of any of them), nothing outside changes, and every answer names a
// path inside the roots. Metadata-only O_PATH lookups (how the policy
// inspects a component before refusing it) are not opens to fanotify.
func FuzzFileCommands(f *testing.F) {
	for _, c := range fuzzCommands {
		for _, p := range []string{"link.txt", "linkdir/secret.txt", "memory/esc/inner.txt", "memory/rel.md", "memory/hl.md",
			"memory/mnt/mounted.txt", "memory/mnt", "memory/bound.md", "memory/pipe.md", "memory/sub", "AGENTS.md", "memory/../../outside/secret.txt"} {
			f.Add(c, []byte(fmt.Sprintf(`{"path":%q}`, p)))
		}
	}
	f.Add("file.write", []byte(`{"path":"memory/esc/new.md","contentBase64":"eA=="}`))
	f.Add("file.write", []byte(`{"path":"memory/mnt/new.md","contentBase64":"eA==","preflightOnly":true}`))
	f.Add("file.write", []byte(`{"path":"memory/hl.md","contentBase64":"eA==","expectedSha256":"00"}`))
	f.Add("workspace.memory", []byte(`{"op":"list"}`))
	f.Add("workspace.memory", []byte(`{"op":"read","path":"memory/hl.md"}`))
	f.Add("dir.list", []byte(`{"path":"memory","maxEntries":2,"pageToken":"a.md"}`))
	f.Add("file.fetch", []byte(`{"path":"memory/a.md","expectedBinding":{"kind":"write","anchorPath":"/","anchorDevice":"1","anchorInode":"1"}}`))

	x := newFuzzFixture(f)
	h, err := New(Config{StateDir: filepath.Join(x.dir, "state"), Workspace: x.ws,
		SkillRoots: []string{filepath.Join(x.ws, "skills")}, FileOnly: true})
	require.NoError(f, err)
	before := x.snapshot(f)
	x.drain()
	f.Fuzz(func(t *testing.T, command string, params []byte) {
		if !strings.HasPrefix(command, "file.") && !strings.HasPrefix(command, "dir.") && command != "workspace.memory" {
			command = fuzzCommands[len(command)%len(fuzzCommands)]
		}
		for _, walk := range []bool{false, true} {
			h.policy.openat2 = !walk
			x.repair(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, err := h.Dispatch(ctx, command, params)
			cancel()
			opened := x.drain()
			require.Empty(t, opened, "%s %s (walk=%v) opened outside objects; err=%v", command, params, walk, err)
			require.Equal(t, before, x.snapshot(t), "%s %s changed the outside tree", command, params)
			x.drain()
			var ce *CommandError
			if err != nil {
				require.True(t, errors.As(err, &ce), "an error without a closed code: %v", err)
				continue
			}
			if m, ok := out.(map[string]any); ok {
				if p, ok := m["path"].(string); ok && filepath.IsAbs(p) {
					require.True(t, within(p, x.ws), "result path %q outside the roots", p)
				}
			}
		}
	})
}

// The fixture's outside objects are watched: reading one through the
// fixture's hard link is seen, so the fuzz oracle can fail.
func TestFuzzOracleSeesOutsideOpens(t *testing.T) {
	x := newFuzzFixture(t)
	b, err := os.ReadFile(filepath.Join(x.ws, "memory", "hl.md"))
	require.NoError(t, err)
	require.Equal(t, "outside:hard.txt", string(b))
	b, err = os.ReadFile(filepath.Join(x.ws, "memory", "mnt", "mounted.txt"))
	require.NoError(t, err)
	require.Equal(t, "outside:bindsrc/mounted.txt", string(b))
	opened := x.drain()
	sort.Strings(opened)
	require.Equal(t, []string{filepath.Join(x.ws, "memory", "hl.md"), filepath.Join(x.ws, "memory", "mnt", "mounted.txt")}, opened)
}
