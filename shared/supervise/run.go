package supervise

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// RunSpec describes a one-shot helper command (login, probe, doctor).
type RunSpec struct {
	Name string   // log label; default base name of Path
	Path string   // program; a name without a slash is looked up in PATH
	Args []string // argv[1:]
	Env  []string // complete environment; nil inherits (strip secrets with Env)
	Dir  string
	// Stdin is written to the child's stdin, which is then closed: the only
	// way a secret reaches a helper.
	Stdin []byte
	// Timeout kills the whole group with SIGKILL when it expires; zero means
	// only ctx bounds the run.
	Timeout time.Duration
	// OutputLimit caps each of stdout and stderr; writing past it kills the
	// group. Zero means DefaultOutputLimit.
	OutputLimit int
}

// RunResult is what a one-shot command produced.
type RunResult struct {
	Status         ExitStatus
	Stdout, Stderr []byte // at most OutputLimit bytes each
	TimedOut       bool   // killed at Timeout
	OutputLimited  bool   // killed for exceeding OutputLimit
}

// RunCommand runs a one-shot command in its own process group and returns
// its status and capped output. A timeout, an output overflow or the end of
// ctx kills the whole group at once (grandchildren included) and returns
// ErrTimeout, ErrOutputLimit or ctx's error together with what was captured.
// Without New in the process, only the command's own pid is reaped.
func RunCommand(ctx context.Context, rs RunSpec) (RunResult, error) {
	global.start(false)
	return run(ctx, rs, func(spec Spec) (*Process, error) {
		return start(ctx, spec, slogDiscard, nil)
	})
}

// Run is RunCommand for a child of s: a stop signal received meanwhile
// kills it at once (one-shots have nothing to drain), and after a stop
// request it fails with ErrStopping.
func (s *Supervisor) Run(ctx context.Context, rs RunSpec) (RunResult, error) {
	return run(ctx, rs, func(spec Spec) (*Process, error) { return s.Start(ctx, spec) })
}

func run(ctx context.Context, rs RunSpec, startFn func(Spec) (*Process, error)) (RunResult, error) {
	limit := rs.OutputLimit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	if limit < 0 || rs.Timeout < 0 {
		return RunResult{}, fmt.Errorf("%w: negative limit or timeout", ErrInvalidSpec)
	}
	over := make(chan struct{})
	var overOnce sync.Once
	hit := func() { overOnce.Do(func() { close(over) }) }
	stdout := &capWriter{limit: limit, hit: hit}
	stderr := &capWriter{limit: limit, hit: hit}
	spec := Spec{Name: rs.Name, Path: rs.Path, Args: rs.Args, Env: rs.Env, Dir: rs.Dir,
		Stdout: stdout, Stderr: stderr}
	if rs.Stdin != nil {
		spec.Stdin = bytes.NewReader(rs.Stdin)
	}
	p, err := startFn(spec)
	if err != nil {
		return RunResult{}, err
	}
	var deadline <-chan time.Time
	if rs.Timeout > 0 {
		t := time.NewTimer(rs.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	var res RunResult
	var cause error
	select {
	case <-p.Exited():
	case <-deadline:
		res.TimedOut, cause = true, ErrTimeout
	case <-over:
		res.OutputLimited, cause = true, ErrOutputLimit
	case <-ctx.Done():
		cause = ctx.Err()
	}
	if cause != nil {
		_ = p.Kill()
	}
	// SIGKILL leaves the child no way to linger; Done follows promptly.
	<-p.Done()
	select {
	case <-over:
		// Overflow racing the exit still means the output is incomplete.
		if cause == nil {
			res.OutputLimited, cause = true, ErrOutputLimit
		}
	default:
	}
	res.Status = p.status
	res.Stdout, res.Stderr = stdout.bytes(), stderr.bytes()
	if cause != nil {
		return res, fmt.Errorf("supervise: %s: %w", p.name, cause)
	}
	return res, nil
}

// capWriter keeps the first limit bytes and reports the first overflow; it
// keeps accepting (and dropping) bytes so the child never blocks on the pipe.
type capWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	hit   func()
}

func (w *capWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.limit - w.buf.Len()
	if len(b) > room {
		w.buf.Write(b[:max(room, 0)])
		w.hit()
		return len(b), nil
	}
	w.buf.Write(b)
	return len(b), nil
}

func (w *capWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}
