package nodehost

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Path policy limits.
const (
	MaxPathBytes      = 4096
	MaxComponentBytes = 255
)

// resolveFlags confine every openat2 to its root: no "..", no symlink at any
// component, no magic link, no mount point crossed (a bind mount inside the
// workspace leads outside it).
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// writableDocs are the Agent documents a node-side write may replace.
var writableDocs = map[string]bool{"AGENTS.md": true, "SOUL.md": true, "IDENTITY.md": true, "USER.md": true, "MEMORY.md": true}

// writableTrees are the directories (relative to the workspace) whose
// contents a write may create or replace: Memory, staged inputs, and Skill
// state (skills/<name>/state/…).
var writableTrees = []string{"memory", "inputs"}

// Policy is the node-side path policy that backs up the gateway's: reads
// under the Agent workspace and managed Skill roots; writes only to the
// designated documents, Memory, Skill state and staged inputs; symlinks
// never followed and mount points never crossed.
type Policy struct {
	Workspace  string   // absolute, clean
	SkillRoots []string // absolute, clean; read-only
	openat2    bool     // kernel supports openat2; false forces the component walk
}

// NewPolicy builds a policy; roots must be absolute. It needs /proc: an
// O_PATH descriptor is upgraded to a readable one through /proc/self/fd.
func NewPolicy(workspace string, skillRoots []string) (*Policy, error) {
	if !filepath.IsAbs(workspace) {
		return nil, errors.New("nodehost: workspace root must be absolute")
	}
	p := &Policy{Workspace: filepath.Clean(workspace)}
	for _, r := range skillRoots {
		if !filepath.IsAbs(r) {
			return nil, errors.New("nodehost: skill roots must be absolute")
		}
		p.SkillRoots = append(p.SkillRoots, filepath.Clean(r))
	}
	p.openat2 = probeOpenat2()
	if err := probeReopen(); err != nil {
		return nil, err
	}
	return p, nil
}

// within reports whether path is root or below it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// Serves reports whether path (absolute) lies inside a root the policy
// serves, by name or once symlinks in either are resolved: such a path must
// never hold node credentials.
func (p *Policy) Serves(path string) bool {
	paths := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		paths = append(paths, real)
	}
	for _, r := range append([]string{p.Workspace}, p.SkillRoots...) {
		roots := []string{r}
		if real, err := filepath.EvalSymlinks(r); err == nil {
			roots = append(roots, real)
		}
		for _, a := range paths {
			for _, b := range roots {
				if within(a, b) {
					return true
				}
			}
		}
	}
	return false
}

func probeOpenat2() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

func probeReopen() error {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("nodehost: open /: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("nodehost: stat /: %w", err)
	}
	rfd, err := reopen(fd, &st, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("nodehost: /proc/self/fd is needed to reopen O_PATH descriptors: %w", err)
	}
	unix.Close(rfd)
	return nil
}

// resolved is a request path split into its root and the relative rest.
type resolved struct {
	root string
	rel  string // "" for the root itself
}

func (r resolved) abs() string {
	if r.rel == "" {
		return r.root
	}
	return r.root + "/" + r.rel
}

// resolve validates a request path and finds its root. Relative paths are
// relative to the workspace.
func (p *Policy) resolve(path string, write bool) (resolved, error) {
	if path == "" {
		return resolved{}, cmdErr(CodeInvalidRequest, "path is required")
	}
	if len(path) > MaxPathBytes {
		return resolved{}, cmdErr(CodeTooLarge, "path longer than %d bytes", MaxPathBytes)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return resolved{}, cmdErr(CodeInvalidRequest, "path contains a NUL byte")
	}
	for _, c := range strings.Split(path, "/") {
		if c == ".." {
			return resolved{}, cmdErr(CodeTraversal, "path contains ..")
		}
		if len(c) > MaxComponentBytes {
			return resolved{}, cmdErr(CodeTooLarge, "path component longer than %d bytes", MaxComponentBytes)
		}
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(p.Workspace, path)
	}
	abs = filepath.Clean(abs)
	roots := []string{p.Workspace}
	if !write {
		roots = append(roots, p.SkillRoots...)
	}
	for _, root := range roots {
		if abs == root {
			return resolved{root: root}, nil
		}
		if strings.HasPrefix(abs, root+"/") {
			r := resolved{root: root, rel: strings.TrimPrefix(abs, root+"/")}
			if write && !writable(r.rel) {
				return resolved{}, cmdErr(CodeNotWritable, "writes are limited to Agent documents, Memory, Skill state and staged inputs")
			}
			return r, nil
		}
	}
	if write {
		return resolved{}, cmdErr(CodeNotWritable, "path is outside the writable workspace")
	}
	return resolved{}, cmdErr(CodeOutsideRoot, "path is outside the workspace and Skill roots")
}

func writable(rel string) bool {
	if writableDocs[rel] {
		return true
	}
	for _, t := range writableTrees {
		if strings.HasPrefix(rel, t+"/") {
			return true
		}
	}
	// skills/<name>/state/<…>
	parts := strings.Split(rel, "/")
	return len(parts) >= 4 && parts[0] == "skills" && parts[2] == "state"
}

// mountKey identifies the mount an object sits on: the mount id where the
// kernel reports one (statx STATX_MNT_ID), always the device.
type mountKey struct{ mnt, dev uint64 }

func mountOf(fd int) (mountKey, error) {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx); err != nil {
		return mountKey{}, err
	}
	k := mountKey{dev: uint64(sx.Dev_major)<<32 | uint64(sx.Dev_minor)}
	if sx.Mask&unix.STATX_MNT_ID != 0 {
		k.mnt = sx.Mnt_id
	}
	return k, nil
}

// walk is a resolution beneath one root, one component at a time: linear in
// the path's depth in both modes. In the fallback mode every component is
// opened O_NOFOLLOW and must sit on the root's mount (RESOLVE_NO_XDEV's
// equivalent); with openat2 each step carries resolveFlags.
type walk struct {
	p     *Policy
	fd    int      // the directory reached so far (O_PATH)
	depth int      // how many steps reached it
	root  mountKey // the root's mount (fallback mode only)
	// lazy: a pure lookup checks the mount of its final component only.
	// That suffices with mount ids: a mount is attached at one place, so
	// a walk that never goes up and crossed into another mount cannot end
	// on the root's. Devices are not unique that way: without mount ids
	// (kernels before 5.8) every component is checked.
	lazy bool
}

func (p *Policy) beginWalk(root string) (*walk, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, cmdErr(CodeNotFound, "root is not available")
	}
	w := &walk{p: p, fd: fd}
	if !p.openat2 {
		if w.root, err = mountOf(fd); err != nil {
			unix.Close(fd)
			return nil, cmdErr(CodeUnavailable, "root is not available")
		}
	}
	return w, nil
}

func (w *walk) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// openAt opens name (one component) in the current directory with flags,
// under the policy's rules. Errors are raw errnos (EXDEV for a mount point).
func (w *walk) openAt(name string, flags int) (int, error) {
	return w.open(name, flags, true)
}

func (w *walk) open(name string, flags int, check bool) (int, error) {
	if w.p.openat2 {
		return unix.Openat2(w.fd, name, &unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC), Resolve: resolveFlags})
	}
	fd, err := unix.Openat(w.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if !check {
		return fd, nil
	}
	if k, err := mountOf(fd); err != nil || k != w.root {
		unix.Close(fd)
		return -1, unix.EXDEV
	}
	return fd, nil
}

// step enters the directory name, creating it (mode 0700) first when it is
// missing and create is set.
func (w *walk) step(name string, create bool) error {
	fd, err := w.open(name, unix.O_PATH|unix.O_DIRECTORY, !w.lazy || create)
	if errors.Is(err, unix.ENOENT) && create {
		if err := unix.Mkdirat(w.fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return classify(w.fd, name, err)
		}
		fd, err = w.openAt(name, unix.O_PATH|unix.O_DIRECTORY)
	}
	if err != nil {
		return classify(w.fd, name, err)
	}
	unix.Close(w.fd)
	w.fd = fd
	w.depth++
	return nil
}

// leaf opens name in the current directory with flags (never following it).
func (w *walk) leaf(name string, flags int) (int, error) {
	fd, err := w.openAt(name, flags)
	if err != nil {
		return -1, classify(w.fd, name, err)
	}
	return fd, nil
}

// open resolves r beneath its root and opens its final component with flags
// (O_CLOEXEC|O_NOFOLLOW added): with O_PATH a symlink or special file is
// opened as itself, never through, so its type can be checked before
// anything can block. With openat2 the whole path is one call.
func (p *Policy) open(r resolved, flags int) (int, error) {
	if p.openat2 && r.rel != "" {
		rootfd, err := unix.Open(r.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, cmdErr(CodeNotFound, "root is not available")
		}
		defer unix.Close(rootfd)
		fd, err := unix.Openat2(rootfd, r.rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolveFlags})
		if err != nil {
			// ENOTDIR here may be a trailing symlink opened O_DIRECTORY; a
			// symlink earlier in the path would have been ELOOP.
			return -1, classify(rootfd, r.rel, err)
		}
		return fd, nil
	}
	w, err := p.beginWalk(r.root)
	if err != nil {
		return -1, err
	}
	defer w.close()
	if r.rel == "" {
		fd, err := unix.Openat(w.fd, ".", flags|unix.O_CLOEXEC, 0)
		return fd, mapOpenErr(err)
	}
	w.lazy = w.root.mnt != 0 // the leaf's check covers the way there
	parts := strings.Split(r.rel, "/")
	for _, c := range parts[:len(parts)-1] {
		if err := w.step(c, false); err != nil {
			return -1, err
		}
	}
	return w.leaf(parts[len(parts)-1], flags)
}

// reopen upgrades an O_PATH descriptor through its /proc/self/fd magic link:
// the same inode, no second path walk. O_NONBLOCK keeps a FIFO or a file
// under another process's lease from blocking the open; the result must
// still be the object st describes.
func reopen(pfd int, st *unix.Stat_t, flags int) (int, error) {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), flags|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, mapOpenErr(err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil || got.Dev != st.Dev || got.Ino != st.Ino || got.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		unix.Close(fd)
		return -1, cmdErr(CodeUnavailable, "the file changed while it was opened")
	}
	return fd, nil
}

// classify maps an open error of name in dir, telling a symlink (which an
// O_DIRECTORY|O_NOFOLLOW walk step reports as ENOTDIR) from a non-directory.
func classify(dir int, name string, err error) error {
	if errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return cmdErr(CodeSymlink, "path crosses a symlink")
		}
	}
	return mapOpenErr(err)
}

func mapOpenErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ELOOP):
		return cmdErr(CodeSymlink, "path crosses a symlink")
	case errors.Is(err, unix.EXDEV):
		// ".." and symlinks are refused before openat2 could report them, so
		// EXDEV is a mount point inside the root.
		return cmdErr(CodeOutsideRoot, "path crosses a mount point")
	case errors.Is(err, unix.ENOENT):
		return cmdErr(CodeNotFound, "no such file or directory")
	case errors.Is(err, unix.ENOTDIR):
		return cmdErr(CodeNotDirectory, "a path component is not a directory")
	case errors.Is(err, unix.EISDIR):
		return cmdErr(CodeNotFile, "path is a directory")
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		return cmdErr(CodeNotWritable, "permission denied")
	case errors.Is(err, unix.EAGAIN):
		return cmdErr(CodeUnavailable, "the file is leased by another process; retry")
	case errors.Is(err, unix.ENAMETOOLONG):
		return cmdErr(CodeTooLarge, "name too long")
	}
	return cmdErr(CodeUnavailable, "open failed")
}

// kindName names a file type for messages.
func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	}
	return "an unknown file type"
}
