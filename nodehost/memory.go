package nodehost

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
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

// memoryFiles lists MEMORY.md and memory/** (relative paths), symlinks skipped.
func (h *Host) memoryFiles() []string {
	var out []string
	ws := h.policy.Workspace
	if st, err := os.Lstat(filepath.Join(ws, "MEMORY.md")); err == nil && st.Mode().IsRegular() {
		out = append(out, "MEMORY.md")
	}
	root := filepath.Join(ws, "memory")
	if st, err := os.Lstat(root); err == nil && st.IsDir() {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Type()&os.ModeSymlink != 0 {
				return nil
			}
			if d.Type().IsRegular() {
				rel, _ := filepath.Rel(ws, p)
				out = append(out, rel)
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}

func isMemoryPath(rel string) bool { return rel == "MEMORY.md" || strings.HasPrefix(rel, "memory/") }

func (h *Host) workspaceMemory(raw []byte) (any, error) {
	var p memoryParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	switch p.Op {
	case "", "list":
		files := []map[string]any{}
		for _, rel := range h.memoryFiles() {
			fd, err := h.policy.open(resolved{root: h.policy.Workspace, rel: rel}, unix.O_RDONLY, 0)
			if err != nil {
				continue
			}
			f := os.NewFile(uintptr(fd), rel)
			hsh := sha256.New()
			n, _ := io.Copy(hsh, io.LimitReader(f, DefaultMaxFetchBytes))
			f.Close()
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
		fd, err := h.policy.open(r, unix.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), r.rel)
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, DefaultMaxFetchBytes+1))
		if err != nil || len(data) > DefaultMaxFetchBytes {
			return nil, cmdErr(CodeTooLarge, "Memory file too large")
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
