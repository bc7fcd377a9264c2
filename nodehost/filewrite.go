package nodehost

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

type writeParams struct {
	fileCommon
	ContentBase64  string `json:"contentBase64"`
	ExpectedSHA256 string `json:"expectedSha256,omitempty"`
}

// writeResult is file.write's payload (fields in key order, see fileCommon).
type writeResult struct {
	Binding     *Binding `json:"binding"` // a write binding: the directory the write lands in
	OK          bool     `json:"ok"`
	Overwritten bool     `json:"overwritten"`
	Path        string   `json:"path"`
	SHA256      string   `json:"sha256"`
	Size        int      `json:"size"`
}

// fileWrite replaces (or creates) a writable file: it walks to the target's
// directory checking the binding's anchor, pins that directory, checks the
// target is still what the caller saw, and (unless a preflight) writes.
func (h *Host) fileWrite(ctx context.Context, raw []byte) (any, error) {
	var p writeParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	data, err := decodeContent(p.ContentBase64)
	if err != nil {
		return nil, err
	}
	t, err := h.writeTargetOf(p)
	if err != nil {
		return nil, err
	}
	w, err := h.policy.beginWalk(t.root)
	if err != nil {
		return nil, err
	}
	defer w.close()
	binding, old, err := w.inspect(ctx, t, p)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	out := writeResult{Binding: binding, OK: true, Overwritten: old != nil, Path: t.abs(),
		SHA256: hex.EncodeToString(sum[:]), Size: len(data)}
	if p.PreflightOnly {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx)
	}
	if err := w.replace(t.base, data); err != nil {
		return nil, err
	}
	return out, nil
}

// writeTarget is where a write lands: the directories below the root, the
// file's name, and how deep the write binding's anchor lies (-1: none).
type writeTarget struct {
	resolved
	dirs  []string
	base  string
	depth int
}

// writeTargetOf resolves a write's path under the write policy and checks
// it against what the caller expects.
func (h *Host) writeTargetOf(p writeParams) (writeTarget, error) {
	r, err := h.policy.resolve(p.Path, true)
	if err != nil {
		return writeTarget{}, err
	}
	if err := p.checkExpected(r); err != nil {
		return writeTarget{}, err
	}
	parts := strings.Split(r.rel, "/")
	t := writeTarget{resolved: r, dirs: parts[:len(parts)-1], base: parts[len(parts)-1], depth: -1}
	if b := p.ExpectedBinding; b != nil && b.Kind == BindingWrite {
		if t.depth = anchorDepth(r.root, t.dirs, b.AnchorPath); t.depth < 0 {
			return writeTarget{}, cmdErr(CodeBindingMismatch, "the binding anchors another directory")
		}
	}
	return t, nil
}

// inspect walks to the target's directory and reports the write binding
// that pins it and the file the write would replace (nil when none),
// refusing a target that is not what the caller saw.
func (w *walk) inspect(ctx context.Context, t writeTarget, p writeParams) (*Binding, *unix.Stat_t, error) {
	missing, err := w.toDir(t.dirs, t.depth, p.ExpectedBinding, p.PreflightOnly)
	if err != nil {
		return nil, nil, err
	}
	binding, err := w.writeBinding(t.root, t.dirs)
	if err != nil {
		return nil, nil, err
	}
	var old *unix.Stat_t
	if !missing {
		if old, err = w.existingTarget(t.base); err != nil {
			return nil, nil, err
		}
	}
	if err := w.checkUnchanged(ctx, t.base, old, p); err != nil {
		return nil, nil, err
	}
	return binding, old, nil
}

// decodeContent decodes a write's content, refusing more than MaxWriteBytes
// before decoding it where the encoded length already tells.
func decodeContent(b64 string) ([]byte, error) {
	if base64.StdEncoding.DecodedLen(len(b64)) > MaxWriteBytes+3 {
		return nil, cmdErr(CodeTooLarge, "content is larger than %d bytes", MaxWriteBytes)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, cmdErr(CodeInvalidRequest, "contentBase64 is not base64")
	}
	if len(data) > MaxWriteBytes {
		return nil, cmdErr(CodeTooLarge, "content is larger than %d bytes", MaxWriteBytes)
	}
	return data, nil
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

// toDir walks to the target's directory, one component at a time, checking
// the write binding b's anchor at depth (-1: no anchor). A preflight creates
// nothing: it stops at the deepest directory that exists (missing), which
// is its anchor, and the real write checks that same directory before
// creating the rest.
func (w *walk) toDir(dirs []string, depth int, b *Binding, preflight bool) (missing bool, err error) {
	for i := range dirs {
		if i == depth {
			if err := checkAnchor(w.fd, b); err != nil {
				return false, err
			}
		}
		if err := w.step(dirs[i], !preflight); err != nil {
			if code, _ := codeOf(err); code != CodeNotFound || !preflight {
				return false, err
			}
			if depth > i {
				return false, cmdErr(CodeBindingMismatch, "the anchored directory is gone")
			}
			return true, nil
		}
	}
	if depth == len(dirs) {
		if err := checkAnchor(w.fd, b); err != nil {
			return false, err
		}
	}
	return false, nil
}

// writeBinding pins the directory the walk stands in.
func (w *walk) writeBinding(root string, dirs []string) (*Binding, error) {
	var anchor unix.Stat_t
	if err := unix.Fstat(w.fd, &anchor); err != nil {
		return nil, cmdErr(CodeUnavailable, "stat failed")
	}
	return &Binding{Kind: BindingWrite, AnchorPath: resolved{root: root, rel: strings.Join(dirs[:w.depth], "/")}.abs(),
		AnchorDevice: strconv.FormatUint(anchor.Dev, 10), AnchorInode: strconv.FormatUint(anchor.Ino, 10)}, nil
}

// existingTarget stats the file name a write would replace in the walk's
// directory: nil when there is none, refused when it is not a regular file.
func (w *walk) existingTarget(name string) (*unix.Stat_t, error) {
	var old unix.Stat_t
	err := unix.Fstatat(w.fd, name, &old, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case err != nil:
		return nil, mapOpenErr(err)
	}
	if err := checkKind(&old, wantFile, false); err != nil {
		return nil, err
	}
	return &old, nil
}

// checkUnchanged refuses a write whose target (old, nil when none) is not
// what the caller saw: another object than an existing binding names, or
// content other than expectedSha256 (a lost update).
func (w *walk) checkUnchanged(ctx context.Context, name string, old *unix.Stat_t, p writeParams) error {
	if b := p.ExpectedBinding; b != nil && b.Kind == BindingExisting && (old == nil || !b.matches(old)) {
		return cmdErr(CodeBindingMismatch, "the bound file is gone or was replaced since the preflight")
	}
	if p.ExpectedSHA256 == "" {
		return nil
	}
	cur := ""
	if old != nil {
		var err error
		if cur, err = w.hashLeaf(ctx, name, old); err != nil {
			return err
		}
	}
	if cur != p.ExpectedSHA256 {
		return cmdErr(CodeSHA256Mismatch, "the file content changed")
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
