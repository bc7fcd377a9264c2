// Package proc starts, recognizes and stops the long-lived processes oce
// runs outside a supervisor tree: the local compute driver's supervisors
// and the processes `occ dev up` leaves running (the coordinator, the fake
// provider). A Process is recorded as a pid plus the kernel's start time of
// that pid (/proc/<pid>/stat field 22), so a later process — another
// coordinator, `occ dev down` — can tell the recorded process from an
// unrelated one that reused the pid.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a started or adopted process. Its JSON form is the record
// written to run.json and pid files.
type Process struct {
	Role      string `json:"role,omitempty"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22: guards against pid reuse
	// done is closed when a process this one started was reaped.
	done chan struct{}
}

// Start starts cmd (whose SysProcAttr the caller sets: a process group,
// a session, a parent-death signal) with stdout and stderr appended to
// logFile (created 0600), records it and reaps it in the background.
func Start(cmd *exec.Cmd, role, logFile string) (*Process, error) {
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("proc: %s log: %w", role, err)
	}
	defer lf.Close()
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("proc: start %s: %w", role, err)
	}
	p := &Process{Role: role, PID: cmd.Process.Pid, done: make(chan struct{})}
	p.StartTime, _ = StartTime(p.PID)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Alive reports whether the process still runs and is the one recorded.
func (p *Process) Alive() bool {
	if p == nil || p.PID <= 0 {
		return false
	}
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
		}
	}
	f, err := statFields(p.PID)
	if err != nil || len(f) < 20 || f[0] == "Z" {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && (p.StartTime == 0 || st == p.StartTime)
}

// Signal sends sig to the process if it is still the recorded one.
func (p *Process) Signal(sig syscall.Signal) {
	if p.Alive() {
		_ = syscall.Kill(p.PID, sig)
	}
}

// StartTime reads field 22 (starttime) of /proc/<pid>/stat.
func StartTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, errors.New("proc: short /proc stat")
	}
	// f starts at field 3 (state); starttime is field 22.
	return strconv.ParseUint(f[19], 10, 64)
}

// statFields returns /proc/<pid>/stat fields from the state on (the
// command name may contain spaces, so split after its closing paren).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("proc: malformed /proc stat")
	}
	return strings.Fields(s[i+1:]), nil
}

// childMap maps every live pid to its direct children (by parent links).
func childMap() map[int][]int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := statFields(n)
		if err != nil || len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], n)
	}
	return children
}

// Children returns the pids of pid's live direct children.
func Children(pid int) []int { return childMap()[pid] }

// Descendants returns every live process below pid (by parent links), so
// a stop can kill what outlived the process it started.
func Descendants(pid int) []*Process {
	children := childMap()
	var out []*Process
	queue := []int{pid}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, k := range children[c] {
			st, err := StartTime(k)
			if err != nil {
				continue
			}
			out = append(out, &Process{PID: k, StartTime: st})
			queue = append(queue, k)
		}
	}
	return out
}

// Stop sends SIGTERM to p (a supervisor runs its own graceful stop on it)
// and waits up to wait for p and every descendant it had to be gone.
// Descendants that outlive p get grace more; then everything left is
// SIGKILLed. It reports whether everything went by itself. A p that is
// nil or no longer runs is gone: the children of a process that ended were
// reparented, and a reused pid's children are not ours to stop.
func Stop(ctx context.Context, p *Process, wait, grace, poll time.Duration) (bool, error) {
	if !p.Alive() {
		return true, nil
	}
	tree := append([]*Process{p}, Descendants(p.PID)...)
	p.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(wait)
	leftover := time.Time{}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if !AnyAlive(tree) {
			return true, nil
		}
		if leftover.IsZero() && !p.Alive() {
			leftover = time.Now().Add(grace)
		}
		if time.Now().After(deadline) || (!leftover.IsZero() && time.Now().After(leftover)) {
			for _, q := range tree {
				q.Signal(syscall.SIGKILL)
			}
			for AnyAlive(tree) {
				select {
				case <-ctx.Done():
					return false, ctx.Err()
				case <-tick.C:
				}
			}
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick.C:
		}
	}
}

// AnyAlive reports whether any of ps runs.
func AnyAlive(ps []*Process) bool {
	for _, p := range ps {
		if p.Alive() {
			return true
		}
	}
	return false
}
