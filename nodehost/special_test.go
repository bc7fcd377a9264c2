package nodehost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// mkSpecial creates the special files the tests serve: a FIFO, a socket, a
// character and a block device (root may mknod) and a symlink.
func mkSpecial(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "pipe.md"), 0o600))
	require.NoError(t, unix.Mknod(filepath.Join(dir, "null.md"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	require.NoError(t, unix.Mknod(filepath.Join(dir, "loop.md"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Bind(sock, &unix.SockaddrUnix{Name: filepath.Join(dir, "sock.md")}))
	t.Cleanup(func() { unix.Close(sock) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "real.md"), []byte("real"), 0o600))
	require.NoError(t, os.Symlink("real.md", filepath.Join(dir, "link.md")))
}

// Only regular files and directories are served: the type is decided on an
// O_PATH descriptor before anything that could block, for every command.
func TestSpecialFilesRefused(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		mem := filepath.Join(dir, "workspace", "memory")
		mkSpecial(t, mem)
		sha := "0000000000000000000000000000000000000000000000000000000000000000"
		for _, name := range []string{"pipe.md", "null.md", "loop.md", "sock.md", "link.md"} {
			p := "memory/" + name
			notFile, notDir := CodeNotFile, CodeNotDirectory
			if name == "link.md" {
				notFile, notDir = CodeSymlink, CodeSymlink
			}
			for _, tc := range []struct {
				cmd    string
				params map[string]any
				code   Code
			}{
				{"file.stat", map[string]any{"path": p}, notFile},
				{"file.stat", map[string]any{"path": p, "preflightOnly": true}, notFile},
				{"file.fetch", map[string]any{"path": p}, notFile},
				{"file.fetch", map[string]any{"path": p, "preflightOnly": true}, notFile},
				{"dir.list", map[string]any{"path": p}, notDir},
				{"workspace.memory", map[string]any{"op": "read", "path": p}, notFile},
				{"file.write", map[string]any{"path": p, "contentBase64": b64("x")}, notFile},
				{"file.write", map[string]any{"path": p, "contentBase64": b64("x"), "expectedSha256": sha}, notFile},
				{"file.write", map[string]any{"path": p, "contentBase64": b64("x"), "preflightOnly": true}, notFile},
			} {
				t.Run(name+"/"+tc.cmd, func(t *testing.T) {
					_, err := call(t, h, tc.cmd, tc.params)
					requireCode(t, err, tc.code)
				})
			}
		}
		// The special files are left as they were.
		for name, typ := range map[string]uint32{"pipe.md": unix.S_IFIFO, "null.md": unix.S_IFCHR, "loop.md": unix.S_IFBLK,
			"sock.md": unix.S_IFSOCK, "link.md": unix.S_IFLNK} {
			var st unix.Stat_t
			require.NoError(t, unix.Lstat(filepath.Join(mem, name), &st))
			require.Equal(t, typ, st.Mode&unix.S_IFMT, name)
		}
		// Listings name only what is served; Memory lists only real.md.
		l, err := call(t, h, "dir.list", map[string]any{"path": "memory"})
		require.NoError(t, err)
		var names []string
		for _, e := range l["entries"].([]any) {
			names = append(names, e.(map[string]any)["name"].(string))
		}
		require.Equal(t, []string{"link.md", "real.md"}, names)
		m, err := call(t, h, "workspace.memory", map[string]any{"op": "list"})
		require.NoError(t, err)
		require.Len(t, m["files"], 1)
		require.Equal(t, "memory/real.md", m["files"].([]any)[0].(map[string]any)["path"])
	})
}

// file.stat reports the real type of the final component.
func TestStatReportsRealType(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		require.NoError(t, os.Symlink("memory", filepath.Join(ws, "memlink")))
		for _, tc := range []struct {
			path, typ string
			code      Code
		}{
			{"AGENTS.md", "file", ""},
			{"memory", "directory", ""},
			{"", "", CodeInvalidRequest},
			{ws, "directory", ""},
			{"memlink", "", CodeSymlink},
			{"memlink/x", "", CodeSymlink},
			{"AGENTS.md/x", "", CodeNotDirectory},
		} {
			t.Run(tc.path, func(t *testing.T) {
				st, err := call(t, h, "file.stat", map[string]any{"path": tc.path})
				if tc.code != "" {
					requireCode(t, err, tc.code)
					return
				}
				require.NoError(t, err)
				require.Equal(t, tc.typ, st["type"])
			})
		}
	})
}

// A regular file with more than one link may be an outside file linked in:
// its content is refused for fetch and Memory reads; a write replaces the
// name and leaves the other file alone.
func TestHardLinksRefused(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		require.NoError(t, os.Link(filepath.Join(dir, "secret.txt"), filepath.Join(ws, "memory", "linked.md")))
		require.NoError(t, os.Link(filepath.Join(dir, "secret.txt"), filepath.Join(ws, "linked.txt")))
		for _, tc := range []struct {
			cmd    string
			params map[string]any
			code   Code
		}{
			{"file.fetch", map[string]any{"path": "linked.txt"}, CodeHardLink},
			{"file.fetch", map[string]any{"path": "memory/linked.md", "preflightOnly": true}, CodeHardLink},
			{"workspace.memory", map[string]any{"op": "read", "path": "memory/linked.md"}, CodeHardLink},
			{"file.write", map[string]any{"path": "memory/linked.md", "contentBase64": b64("x"), "expectedSha256": strings.Repeat("0", 64)}, CodeHardLink},
			{"file.stat", map[string]any{"path": "linked.txt"}, ""}, // metadata only
		} {
			t.Run(tc.cmd, func(t *testing.T) {
				_, err := call(t, h, tc.cmd, tc.params)
				if tc.code == "" {
					require.NoError(t, err)
					return
				}
				requireCode(t, err, tc.code)
			})
		}
		m, err := call(t, h, "workspace.memory", map[string]any{"op": "list"})
		require.NoError(t, err)
		require.Empty(t, m["files"])
		_, err = call(t, h, "file.write", map[string]any{"path": "memory/linked.md", "contentBase64": b64("mine")})
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, "secret.txt"))
		require.NoError(t, err)
		require.Equal(t, "outside", string(b))
		r, err := call(t, h, "workspace.memory", map[string]any{"op": "read", "path": "memory/linked.md"})
		require.NoError(t, err)
		require.Equal(t, b64("mine"), r["base64"])
	})
}

// bindMount mounts src on dst in the test binary's private mount namespace
// (netns.Main re-executes it there with every mount made private) and
// unmounts it when the test ends.
func bindMount(t testing.TB, src, dst string) {
	t.Helper()
	require.Equal(t, "1", os.Getenv("OCE_NETNS_ISOLATED"), "bind mounts need the private mount namespace of netns.Main")
	require.NoError(t, unix.Mount(src, dst, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
}

// Resolution never crosses a mount point: a bind mount inside the
// workspace (of a directory or a file outside it) is refused by every
// command, and by system.run's cwd.
func TestMountPointsNotCrossed(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		ws := filepath.Join(dir, "workspace")
		outside := filepath.Join(dir, "outdir")
		require.NoError(t, os.MkdirAll(filepath.Join(outside, "deeper"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.md"), []byte("outside"), 0o600))
		require.NoError(t, os.MkdirAll(filepath.Join(ws, "memory", "mnt"), 0o700))
		bindMount(t, outside, filepath.Join(ws, "memory", "mnt"))
		require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "bound.md"), nil, 0o600))
		bindMount(t, filepath.Join(dir, "secret.txt"), filepath.Join(ws, "memory", "bound.md"))
		h.cfg.FileOnly = false
		for _, tc := range []struct {
			cmd    string
			params map[string]any
			code   Code
		}{
			{"file.fetch", map[string]any{"path": "memory/mnt/secret.md"}, CodeOutsideRoot},
			{"file.fetch", map[string]any{"path": "memory/bound.md"}, CodeOutsideRoot},
			{"file.stat", map[string]any{"path": "memory/mnt"}, CodeOutsideRoot},
			{"file.stat", map[string]any{"path": "memory/bound.md"}, CodeOutsideRoot},
			{"dir.list", map[string]any{"path": "memory/mnt"}, CodeOutsideRoot},
			{"dir.list", map[string]any{"path": "memory/mnt/deeper"}, CodeOutsideRoot},
			{"workspace.memory", map[string]any{"op": "read", "path": "memory/mnt/secret.md"}, CodeOutsideRoot},
			{"workspace.memory", map[string]any{"op": "read", "path": "memory/bound.md"}, CodeOutsideRoot},
			{"file.write", map[string]any{"path": "memory/mnt/new.md", "contentBase64": b64("x")}, CodeOutsideRoot},
			{"file.write", map[string]any{"path": "memory/mnt/deeper/new.md", "contentBase64": b64("x"), "preflightOnly": true}, CodeOutsideRoot},
			{"system.run", map[string]any{"command": []string{"touch", "ran"}, "cwd": "memory/mnt"}, CodeOutsideRoot},
		} {
			t.Run(tc.cmd, func(t *testing.T) {
				_, err := call(t, h, tc.cmd, tc.params)
				requireCode(t, err, tc.code)
			})
		}
		m, err := call(t, h, "workspace.memory", map[string]any{"op": "list"})
		require.NoError(t, err)
		for _, f := range m["files"].([]any) {
			require.NotContains(t, f.(map[string]any)["path"], "mnt/", "a Memory listing entered the mount")
			require.NotEqual(t, "memory/bound.md", f.(map[string]any)["path"])
		}
		ents, err := os.ReadDir(outside)
		require.NoError(t, err)
		require.Len(t, ents, 2, "nothing was created outside")
		b, _ := os.ReadFile(filepath.Join(dir, "secret.txt"))
		require.Equal(t, "outside", string(b))
	})
}
