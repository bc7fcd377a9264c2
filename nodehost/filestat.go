package nodehost

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

type statParams struct {
	fileCommon
}

// statResult is file.stat's payload (fields in key order, see fileCommon).
type statResult struct {
	Binding *Binding `json:"binding"`
	MtimeMs int64    `json:"mtimeMs"`
	OK      bool     `json:"ok"`
	Path    string   `json:"path"`
	Size    int64    `json:"size"`
	Type    string   `json:"type"` // file or directory
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
	return statResult{Binding: existingBinding(st), MtimeMs: st.Mtim.Nano() / int64(time.Millisecond), OK: true,
		Path: r.abs(), Size: st.Size, Type: kindOf(st)}, nil
}

func kindOf(st *unix.Stat_t) string {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "directory"
	}
	return "file"
}
