package nodehost

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"mime"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"oce.dev/oce/shared/ocproto"
)

// File command limits.
const (
	DefaultMaxFetchBytes = 16 << 20
	MaxWriteBytes        = 16 << 20
	DefaultMaxEntries    = 1000
	// MaxConcurrentFileOps bounds the file commands (and Memory reads) that
	// run at once; the rest wait for a slot within their deadline. A fetch
	// holds up to ~3× its 16 MiB limit (bytes, base64, JSON) at its peak.
	MaxConcurrentFileOps = 8
	// readChunk is how much a read takes before it looks at the deadline again.
	readChunk = 1 << 20
)

// Binding kinds.
const (
	BindingExisting = "existing" // pins the object at path: {device, inode}
	BindingWrite    = "write"    // pins the directory a write lands in: {anchorPath, anchorDevice, anchorInode}
)

// Binding pins a path to one file-system object between the preflight and the
// real call (the gateway echoes it back as expectedBinding).
type Binding struct {
	Kind         string `json:"kind"`
	Device       string `json:"device,omitempty"`
	Inode        string `json:"inode,omitempty"`
	AnchorPath   string `json:"anchorPath,omitempty"`
	AnchorDevice string `json:"anchorDevice,omitempty"`
	AnchorInode  string `json:"anchorInode,omitempty"`
}

func existingBinding(st *unix.Stat_t) *Binding {
	return &Binding{Kind: BindingExisting, Device: strconv.FormatUint(st.Dev, 10), Inode: strconv.FormatUint(st.Ino, 10)}
}

func decimal(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// check refuses a binding that is not one of the known kinds with its fields
// (fail closed: an unknown kind is never ignored).
func (b *Binding) check() error {
	switch b.Kind {
	case BindingExisting:
		if decimal(b.Device) && decimal(b.Inode) {
			return nil
		}
	case BindingWrite:
		if filepath.IsAbs(b.AnchorPath) && decimal(b.AnchorDevice) && decimal(b.AnchorInode) {
			return nil
		}
	default:
		return cmdErr(CodeInvalidRequest, "unknown binding kind")
	}
	return cmdErr(CodeInvalidRequest, "incomplete %s binding", b.Kind)
}

// matches reports whether st is the object an existing binding names.
func (b *Binding) matches(st *unix.Stat_t) bool {
	got := existingBinding(st)
	return b.Device == got.Device && b.Inode == got.Inode
}

// common fields of the file commands.
type fileCommon struct {
	Path                  string   `json:"path"`
	FollowSymlinks        *bool    `json:"followSymlinks,omitempty"`
	PreflightOnly         bool     `json:"preflightOnly,omitempty"`
	ExpectedCanonicalPath string   `json:"expectedCanonicalPath,omitempty"`
	ExpectedBinding       *Binding `json:"expectedBinding,omitempty"`
}

type statParams struct {
	fileCommon
}

type fetchParams struct {
	fileCommon
	MaxBytes *int64 `json:"maxBytes,omitempty"`
	RootPath string `json:"rootPath,omitempty"`
}

type listParams struct {
	fileCommon
	MaxEntries *int   `json:"maxEntries,omitempty"`
	PageToken  string `json:"pageToken,omitempty"`
}

type writeParams struct {
	fileCommon
	ContentBase64  string `json:"contentBase64"`
	ExpectedSHA256 string `json:"expectedSha256,omitempty"`
}

// decodeParams decodes a command's params as a closed object.
func decodeParams(raw []byte, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := ocproto.StrictUnmarshal(raw, v); err != nil {
		return cmdErr(CodeInvalidRequest, "invalid params: %v", err)
	}
	return nil
}

// ctxErr is the closed error of a request whose deadline passed or that the
// gateway cancelled.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return cmdErr(CodeUnavailable, "the request's deadline passed")
	}
	return cmdErr(CodeUnavailable, "the request was cancelled")
}

// fileOp runs one file command in a slot of the node's bound, waiting for
// the slot no longer than the request's deadline.
func (h *Host) fileOp(ctx context.Context, raw []byte, op func(context.Context, []byte) (any, error)) (any, error) {
	select {
	case h.fileSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
	defer func() { <-h.fileSlots }()
	if ctx.Err() != nil {
		return nil, ctxErr(ctx)
	}
	return op(ctx, raw)
}

// want is what a command serves at its path.
type want int

const (
	wantFile want = iota + 1 // a regular file
	wantDir                  // a directory
	wantAny                  // a regular file or a directory
)

// checkKind refuses every type a command does not serve: symlinks always
// (PATH_SYMLINK), FIFOs, sockets and devices (NOT_A_FILE, or
// NOT_A_DIRECTORY where a directory is wanted), and regular files with more
// than one link where content is read (PATH_HARDLINK).
func checkKind(st *unix.Stat_t, w want, content bool) error {
	t := st.Mode & unix.S_IFMT
	switch {
	case t == unix.S_IFLNK:
		return cmdErr(CodeSymlink, "path is a symlink")
	case t == unix.S_IFDIR && w != wantFile:
		return nil
	case t == unix.S_IFREG && w != wantDir:
		if content && st.Nlink > 1 {
			return cmdErr(CodeHardLink, "the file has %d hard links; its content is not served", st.Nlink)
		}
		return nil
	case w == wantDir:
		return cmdErr(CodeNotDirectory, "path is %s", kindName(st.Mode))
	}
	return cmdErr(CodeNotFile, "path is %s, not a regular file", kindName(st.Mode))
}

// lookup resolves c.Path under the read policy, checks the canonical path,
// opens the final component as itself (O_PATH: nothing can block) and
// checks its type, links and binding.
func (h *Host) lookup(c fileCommon, w want, content bool) (int, resolved, *unix.Stat_t, error) {
	r, err := h.policy.resolve(c.Path, false)
	if err != nil {
		return -1, r, nil, err
	}
	if c.ExpectedCanonicalPath != "" && c.ExpectedCanonicalPath != r.abs() {
		return -1, r, nil, cmdErr(CodeCanonicalMismatch, "the canonical path changed")
	}
	if b := c.ExpectedBinding; b != nil {
		if err := b.check(); err != nil {
			return -1, r, nil, err
		}
		if b.Kind != BindingExisting {
			return -1, r, nil, cmdErr(CodeBindingMismatch, "a %s binding does not pin an existing object", b.Kind)
		}
	}
	fd, err := h.policy.open(r, unix.O_PATH)
	if err != nil {
		return -1, r, nil, err
	}
	st := new(unix.Stat_t)
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, r, nil, cmdErr(CodeUnavailable, "stat failed")
	}
	if err := checkKind(st, w, content); err != nil {
		unix.Close(fd)
		return -1, r, nil, err
	}
	if b := c.ExpectedBinding; b != nil && !b.matches(st) {
		unix.Close(fd)
		return -1, r, nil, cmdErr(CodeBindingMismatch, "the file changed since the preflight")
	}
	return fd, r, st, nil
}

func kindOf(st *unix.Stat_t) string {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "directory"
	}
	return "file"
}

func (h *Host) fileStat(_ context.Context, raw []byte) (any, error) {
	var p statParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	fd, r, st, err := h.lookup(p.fileCommon, wantAny, false)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return map[string]any{"ok": true, "path": r.abs(), "type": kindOf(st), "size": st.Size,
		"mtimeMs": st.Mtim.Nano() / int64(time.Millisecond), "binding": existingBinding(st)}, nil
}

// readContent reads a regular file's content through its O_PATH descriptor,
// at most limit bytes (PAYLOAD_TOO_LARGE beyond), honouring ctx between chunks.
func readContent(ctx context.Context, pfd int, st *unix.Stat_t, limit int64) ([]byte, error) {
	fd, err := reopen(pfd, st, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, min(st.Size, limit)+1)
	for {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(cap(buf), len(buf)+readChunk)
		n, err := unix.Read(fd, buf[len(buf):end])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, cmdErr(CodeUnavailable, "read failed")
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, cmdErr(CodeTooLarge, "file grew past %d bytes", limit)
		}
	}
}

// hashContent feeds at most limit bytes of a regular file to hsh and returns
// how many it read, honouring ctx between chunks.
func hashContent(ctx context.Context, pfd int, st *unix.Stat_t, hsh hash.Hash, limit int64) (int64, error) {
	fd, err := reopen(pfd, st, unix.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	buf := make([]byte, min(readChunk, max(st.Size, 1)))
	var total int64
	for total < limit {
		if ctx.Err() != nil {
			return total, ctxErr(ctx)
		}
		n, err := unix.Read(fd, buf[:min(int64(len(buf)), limit-total)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return total, cmdErr(CodeUnavailable, "read failed")
		}
		if n == 0 {
			break
		}
		hsh.Write(buf[:n])
		total += int64(n)
	}
	return total, nil
}

func (h *Host) fileFetch(ctx context.Context, raw []byte) (any, error) {
	var p fetchParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	fd, r, st, err := h.lookup(p.fileCommon, wantFile, true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	limit := int64(DefaultMaxFetchBytes)
	if p.MaxBytes != nil && *p.MaxBytes > 0 && *p.MaxBytes < limit {
		limit = *p.MaxBytes
	}
	if st.Size > limit {
		return nil, cmdErr(CodeTooLarge, "file is larger than %d bytes", limit)
	}
	out := map[string]any{"ok": true, "path": r.abs(), "size": st.Size, "mimeType": mimeOf(r.abs()), "binding": existingBinding(st)}
	if p.PreflightOnly {
		return out, nil
	}
	data, err := readContent(ctx, fd, st, limit)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	out["size"] = len(data)
	out["base64"] = base64.StdEncoding.EncodeToString(data)
	out["sha256"] = hex.EncodeToString(sum[:])
	return out, nil
}

func mimeOf(path string) string {
	if t := mime.TypeByExtension(filepath.Ext(path)); t != "" {
		return t
	}
	switch filepath.Ext(path) {
	case ".md":
		return "text/markdown"
	}
	return "application/octet-stream"
}

func (h *Host) dirList(ctx context.Context, raw []byte) (any, error) {
	var p listParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	pfd, r, st, err := h.lookup(p.fileCommon, wantDir, false)
	if err != nil {
		return nil, err
	}
	fd, err := reopen(pfd, st, unix.O_RDONLY|unix.O_DIRECTORY)
	unix.Close(pfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r.abs())
	defer f.Close()
	max := DefaultMaxEntries
	if p.MaxEntries != nil && *p.MaxEntries > 0 && *p.MaxEntries < max {
		max = *p.MaxEntries
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, cmdErr(CodeUnavailable, "list failed")
	}
	sort.Strings(names)
	start := 0
	if p.PageToken != "" {
		start = sort.SearchStrings(names, p.PageToken)
		if start < len(names) && names[start] == p.PageToken {
			start++
		}
	}
	entries := []map[string]any{}
	truncated := false
	next := ""
	for i, name := range names[start:] {
		if i%256 == 255 && ctx.Err() != nil {
			return nil, ctxErr(ctx)
		}
		if len(entries) == max {
			truncated = true
			next = entries[len(entries)-1]["name"].(string)
			break
		}
		var est unix.Stat_t
		if err := unix.Fstatat(fd, name, &est, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		t := est.Mode & unix.S_IFMT
		if t != unix.S_IFREG && t != unix.S_IFDIR && t != unix.S_IFLNK {
			continue // FIFOs, sockets and devices are not served
		}
		isDir := t == unix.S_IFDIR
		e := map[string]any{"name": name, "path": r.abs() + "/" + name, "size": est.Size, "isDir": isDir,
			"mtime": est.Mtim.Nano() / int64(time.Millisecond)}
		if t == unix.S_IFLNK {
			e["isSymlink"] = true
		}
		if !isDir {
			e["mimeType"] = mimeOf(name)
		}
		entries = append(entries, e)
	}
	out := map[string]any{"ok": true, "path": r.abs(), "entries": entries, "truncated": truncated, "binding": existingBinding(st)}
	if next != "" {
		out["nextPageToken"] = next
	}
	return out, nil
}

// anchorDepth is how many components of dirRel lie between the root and a
// write binding's anchor, or -1 when the anchor is not the root or an
// ancestor of the target's directory.
func anchorDepth(root string, parts []string, anchor string) int {
	if anchor == root {
		return 0
	}
	if !strings.HasPrefix(anchor, root+"/") {
		return -1
	}
	ap := strings.Split(strings.TrimPrefix(anchor, root+"/"), "/")
	if len(ap) > len(parts) {
		return -1
	}
	for i := range ap {
		if ap[i] != parts[i] {
			return -1
		}
	}
	return len(ap)
}

func (h *Host) fileWrite(ctx context.Context, raw []byte) (any, error) {
	var p writeParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if base64.StdEncoding.DecodedLen(len(p.ContentBase64)) > MaxWriteBytes+3 {
		return nil, cmdErr(CodeTooLarge, "content is larger than %d bytes", MaxWriteBytes)
	}
	data, err := base64.StdEncoding.DecodeString(p.ContentBase64)
	if err != nil {
		return nil, cmdErr(CodeInvalidRequest, "contentBase64 is not base64")
	}
	if len(data) > MaxWriteBytes {
		return nil, cmdErr(CodeTooLarge, "content is larger than %d bytes", MaxWriteBytes)
	}
	r, err := h.policy.resolve(p.Path, true)
	if err != nil {
		return nil, err
	}
	if p.ExpectedCanonicalPath != "" && p.ExpectedCanonicalPath != r.abs() {
		return nil, cmdErr(CodeCanonicalMismatch, "the canonical path changed")
	}
	b := p.ExpectedBinding
	if b != nil {
		if err := b.check(); err != nil {
			return nil, err
		}
	}
	parts := strings.Split(r.rel, "/")
	base, dirs := parts[len(parts)-1], parts[:len(parts)-1]
	depth := -1
	if b != nil && b.Kind == BindingWrite {
		if depth = anchorDepth(r.root, dirs, b.AnchorPath); depth < 0 {
			return nil, cmdErr(CodeBindingMismatch, "the binding anchors another directory")
		}
	}
	w, err := h.policy.beginWalk(r.root)
	if err != nil {
		return nil, err
	}
	defer w.close()
	// Walk to the target's directory, one component at a time. A preflight
	// creates nothing: its anchor is the deepest directory that exists, and
	// the real write checks that same directory before creating the rest.
	missing := false
	for i := 0; i < len(dirs); i++ {
		if i == depth {
			if err := checkAnchor(w.fd, b); err != nil {
				return nil, err
			}
		}
		if err := w.step(dirs[i], !p.PreflightOnly); err != nil {
			if code, _ := codeOf(err); code != CodeNotFound || !p.PreflightOnly {
				return nil, err
			}
			if depth > i {
				return nil, cmdErr(CodeBindingMismatch, "the anchored directory is gone")
			}
			missing = true
			break
		}
	}
	if depth == len(dirs) {
		if err := checkAnchor(w.fd, b); err != nil {
			return nil, err
		}
	}
	var anchor unix.Stat_t
	if err := unix.Fstat(w.fd, &anchor); err != nil {
		return nil, cmdErr(CodeUnavailable, "stat failed")
	}
	binding := &Binding{Kind: BindingWrite, AnchorPath: resolved{root: r.root, rel: strings.Join(dirs[:w.depth], "/")}.abs(),
		AnchorDevice: strconv.FormatUint(anchor.Dev, 10), AnchorInode: strconv.FormatUint(anchor.Ino, 10)}
	overwritten := false
	var old unix.Stat_t
	if !missing {
		switch err := unix.Fstatat(w.fd, base, &old, unix.AT_SYMLINK_NOFOLLOW); {
		case err == nil:
			if err := checkKind(&old, wantFile, false); err != nil {
				return nil, err
			}
			overwritten = true
		case !errors.Is(err, unix.ENOENT):
			return nil, mapOpenErr(err)
		}
	}
	if b != nil && b.Kind == BindingExisting && (!overwritten || !b.matches(&old)) {
		return nil, cmdErr(CodeBindingMismatch, "the bound file is gone or was replaced since the preflight")
	}
	if p.ExpectedSHA256 != "" {
		cur := ""
		if overwritten {
			if cur, err = w.hashLeaf(ctx, base, &old); err != nil {
				return nil, err
			}
		}
		if cur != p.ExpectedSHA256 {
			return nil, cmdErr(CodeSHA256Mismatch, "the file content changed")
		}
	}
	sum := sha256.Sum256(data)
	out := map[string]any{"ok": true, "path": r.abs(), "size": len(data), "sha256": hex.EncodeToString(sum[:]),
		"overwritten": overwritten, "binding": binding}
	if p.PreflightOnly {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx)
	}
	if err := w.replace(base, data); err != nil {
		return nil, err
	}
	return out, nil
}

// checkAnchor compares the directory dirfd with a write binding's anchor.
func checkAnchor(dirfd int, b *Binding) error {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return cmdErr(CodeUnavailable, "stat failed")
	}
	if b.AnchorDevice != strconv.FormatUint(st.Dev, 10) || b.AnchorInode != strconv.FormatUint(st.Ino, 10) {
		return cmdErr(CodeBindingMismatch, "the target directory changed since the preflight")
	}
	return nil
}

// hashLeaf is the sha256 of the regular file name in the walk's directory,
// which must still be the object st describes.
func (w *walk) hashLeaf(ctx context.Context, name string, st *unix.Stat_t) (string, error) {
	fd, err := w.leaf(name, unix.O_PATH)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var cur unix.Stat_t
	if err := unix.Fstat(fd, &cur); err != nil || cur.Dev != st.Dev || cur.Ino != st.Ino {
		return "", cmdErr(CodeSHA256Mismatch, "the file changed")
	}
	if err := checkKind(&cur, wantFile, true); err != nil {
		return "", err
	}
	hsh := sha256.New()
	if _, err := hashContent(ctx, fd, &cur, hsh, MaxWriteBytes+1); err != nil {
		return "", err
	}
	return hex.EncodeToString(hsh.Sum(nil)), nil
}

// tmpName is a private temporary name of fixed length, so that a target
// name up to MaxComponentBytes still has room.
func tmpName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return ".oce-tmp-" + hex.EncodeToString(b[:])
}

// replace writes data to name in the walk's directory: a 0600 temporary
// file, fsync, rename over name, fsync of the directory.
func (w *walk) replace(name string, data []byte) error {
	tmp := tmpName()
	fd, err := unix.Openat(w.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return mapOpenErr(err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if werr == nil {
		werr = unix.Renameat(w.fd, tmp, w.fd, name)
	}
	if werr != nil {
		_ = unix.Unlinkat(w.fd, tmp, 0)
		return cmdErr(CodeUnavailable, "write failed")
	}
	var st unix.Stat_t
	if unix.Fstat(w.fd, &st) == nil {
		if dfd, err := reopen(w.fd, &st, unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
			_ = unix.Fsync(dfd)
			unix.Close(dfd)
		}
	}
	return nil
}

// marshalResult renders a command result as payloadJSON.
func marshalResult(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
