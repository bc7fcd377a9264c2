package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Spec describes a child process.
type Spec struct {
	// Name labels the child in logs; defaults to the base name of Path. Logs
	// never carry Args or Env (they may hold paths or secrets).
	Name string
	// Path is the program; a name without a slash is looked up in PATH.
	Path string
	// Args are the arguments after the program name (argv[1:]).
	Args []string
	// Env is the complete environment; nil inherits this process's. Use Env
	// or MinimalEnv to strip credentials.
	Env []string
	// Dir is the working directory; empty keeps this process's.
	Dir string
	// Stdin, Stdout and Stderr: nil means /dev/null; an *os.File is handed to
	// the child as is; anything else is connected through a pipe. Secrets go
	// on Stdin, never in Args or Env.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// ExtraFiles become the child's fds 3, 4, ….
	ExtraFiles []*os.File
	// StopBudget is how long the group may take to exit after StopSignal
	// before SIGKILL. Zero means no grace: a stop kills at once. Use the
	// named budgets (GatewayStopBudget, CodexStopBudget, …).
	StopBudget time.Duration
	// StopSignal is what Stop sends to the group; default SIGTERM. A
	// forwarded stop signal is forwarded as received.
	StopSignal os.Signal
	// DrainBudget bounds copying piped output after exit; default
	// OutputDrainBudget.
	DrainBudget time.Duration
}

// Process is a child started by Start. Its pid leads the child's process
// group; the group is killed when the child exits, so no member outlives it.
type Process struct {
	name        string
	pid         int
	stopBudget  time.Duration
	stopSignal  syscall.Signal
	drainBudget time.Duration
	log         *slog.Logger

	exitedCh chan struct{} // closed by the reaper when the status is known
	doneCh   chan struct{} // closed once output is drained too
	status   ExitStatus    // set before exitedCh closes
	reaped   bool          // guarded by global.mu

	copiers  sync.WaitGroup
	readEnds []*os.File // parent read ends of output pipes
	stdinW   *os.File   // parent write end of the stdin pipe
	onDone   func()
}

// Pid is the child's pid (and process group id).
func (p *Process) Pid() int { return p.pid }

// Name is the child's label.
func (p *Process) Name() string { return p.name }

// Done is closed when the child has exited and its output is drained.
func (p *Process) Done() <-chan struct{} { return p.doneCh }

// Exited is closed as soon as the child's status has been collected.
func (p *Process) Exited() <-chan struct{} { return p.exitedCh }

// Status returns the exit status once Exited is closed.
func (p *Process) Status() (ExitStatus, bool) {
	select {
	case <-p.exitedCh:
		return p.status, true
	default:
		return ExitStatus{}, false
	}
}

// Wait blocks until the child has exited and its output is drained, or ctx
// ends (the child keeps running then).
func (p *Process) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-p.doneCh:
		return p.status, nil
	case <-ctx.Done():
		return ExitStatus{}, fmt.Errorf("supervise: wait for %s: %w", p.name, ctx.Err())
	}
}

// Signal sends sig to the child's whole process group. It returns
// ErrFinished once the child has been collected.
func (p *Process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("%w: signal %v", ErrInvalidSpec, sig)
	}
	return global.signalGroup(p, s)
}

// Kill sends SIGKILL to the child's whole process group.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Stop sends the stop signal to the group, waits the stop budget, then kills
// the group, and returns once the child is gone. If ctx ends first the group
// is killed and ctx's error returned.
func (p *Process) Stop(ctx context.Context) error { return p.stop(ctx, p.stopSignal) }

func (p *Process) stop(ctx context.Context, sig syscall.Signal) error {
	select {
	case <-p.exitedCh:
		return p.waitDone(ctx)
	default:
	}
	if p.stopBudget > 0 {
		p.log.Info("process stop", "name", p.name, "pid", p.pid, "signal", sig.String(), "budget_ms", p.stopBudget.Milliseconds())
		if err := p.Signal(sig); err != nil && !errors.Is(err, ErrFinished) {
			return fmt.Errorf("supervise: stop %s: %w", p.name, err)
		}
		t := time.NewTimer(p.stopBudget)
		defer t.Stop()
		select {
		case <-p.exitedCh:
			return p.waitDone(ctx)
		case <-t.C:
			p.log.Warn("process stop budget exhausted", "name", p.name, "pid", p.pid)
		case <-ctx.Done():
		}
	}
	if err := p.Kill(); err != nil && !errors.Is(err, ErrFinished) {
		return fmt.Errorf("supervise: kill %s: %w", p.name, err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("supervise: stop %s: %w", p.name, ctx.Err())
	}
	return p.waitDone(ctx)
}

func (p *Process) waitDone(ctx context.Context) error {
	_, err := p.Wait(ctx)
	return err
}

// exited is called by the reaper (global.mu held): record and publish.
func (p *Process) exited(st ExitStatus) {
	p.status = st
	p.reaped = true
	close(p.exitedCh)
}

// finish drains output after exit and then closes Done.
func (p *Process) finish() {
	<-p.exitedCh
	if p.stdinW != nil {
		p.stdinW.Close()
	}
	drained := make(chan struct{})
	go func() { p.copiers.Wait(); close(drained) }()
	t := time.NewTimer(p.drainBudget)
	select {
	case <-drained:
	case <-t.C:
		// A descendant outside the group still holds the pipe.
		for _, f := range p.readEnds {
			f.Close()
		}
		<-drained
	}
	t.Stop()
	for _, f := range p.readEnds {
		f.Close()
	}
	p.log.Info("process exited", "name", p.name, "pid", p.pid, "status", p.status.String(), "code", p.status.ShellCode())
	if p.onDone != nil {
		p.onDone()
	}
	close(p.doneCh)
}

// start forks the child described by spec; register (if any) runs under the
// fork lock so a Supervisor can track it atomically.
func start(ctx context.Context, spec Spec, log *slog.Logger, onDone func()) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("supervise: start: %w", err)
	}
	if spec.Path == "" {
		return nil, fmt.Errorf("%w: empty Path", ErrInvalidSpec)
	}
	path := spec.Path
	if filepath.Base(path) == path {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		path = lp
	}
	stopSig := syscall.SIGTERM
	if spec.StopSignal != nil {
		s, ok := spec.StopSignal.(syscall.Signal)
		if !ok {
			return nil, fmt.Errorf("%w: stop signal %v", ErrInvalidSpec, spec.StopSignal)
		}
		stopSig = s
	}
	if spec.StopBudget < 0 || spec.DrainBudget < 0 {
		return nil, fmt.Errorf("%w: negative budget", ErrInvalidSpec)
	}
	name := spec.Name
	if name == "" {
		name = filepath.Base(path)
	}
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	p := &Process{
		name: name, stopBudget: spec.StopBudget, stopSignal: stopSig,
		drainBudget: spec.DrainBudget, log: log,
		exitedCh: make(chan struct{}), doneCh: make(chan struct{}), onDone: onDone,
	}
	if p.drainBudget == 0 {
		p.drainBudget = OutputDrainBudget
	}
	st := &stdio{}
	defer st.closeChildEnds()
	fds := make([]*os.File, 0, 3+len(spec.ExtraFiles))
	in, err := st.input(spec.Stdin)
	if err != nil {
		st.abort()
		return nil, err
	}
	out, err := st.output(spec.Stdout)
	if err != nil {
		st.abort()
		return nil, err
	}
	errf := out
	if !sameWriter(spec.Stdout, spec.Stderr) {
		if errf, err = st.output(spec.Stderr); err != nil {
			st.abort()
			return nil, err
		}
	}
	fds = append(fds, in, out, errf)
	fds = append(fds, spec.ExtraFiles...)
	files := make([]uintptr, len(fds))
	for i, f := range fds {
		files[i] = f.Fd()
	}
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: env, Files: files,
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	argv := append([]string{path}, spec.Args...)
	err = global.spawn(path, argv, attr, p)
	runtime.KeepAlive(fds)
	if err != nil {
		st.abort()
		return nil, fmt.Errorf("%w: %s: %w", ErrStart, name, err)
	}
	p.readEnds, p.stdinW = st.readEnds, st.stdinW
	for _, c := range st.copies {
		p.copiers.Add(1)
		go func() { defer p.copiers.Done(); c() }()
	}
	if st.feed != nil {
		go st.feed()
	}
	go p.finish()
	log.Info("process started", "name", name, "pid", p.pid)
	return p, nil
}

// stdio builds the child's fds 0-2 and the parent's copy loops.
type stdio struct {
	childEnds []*os.File // closed in the parent after the fork
	readEnds  []*os.File
	stdinW    *os.File
	copies    []func()
	feed      func()
}

func (s *stdio) input(r io.Reader) (*os.File, error) {
	switch v := r.(type) {
	case nil:
		return s.devNull(os.O_RDONLY)
	case *os.File:
		return v, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: stdin pipe: %w", ErrStart, err)
	}
	s.childEnds = append(s.childEnds, pr)
	s.stdinW = pw
	s.feed = func() {
		// EPIPE when the child does not read all of it is not an error here.
		_, _ = io.Copy(pw, r)
		pw.Close()
	}
	return pr, nil
}

func (s *stdio) output(w io.Writer) (*os.File, error) {
	switch v := w.(type) {
	case nil:
		return s.devNull(os.O_WRONLY)
	case *os.File:
		return v, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: output pipe: %w", ErrStart, err)
	}
	s.childEnds = append(s.childEnds, pw)
	s.readEnds = append(s.readEnds, pr)
	s.copies = append(s.copies, func() { _, _ = io.Copy(w, pr) })
	return pw, nil
}

func (s *stdio) devNull(flag int) (*os.File, error) {
	f, err := os.OpenFile(os.DevNull, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	s.childEnds = append(s.childEnds, f)
	return f, nil
}

func (s *stdio) closeChildEnds() {
	for _, f := range s.childEnds {
		f.Close()
	}
	s.childEnds = nil
}

func (s *stdio) abort() {
	s.closeChildEnds()
	for _, f := range s.readEnds {
		f.Close()
	}
	if s.stdinW != nil {
		s.stdinW.Close()
	}
}

// sameWriter compares writers that may be of uncomparable dynamic types.
func sameWriter(a, b io.Writer) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a != nil && a == b
}
