package local

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

// proc is one supervisor started under tini, or adopted from a pid record
// after a coordinator restart.
type proc struct {
	Role      string        `json:"role"` // gateway | harness
	PID       int           `json:"pid"`
	StartTime uint64        `json:"startTime"` // /proc/<pid>/stat field 22: guards against pid reuse
	done      chan struct{} // closed when an owned process was reaped
}

// startProc starts argv under tini (-s subreaper, -e 143: SIGTERM exit is
// success) in its own process group, logging to logFile (0600).
func startProc(tini, role string, argv, env []string, dir, logFile string) (*proc, error) {
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: %s log: %w", role, err)
	}
	defer lf.Close()
	args := append([]string{"-s", "-e", "143", "--"}, argv...)
	cmd := exec.Command(tini, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local: start %s: %w", role, err)
	}
	p := &proc{Role: role, PID: cmd.Process.Pid, done: make(chan struct{})}
	p.StartTime, _ = procStartTime(p.PID)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// alive reports whether the process still runs (and is the one started).
func (p *proc) alive() bool {
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
	st, err := procStartTime(p.PID)
	if err != nil {
		return false
	}
	if p.StartTime != 0 && st != p.StartTime {
		return false
	}
	return !isZombie(p.PID)
}

// procStartTime reads field 22 (starttime) of /proc/<pid>/stat.
func procStartTime(pid int) (uint64, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, errors.New("local: short /proc stat")
	}
	// f starts at field 3 (state); starttime is field 22.
	return strconv.ParseUint(f[19], 10, 64)
}

func isZombie(pid int) bool {
	f, err := procStatFields(pid)
	return err == nil && len(f) > 0 && f[0] == "Z"
}

// procStatFields returns /proc/<pid>/stat fields from the state on (the
// command name may contain spaces, so split after its closing paren).
func procStatFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("local: malformed /proc stat")
	}
	return strings.Fields(s[i+1:]), nil
}

// descendants returns every live process below pid (by parent links), with
// their start times, so a stop can kill what outlived the supervisor.
func descendants(pid int) []proc {
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
		f, err := procStatFields(n)
		if err != nil || len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], n)
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, k := range children[c] {
			st, err := procStartTime(k)
			if err != nil {
				continue
			}
			out = append(out, proc{PID: k, StartTime: st})
			queue = append(queue, k)
		}
	}
	return out
}

// stopProc sends SIGTERM to the supervisor (tini forwards it; the
// supervisor runs its own graceful stop) and waits up to wait for it and
// every descendant to be gone. Descendants that outlive the supervisor get
// grace more, then everything left is SIGKILLed. It reports whether
// everything went by itself.
func stopProc(ctx context.Context, p *proc, wait, grace, poll time.Duration) (bool, error) {
	if p == nil {
		return true, nil
	}
	tree := append([]proc{*p}, descendants(p.PID)...)
	if p.alive() {
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
	}
	deadline := time.Now().Add(wait)
	leftover := time.Time{}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if !anyAlive(tree) {
			return true, nil
		}
		if leftover.IsZero() && !p.alive() {
			leftover = time.Now().Add(grace)
		}
		if time.Now().After(deadline) || (!leftover.IsZero() && time.Now().After(leftover)) {
			killAll(tree)
			for anyAlive(tree) {
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

func killAll(tree []proc) {
	for i := range tree {
		if tree[i].alive() {
			_ = syscall.Kill(tree[i].PID, syscall.SIGKILL)
		}
	}
}

func anyAlive(ps []proc) bool {
	for i := range ps {
		if ps[i].alive() {
			return true
		}
	}
	return false
}
