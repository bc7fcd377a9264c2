package nodehost

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// MemoryDebounce coalesces bursts of Memory file changes into one event.
const MemoryDebounce = 500 * time.Millisecond

// MemoryEvent is the node.event name for Memory source changes.
const MemoryEvent = "workspace.memory.changed"

type memoryParams struct {
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
}

// memoryFiles lists MEMORY.md and the regular files of memory/** (relative
// paths, sorted). The tree is read through directory descriptors opened
// beneath the workspace under the path policy, so a directory swapped for a
// symlink, a FIFO or a mount point is skipped, never entered.
func (h *Host) memoryFiles(ctx context.Context) ([]string, error) {
	var out []string
	ws := h.policy.Workspace
	if fd, err := h.policy.open(resolved{root: ws, rel: "MEMORY.md"}, unix.O_PATH); err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			out = append(out, "MEMORY.md")
		}
		unix.Close(fd)
	}
	w, err := h.policy.beginWalk(ws)
	if err != nil {
		return nil, err
	}
	defer w.close()
	if w.step("memory", false) == nil {
		if err := w.collect(ctx, "memory", &out); err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

// collect appends the regular files below the walk's directory, rel below
// the workspace.
func (w *walk) collect(ctx context.Context, rel string, out *[]string) error {
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	var st unix.Stat_t
	if err := unix.Fstat(w.fd, &st); err != nil {
		return nil
	}
	dfd, err := reopen(w.fd, &st, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(dfd), rel)
	ents, _ := f.ReadDir(-1)
	f.Close()
	for _, e := range ents {
		switch {
		case e.Type().IsRegular():
			*out = append(*out, rel+"/"+e.Name())
		case e.IsDir():
			fd, err := w.openAt(e.Name(), unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				continue
			}
			sub := &walk{p: w.p, fd: fd, root: w.root}
			err = sub.collect(ctx, rel+"/"+e.Name(), out)
			sub.close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func isMemoryPath(rel string) bool { return rel == "MEMORY.md" || strings.HasPrefix(rel, "memory/") }

func (h *Host) workspaceMemory(ctx context.Context, raw []byte) (any, error) {
	var p memoryParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	switch p.Op {
	case "", "list":
		rels, err := h.memoryFiles(ctx)
		if err != nil {
			return nil, err
		}
		files := []map[string]any{}
		for _, rel := range rels {
			// Every file is opened as itself and checked again: the listing
			// only names candidates; special files and hard links are skipped.
			fd, err := h.policy.open(resolved{root: h.policy.Workspace, rel: rel}, unix.O_PATH)
			if err != nil {
				continue
			}
			var st unix.Stat_t
			if unix.Fstat(fd, &st) != nil || checkKind(&st, wantFile, true) != nil {
				unix.Close(fd)
				continue
			}
			hsh := sha256.New()
			n, err := hashContent(ctx, fd, &st, hsh, DefaultMaxFetchBytes)
			unix.Close(fd)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctxErr(ctx)
				}
				continue
			}
			files = append(files, map[string]any{"path": rel, "size": n, "sha256": hex.EncodeToString(hsh.Sum(nil))})
		}
		return map[string]any{"ok": true, "files": files}, nil
	case "read":
		r, err := h.policy.resolve(p.Path, false)
		if err != nil {
			return nil, err
		}
		if r.root != h.policy.Workspace || !isMemoryPath(r.rel) {
			return nil, cmdErr(CodeOutsideRoot, "not a Memory source file")
		}
		fd, _, st, err := h.lookup(fileCommon{Path: r.abs()}, wantFile, true)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		if st.Size > DefaultMaxFetchBytes {
			return nil, cmdErr(CodeTooLarge, "Memory file too large")
		}
		data, err := readContent(ctx, fd, st, DefaultMaxFetchBytes)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		return map[string]any{"ok": true, "path": r.rel, "size": len(data), "sha256": hex.EncodeToString(sum[:]),
			"base64": base64.StdEncoding.EncodeToString(data)}, nil
	}
	return nil, cmdErr(CodeInvalidRequest, "op must be list or read")
}

// watchMemory watches MEMORY.md and memory/** and calls notify with the
// changed relative paths, debounced. It returns when ctx ends.
func (h *Host) watchMemory(ctx context.Context, notify func(paths []string)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	ws := h.policy.Workspace
	_ = w.Add(ws)
	addTree := func(root string) {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Type()&os.ModeSymlink == 0 {
				_ = w.Add(p)
			}
			return nil
		})
	}
	addTree(filepath.Join(ws, "memory"))
	pending := map[string]bool{}
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			rel, err := filepath.Rel(ws, ev.Name)
			if err != nil {
				continue
			}
			if rel == "memory" || strings.HasPrefix(rel, "memory/") {
				if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() && ev.Op&fsnotify.Create != 0 {
					addTree(ev.Name)
				}
			}
			if !isMemoryPath(rel) {
				continue
			}
			pending[rel] = true
			if timer == nil {
				timer = time.NewTimer(MemoryDebounce)
				fire = timer.C
			}
		case <-fire:
			paths := make([]string, 0, len(pending))
			for p := range pending {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			pending = map[string]bool{}
			timer, fire = nil, nil
			notify(paths)
		case <-w.Errors:
		}
	}
}
