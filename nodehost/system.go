package nodehost

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// system.run limits.
const (
	DefaultRunTimeout = 120 * time.Second
	MaxRunTimeout     = 30 * time.Minute
	MaxRunOutputBytes = 200 << 10
)

type runParams struct {
	Command              []string          `json:"command"`
	RawCommand           string            `json:"rawCommand,omitempty"`
	Cwd                  string            `json:"cwd,omitempty"`
	Env                  map[string]string `json:"env,omitempty"`
	TimeoutMs            *int64            `json:"timeoutMs,omitempty"`
	NeedsScreenRecording bool              `json:"needsScreenRecording,omitempty"`
	AgentID              string            `json:"agentId,omitempty"`
	SessionKey           string            `json:"sessionKey,omitempty"`
	RunID                string            `json:"runId,omitempty"`
	SuppressNotifyOnExit bool              `json:"suppressNotifyOnExit,omitempty"`
	SystemRunPlan        map[string]any    `json:"systemRunPlan,omitempty"`
	Approved             bool              `json:"approved,omitempty"`
	ApprovalDecision     string            `json:"approvalDecision,omitempty"`
	ApprovalSource       string            `json:"approvalSource,omitempty"`
}

// capped keeps at most n bytes.
type capped struct {
	buf bytes.Buffer
	n   int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.n - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

func (h *Host) systemRun(ctx context.Context, raw []byte) (any, error) {
	var p runParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return nil, cmdErr(CodeInvalidRequest, "command is required")
	}
	if p.NeedsScreenRecording {
		return nil, cmdErr(CodeRunDenied, "screen recording is not available on this node")
	}
	dir, cwd, err := h.runDir(p.Cwd)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	timeout := DefaultRunTimeout
	if p.TimeoutMs != nil && *p.TimeoutMs > 0 {
		timeout = time.Duration(*p.TimeoutMs) * time.Millisecond
		if timeout > MaxRunTimeout {
			timeout = MaxRunTimeout
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Command[0], p.Command[1:]...)
	// The child enters the directory through the descriptor the policy
	// opened (fork keeps it open until exec), never by a second path walk.
	cmd.Dir = "/proc/self/fd/" + strconv.Itoa(dir)
	cmd.Env = append(h.childEnv(p.Env), "PWD="+cwd)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr = &capped{n: MaxRunOutputBytes}, &capped{n: MaxRunOutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	exitCode := 0
	var errText any
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			exitCode = ee.ExitCode()
		} else {
			exitCode = -1
			errText = "command could not start"
		}
	}
	if timedOut {
		errText = "timed out"
	}
	return map[string]any{"exitCode": exitCode, "timedOut": timedOut, "success": err == nil && !timedOut,
		"stdout": stdout.buf.String(), "stderr": stderr.buf.String(), "error": errText}, nil
}

// runDir opens system.run's working directory beneath the workspace under
// the path policy (no "..", no symlink, no mount point at any component). A
// cwd outside the workspace is SYSTEM_RUN_DENIED; one that is missing, a
// symlink or not a directory gets the policy's code and runs nothing.
func (h *Host) runDir(cwd string) (int, string, error) {
	r := resolved{root: h.policy.Workspace}
	if cwd != "" {
		var err error
		if r, err = h.policy.resolve(cwd, false); err != nil {
			if code, _ := codeOf(err); code == CodeOutsideRoot {
				return -1, "", cmdErr(CodeRunDenied, "cwd must be inside the workspace")
			}
			return -1, "", err
		}
		if r.root != h.policy.Workspace {
			return -1, "", cmdErr(CodeRunDenied, "cwd must be inside the workspace")
		}
	}
	fd, err := h.policy.open(r, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return fd, r.abs(), nil
}

// childEnv is the node's own (credential-free) environment plus the
// request's; PWD is set by the caller to the working directory.
func (h *Host) childEnv(extra map[string]string) []string {
	env := make([]string, 0, len(h.baseEnv)+len(extra)+1)
	for _, kv := range h.baseEnv {
		if !strings.HasPrefix(kv, "PWD=") {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		if k == "" || k == "PWD" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			continue
		}
		env = append(env, k+"="+v)
	}
	return env
}

type whichParams struct {
	Bins []string `json:"bins"`
}

func (h *Host) systemWhich(raw []byte) (any, error) {
	var p whichParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	out := map[string]string{}
	path := os.Getenv("PATH")
	for _, b := range p.Bins {
		if b == "" || strings.ContainsAny(b, "/\x00") {
			continue
		}
		for _, dir := range filepath.SplitList(path) {
			full := filepath.Join(dir, b)
			if st, err := os.Stat(full); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				out[b] = full
				break
			}
		}
	}
	return map[string]any{"bins": out}, nil
}
