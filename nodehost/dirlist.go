package nodehost

import (
	"context"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

type listParams struct {
	fileCommon
	MaxEntries *int   `json:"maxEntries,omitempty"`
	PageToken  string `json:"pageToken,omitempty"`
}

// listResult is dir.list's payload (fields in key order, see fileCommon).
type listResult struct {
	Binding       *Binding    `json:"binding"`
	Entries       []listEntry `json:"entries"` // never null
	NextPageToken string      `json:"nextPageToken,omitempty"`
	OK            bool        `json:"ok"`
	Path          string      `json:"path"`
	Truncated     bool        `json:"truncated"`
}

// listEntry is one entry of a listing: a regular file, a directory or a
// symlink (not followed).
type listEntry struct {
	IsDir     bool   `json:"isDir"`
	IsSymlink bool   `json:"isSymlink,omitempty"`
	MimeType  string `json:"mimeType,omitempty"` // not for a directory
	Mtime     int64  `json:"mtime"`              // milliseconds
	Name      string `json:"name"`
	Path      string `json:"path"`
	Size      int64  `json:"size"`
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
	limit := DefaultMaxEntries
	if p.MaxEntries != nil && *p.MaxEntries > 0 && *p.MaxEntries < limit {
		limit = *p.MaxEntries
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, cmdErr(CodeUnavailable, "list failed")
	}
	sort.Strings(names)
	out := listResult{Binding: existingBinding(st), Entries: []listEntry{}, OK: true, Path: r.abs()}
	for i, name := range names[pageStart(names, p.PageToken):] {
		if i%256 == 255 && ctx.Err() != nil {
			return nil, ctxErr(ctx)
		}
		if len(out.Entries) == limit {
			out.Truncated, out.NextPageToken = true, out.Entries[len(out.Entries)-1].Name
			break
		}
		if e, ok := entryAt(fd, r.abs(), name); ok {
			out.Entries = append(out.Entries, e)
		}
	}
	return out, nil
}

// pageStart is the index of the first sorted name after the page token.
func pageStart(names []string, token string) int {
	if token == "" {
		return 0
	}
	start := sort.SearchStrings(names, token)
	if start < len(names) && names[start] == token {
		start++
	}
	return start
}

// entryAt describes name in the directory dirfd (at path dir), or reports
// false for one that is gone or is not served (FIFOs, sockets, devices).
func entryAt(dirfd int, dir, name string) (listEntry, bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return listEntry{}, false
	}
	t := st.Mode & unix.S_IFMT
	if t != unix.S_IFREG && t != unix.S_IFDIR && t != unix.S_IFLNK {
		return listEntry{}, false
	}
	e := listEntry{IsDir: t == unix.S_IFDIR, IsSymlink: t == unix.S_IFLNK, Mtime: st.Mtim.Nano() / int64(time.Millisecond),
		Name: name, Path: dir + "/" + name, Size: st.Size}
	if !e.IsDir {
		e.MimeType = mimeOf(name)
	}
	return e, true
}
