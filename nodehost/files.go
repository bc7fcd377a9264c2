package nodehost

import (
	"context"
	"encoding/json"
	"errors"

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

// fileCommon holds the fields every file command takes; each command's
// params and result live in its own file (filestat.go, filefetch.go,
// dirlist.go, filewrite.go). The result structs declare their fields in
// key order: their payloadJSON keeps the sorted keys of the maps they
// replaced (testdata/golden/file-commands.txt).
type fileCommon struct {
	Path                  string   `json:"path"`
	FollowSymlinks        *bool    `json:"followSymlinks,omitempty"`
	PreflightOnly         bool     `json:"preflightOnly,omitempty"`
	ExpectedCanonicalPath string   `json:"expectedCanonicalPath,omitempty"`
	ExpectedBinding       *Binding `json:"expectedBinding,omitempty"`
}

// checkExpected compares r with the canonical path the caller expects and
// refuses a malformed binding.
func (c fileCommon) checkExpected(r resolved) error {
	if c.ExpectedCanonicalPath != "" && c.ExpectedCanonicalPath != r.abs() {
		return cmdErr(CodeCanonicalMismatch, "the canonical path changed")
	}
	if b := c.ExpectedBinding; b != nil {
		return b.check()
	}
	return nil
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
	if err := c.checkExpected(r); err != nil {
		return -1, r, nil, err
	}
	if b := c.ExpectedBinding; b != nil && b.Kind != BindingExisting {
		return -1, r, nil, cmdErr(CodeBindingMismatch, "a %s binding does not pin an existing object", b.Kind)
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

// marshalResult renders a command result as payloadJSON.
func marshalResult(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
