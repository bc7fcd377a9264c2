package nodehost

import (
	"errors"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Path policy limits.
const (
	MaxPathBytes      = 4096
	MaxComponentBytes = 255
)

// writableDocs are the Agent documents a node-side write may replace.
var writableDocs = map[string]bool{"AGENTS.md": true, "SOUL.md": true, "IDENTITY.md": true, "USER.md": true, "MEMORY.md": true}

// writableTrees are the directories (relative to the workspace) whose
// contents a write may create or replace: Memory, staged inputs, and Skill
// state (skills/<name>/state/…).
var writableTrees = []string{"memory", "inputs"}

// Policy is the node-side path policy that backs up the gateway's: reads
// under the Agent workspace and managed Skill roots; writes only to the
// designated documents, Memory, Skill state and staged inputs; symlinks
// never followed.
type Policy struct {
	Workspace  string   // absolute, clean
	SkillRoots []string // absolute, clean; read-only
	openat2    bool     // kernel supports openat2
}

// NewPolicy builds a policy; roots must be absolute.
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
	return p, nil
}

func probeOpenat2() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
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

// open opens r beneath its root without following any symlink: openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, else a walk of
// O_NOFOLLOW opens. flags are the final open flags (O_CLOEXEC|O_NOFOLLOW added).
func (p *Policy) open(r resolved, flags int, mode uint32) (int, error) {
	rootfd, err := unix.Open(r.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, cmdErr(CodeNotFound, "root is not available")
	}
	defer unix.Close(rootfd)
	if r.rel == "" {
		return unix.Openat(rootfd, ".", flags|unix.O_CLOEXEC, mode)
	}
	if p.openat2 {
		fd, err := unix.Openat2(rootfd, r.rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Mode: uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		return fd, mapOpenErr(err)
	}
	return walkOpen(rootfd, r.rel, flags, mode)
}

// walkOpen opens each directory component with O_NOFOLLOW|O_DIRECTORY, then
// the leaf with O_NOFOLLOW.
func walkOpen(rootfd int, rel string, flags int, mode uint32) (int, error) {
	parts := strings.Split(rel, "/")
	dir, err := unix.Dup(rootfd)
	if err != nil {
		return -1, err
	}
	for _, c := range parts[:len(parts)-1] {
		next, err := unix.Openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if err != nil {
			return -1, mapOpenErr(err)
		}
		dir = next
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, parts[len(parts)-1], flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	return fd, mapOpenErr(err)
}

func mapOpenErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return cmdErr(CodeSymlink, "path crosses a symlink")
	case errors.Is(err, unix.ENOENT):
		return cmdErr(CodeNotFound, "no such file or directory")
	case errors.Is(err, unix.ENOTDIR):
		// a symlinked directory component opened with O_NOFOLLOW|O_DIRECTORY
		return cmdErr(CodeSymlink, "a path component is not a directory")
	case errors.Is(err, unix.EISDIR):
		return cmdErr(CodeNotFile, "path is a directory")
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return cmdErr(CodeNotWritable, "permission denied")
	}
	return cmdErr(CodeUnavailable, "open failed")
}

// mkdirAll creates the directories of rel beneath root (0700), refusing symlinks.
func (p *Policy) mkdirAll(root, rel string) error {
	if rel == "" || rel == "." {
		return nil
	}
	cur := ""
	for _, c := range strings.Split(rel, "/") {
		if cur == "" {
			cur = c
		} else {
			cur += "/" + c
		}
		fd, err := p.open(resolved{root: root, rel: cur}, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if code, _ := codeOf(err); code != CodeNotFound {
			return err
		}
		parent, err := p.open(resolved{root: root, rel: filepath.Dir(cur)}, unix.O_PATH|unix.O_DIRECTORY, 0)
		if filepath.Dir(cur) == "." {
			parent, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return err
		}
		err = unix.Mkdirat(parent, filepath.Base(cur), 0o700)
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return mapOpenErr(err)
		}
	}
	return nil
}
