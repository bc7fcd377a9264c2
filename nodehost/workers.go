package nodehost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"oce.dev/oce/shared/contract"
)

// Worker admission bounds (docs/design/seed-001.md: default 8, configurable 1–1024).
const (
	DefaultWorkerCapacity = 8
	MaxWorkerCapacity     = 1024
	WorkerStopBudget      = 8 * time.Second
	CapacityEnv           = contract.EnvNativeWorkerCapacity
)

// ErrCapacity: every slot holds an active session; retry after one stops.
var ErrCapacity = errors.New("nodehost: worker capacity exhausted")

// ParseCapacity reads OPENCLAW_NATIVE_WORKER_CAPACITY: empty → 8; anything
// but an integer from 1 to 1024 refuses to start.
func ParseCapacity(s string) (int, error) {
	if s == "" {
		return DefaultWorkerCapacity, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxWorkerCapacity {
		return 0, fmt.Errorf("%w: %q", ErrBadCapacity, s)
	}
	return n, nil
}

// WorkerInfo describes one admitted session worker.
type WorkerInfo struct {
	SessionKey string    `json:"sessionKey"`
	LaunchID   string    `json:"launchId"`
	Pid        int       `json:"pid"`
	Workspace  string    `json:"workspace"`
	StartedAt  time.Time `json:"startedAt"`
}

type worker struct {
	info WorkerInfo
	cmd  *exec.Cmd
	done chan struct{}
}

// Workers admits session-owned worker processes up to a capacity. Active
// workers are never displaced and idle ones are never retired to make room:
// at capacity a new session is refused until a hosted session stops.
type Workers struct {
	capacity int
	root     string   // parent of per-session dirs, below the node workspace
	command  []string // worker argv
	env      []string
	budget   time.Duration

	mu       sync.Mutex
	sessions map[string]*worker
	admitted int64 // admissions ever, for metrics
}

// NewWorkers builds the admission core. root is created 0700.
func NewWorkers(capacity int, root string, command, env []string) (*Workers, error) {
	if capacity < 1 || capacity > MaxWorkerCapacity {
		return nil, ErrBadCapacity
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	return &Workers{capacity: capacity, root: root, command: command, env: env, budget: WorkerStopBudget,
		sessions: map[string]*worker{}}, nil
}

// Capacity returns {total, available}.
func (w *Workers) Capacity() (total, available int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.capacity, w.capacity - len(w.sessions)
}

// Admit starts the worker of sessionKey, or returns the running one. At
// capacity it returns ErrCapacity and changes nothing.
func (w *Workers) Admit(sessionKey, launchID string) (WorkerInfo, bool, error) {
	if sessionKey == "" {
		return WorkerInfo{}, false, cmdErr(CodeInvalidRequest, "sessionKey is required")
	}
	if len(w.command) == 0 {
		return WorkerInfo{}, false, cmdErr(CodeUnavailable, "this node hosts no workers")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.sessions[sessionKey]; ok {
		return cur.info, false, nil
	}
	if len(w.sessions) >= w.capacity {
		return WorkerInfo{}, false, ErrCapacity
	}
	sum := sha256.Sum256([]byte(sessionKey))
	dir := filepath.Join(w.root, hex.EncodeToString(sum[:12]))
	ws, tmp := filepath.Join(dir, "workspace"), filepath.Join(dir, "tmp")
	for _, d := range []string{dir, ws, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return WorkerInfo{}, false, cmdErr(CodeUnavailable, "prepare worker workspace")
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return WorkerInfo{}, false, cmdErr(CodeUnavailable, "prepare worker workspace")
		}
	}
	cmd := exec.Command(w.command[0], w.command[1:]...)
	cmd.Dir = ws
	cmd.Env = append(append([]string(nil), w.env...), "TMPDIR="+tmp, "OPENCLAW_WORKER_SESSION="+sessionKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return WorkerInfo{}, false, cmdErr(CodeUnavailable, "worker could not start")
	}
	wk := &worker{info: WorkerInfo{SessionKey: sessionKey, LaunchID: launchID, Pid: cmd.Process.Pid, Workspace: ws,
		StartedAt: time.Now()}, cmd: cmd, done: make(chan struct{})}
	w.sessions[sessionKey] = wk
	w.admitted++
	go func() {
		_ = cmd.Wait()
		w.mu.Lock()
		if w.sessions[sessionKey] == wk {
			delete(w.sessions, sessionKey)
		}
		w.mu.Unlock()
		close(wk.done)
	}()
	return wk.info, true, nil
}

// Stop ends the session's worker: SIGTERM to its group, SIGKILL after the
// 8 s budget. The slot is free when Stop returns.
func (w *Workers) Stop(ctx context.Context, sessionKey string) error {
	w.mu.Lock()
	wk, ok := w.sessions[sessionKey]
	w.mu.Unlock()
	if !ok {
		return cmdErr(CodeWorkerNotFound, "no worker for this session")
	}
	_ = syscall.Kill(-wk.info.Pid, syscall.SIGTERM)
	t := time.NewTimer(w.budget)
	defer t.Stop()
	select {
	case <-wk.done:
	case <-t.C:
		_ = syscall.Kill(-wk.info.Pid, syscall.SIGKILL)
		<-wk.done
	case <-ctx.Done():
		_ = syscall.Kill(-wk.info.Pid, syscall.SIGKILL)
		<-wk.done
	}
	return nil
}

// List returns the admitted workers ordered by session key.
func (w *Workers) List() []WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]WorkerInfo, 0, len(w.sessions))
	for _, wk := range w.sessions {
		out = append(out, wk.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionKey < out[j].SessionKey })
	return out
}

// StopAll stops every worker (node shutdown).
func (w *Workers) StopAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, info := range w.List() {
		wg.Add(1)
		go func(k string) { defer wg.Done(); _ = w.Stop(ctx, k) }(info.SessionKey)
	}
	wg.Wait()
}

// wire binding (oce's closest match to node-worker-supervisor-v6; see docs/protocol-nodehost.md)

type launchParams struct {
	LaunchID   string `json:"launchId"`
	SessionKey string `json:"sessionKey"`
}

type cancelParams struct {
	LaunchID   string `json:"launchId,omitempty"`
	SessionKey string `json:"sessionKey"`
}

func (h *Host) workerLaunch(raw []byte) (any, error) {
	var p launchParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	info, started, err := h.workers.Admit(p.SessionKey, p.LaunchID)
	if errors.Is(err, ErrCapacity) {
		return nil, cmdErr(CodeCapacity, "all %d worker slots hold active sessions; retry after one stops", h.workers.capacity)
	}
	if err != nil {
		return nil, err
	}
	h.inventoryChanged()
	total, avail := h.workers.Capacity()
	return map[string]any{"ok": true, "launchId": p.LaunchID, "sessionKey": info.SessionKey, "started": started,
		"capacity": map[string]int{"total": total, "available": avail}}, nil
}

func (h *Host) workerCancel(ctx context.Context, raw []byte) (any, error) {
	var p cancelParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if err := h.workers.Stop(ctx, p.SessionKey); err != nil {
		return nil, err
	}
	h.inventoryChanged()
	total, avail := h.workers.Capacity()
	return map[string]any{"ok": true, "sessionKey": p.SessionKey, "capacity": map[string]int{"total": total, "available": avail}}, nil
}

func (h *Host) workerStatus(raw []byte) (any, error) {
	var p struct{}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	total, avail := h.workers.Capacity()
	return map[string]any{"ok": true, "workers": h.workers.List(), "capacity": map[string]int{"total": total, "available": avail}}, nil
}
