package nodehost

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"oce.dev/oce/shared/ocproto"
)

// File command limits.
const (
	DefaultMaxFetchBytes = 16 << 20
	MaxWriteBytes        = 16 << 20
	DefaultMaxEntries    = 1000
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
	return &Binding{Kind: "existing", Device: strconv.FormatUint(st.Dev, 10), Inode: strconv.FormatUint(st.Ino, 10)}
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

// openExisting resolves and opens path read-only, checking the expected
// canonical path and binding.
func (h *Host) openExisting(c fileCommon, flags int) (int, resolved, *unix.Stat_t, error) {
	r, err := h.policy.resolve(c.Path, false)
	if err != nil {
		return -1, r, nil, err
	}
	if c.ExpectedCanonicalPath != "" && c.ExpectedCanonicalPath != r.abs() {
		return -1, r, nil, cmdErr(CodeCanonicalMismatch, "the canonical path changed")
	}
	fd, err := h.policy.open(r, flags, 0)
	if err != nil {
		return -1, r, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, r, nil, cmdErr(CodeUnavailable, "stat failed")
	}
	if b := c.ExpectedBinding; b != nil {
		got := existingBinding(&st)
		if b.Kind != "existing" || b.Device != got.Device || b.Inode != got.Inode {
			unix.Close(fd)
			return -1, r, nil, cmdErr(CodeBindingMismatch, "the file changed since the preflight")
		}
	}
	return fd, r, &st, nil
}

func kindOf(st *unix.Stat_t) string {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "directory"
	}
	return "file"
}

func (h *Host) fileStat(raw []byte) (any, error) {
	var p statParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	fd, r, st, err := h.openExisting(p.fileCommon, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return map[string]any{"ok": true, "path": r.abs(), "type": kindOf(st), "size": st.Size,
		"mtimeMs": st.Mtim.Nano() / int64(time.Millisecond), "binding": existingBinding(st)}, nil
}

func (h *Host) fileFetch(raw []byte) (any, error) {
	var p fetchParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	fd, r, st, err := h.openExisting(p.fileCommon, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r.abs())
	defer f.Close()
	if kindOf(st) != "file" || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, cmdErr(CodeNotFile, "path is not a regular file")
	}
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
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, cmdErr(CodeUnavailable, "read failed")
	}
	if int64(len(data)) > limit {
		return nil, cmdErr(CodeTooLarge, "file grew past %d bytes", limit)
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

func (h *Host) dirList(raw []byte) (any, error) {
	var p listParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	fd, r, st, err := h.openExisting(p.fileCommon, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if code, _ := codeOf(err); code == CodeSymlink {
			return nil, err
		}
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
	for _, name := range names[start:] {
		if len(entries) == max {
			truncated = true
			next = entries[len(entries)-1]["name"].(string)
			break
		}
		var est unix.Stat_t
		if err := unix.Fstatat(fd, name, &est, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		isDir := est.Mode&unix.S_IFMT == unix.S_IFDIR
		e := map[string]any{"name": name, "path": r.abs() + "/" + name, "size": est.Size, "isDir": isDir,
			"mtime": est.Mtim.Nano() / int64(time.Millisecond)}
		if est.Mode&unix.S_IFMT == unix.S_IFLNK {
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

func (h *Host) fileWrite(raw []byte) (any, error) {
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
	dirRel, base := filepath.Dir(r.rel), filepath.Base(r.rel)
	if dirRel == "." {
		dirRel = ""
	}
	if err := h.policy.mkdirAll(r.root, dirRel); err != nil {
		return nil, err
	}
	dirfd, err := h.policy.open(resolved{root: r.root, rel: dirRel}, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	var dst unix.Stat_t
	if err := unix.Fstat(dirfd, &dst); err != nil {
		return nil, cmdErr(CodeUnavailable, "stat failed")
	}
	anchor := &Binding{Kind: "write", AnchorPath: filepath.Join(r.root, dirRel), AnchorDevice: strconv.FormatUint(dst.Dev, 10),
		AnchorInode: strconv.FormatUint(dst.Ino, 10)}
	if b := p.ExpectedBinding; b != nil && b.Kind == "write" &&
		(b.AnchorDevice != anchor.AnchorDevice || b.AnchorInode != anchor.AnchorInode) {
		return nil, cmdErr(CodeBindingMismatch, "the target directory changed since the preflight")
	}
	overwritten := false
	var old unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &old, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		if old.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil, cmdErr(CodeSymlink, "target is a symlink")
		}
		if old.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, cmdErr(CodeNotFile, "target is not a regular file")
		}
		overwritten = true
		if b := p.ExpectedBinding; b != nil && b.Kind == "existing" {
			got := existingBinding(&old)
			if b.Device != got.Device || b.Inode != got.Inode {
				return nil, cmdErr(CodeBindingMismatch, "the file changed since the preflight")
			}
		}
	}
	if p.ExpectedSHA256 != "" {
		cur := ""
		if overwritten {
			fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, mapOpenErr(err)
			}
			f := os.NewFile(uintptr(fd), base)
			hsh := sha256.New()
			_, err = io.Copy(hsh, f)
			f.Close()
			if err != nil {
				return nil, cmdErr(CodeUnavailable, "read failed")
			}
			cur = hex.EncodeToString(hsh.Sum(nil))
		}
		if cur != p.ExpectedSHA256 {
			return nil, cmdErr(CodeSHA256Mismatch, "the file content changed")
		}
	}
	sum := sha256.Sum256(data)
	out := map[string]any{"ok": true, "path": r.abs(), "size": len(data), "sha256": hex.EncodeToString(sum[:]),
		"overwritten": overwritten, "binding": anchor}
	if p.PreflightOnly {
		return out, nil
	}
	tmp := "." + base + ".oce-tmp-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, mapOpenErr(err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if werr == nil {
		werr = unix.Renameat(dirfd, tmp, dirfd, base)
	}
	if werr != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return nil, cmdErr(CodeUnavailable, "write failed")
	}
	_ = unix.Fsync(dirfd)
	return out, nil
}

// marshalResult renders a command result as payloadJSON.
func marshalResult(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
