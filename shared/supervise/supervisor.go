package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Options configure a Supervisor.
type Options struct {
	// Log receives JSON-able records (name, pid, status); default discards.
	Log *slog.Logger
	// NoSubreaper keeps the process from registering as a child subreaper
	// and restricts reaping to pids started by this package, for processes
	// that also start children through os/exec. The default (false) makes a
	// supervisor that is not PID 1 a subreaper that reaps every orphan. As
	// PID 1 every child is always reaped: nobody else would.
	NoSubreaper bool
	// NoSignals leaves SIGTERM/SIGINT alone: nothing is forwarded, and Hold
	// and StopRequested see only StopAll. For embedding in programs that own
	// their signal handling (and for tests).
	NoSignals bool
}

// Supervisor owns a set of children and this process's stop signals.
//
// The first SIGTERM or SIGINT is forwarded (as received) to every child's
// process group, each of which is killed after its StopBudget; a second stop
// signal kills every group at once. Both are published on Signals.
type Supervisor struct {
	log    *slog.Logger
	sigs   chan os.Signal
	stopCh chan struct{}

	mu       sync.Mutex
	procs    map[*Process]struct{}
	stopping bool
	received int
}

// New makes a Supervisor. Unless opts.NoSubreaper, the process becomes a
// child subreaper (when not PID 1) and the process-wide reaper collects every
// child; the reaper is installed once per process and shared by all
// Supervisors and RunCommand.
func New(opts Options) (*Supervisor, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reapAll := !opts.NoSubreaper || IsPID1()
	if reapAll && !IsPID1() {
		if err := becomeSubreaper(); err != nil {
			return nil, err
		}
	}
	global.start(reapAll)
	s := &Supervisor{
		log: log, sigs: make(chan os.Signal, 8), stopCh: make(chan struct{}),
		procs: map[*Process]struct{}{},
	}
	if !opts.NoSignals {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		go func() {
			for sig := range ch {
				s.onSignal(sig)
			}
		}()
	}
	log.Info("supervisor ready", "pid", os.Getpid(), "pid1", IsPID1(), "reap_all", reapAll)
	return s, nil
}

// Start starts a child in its own process group and tracks it. ctx bounds
// the start only; end the child with Stop. After a stop request Start fails
// with ErrStopping.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, ErrStopping
	}
	var p *Process
	// forget reads p under s.mu, which Start holds until p is assigned.
	p, err := start(ctx, spec, s.log, func() { s.forget(&p) })
	if err != nil {
		return nil, err
	}
	s.procs[p] = struct{}{}
	return p, nil
}

func (s *Supervisor) forget(pp **Process) {
	s.mu.Lock()
	delete(s.procs, *pp)
	s.mu.Unlock()
}

// Signals publishes the stop signals this process received (first and
// second), for a main that must react beyond the automatic forwarding.
func (s *Supervisor) Signals() <-chan os.Signal { return s.sigs }

// StopRequested is closed at the first stop signal or StopAll.
func (s *Supervisor) StopRequested() <-chan struct{} { return s.stopCh }

// Hold blocks until a stop is requested (a stop signal or StopAll), then
// returns nil so the main can exit 0; it returns ctx's error if ctx ends
// first. It publishes and retries nothing: a held startup failure stays
// alive and unready (docs/design/reference.md#s1-8) without a restart loop.
func (s *Supervisor) Hold(ctx context.Context) error {
	select {
	case <-s.stopCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StopAll requests a stop and stops every child concurrently (stop signal,
// budget, SIGKILL of the group). It returns when all are gone, or with ctx's
// error after killing those that remain.
func (s *Supervisor) StopAll(ctx context.Context) error {
	procs := s.requestStop()
	errs := make(chan error, len(procs))
	for _, p := range procs {
		go func() { errs <- p.Stop(ctx) }()
	}
	var all []error
	for range procs {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// requestStop marks the supervisor stopping and snapshots its children.
func (s *Supervisor) requestStop() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopping {
		s.stopping = true
		close(s.stopCh)
	}
	procs := make([]*Process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	return procs
}

func (s *Supervisor) onSignal(sig os.Signal) {
	s.mu.Lock()
	s.received++
	n := s.received
	s.mu.Unlock()
	// Publish before StopRequested closes, so a main woken by Hold finds it.
	select {
	case s.sigs <- sig:
	default:
	}
	procs := s.requestStop()
	if n == 1 {
		s.log.Info("stop signal", "signal", sig.String(), "children", len(procs))
		ssig, _ := sig.(syscall.Signal)
		for _, p := range procs {
			go func() {
				if err := p.stop(context.Background(), ssig); err != nil {
					s.log.Warn("stop failed", "name", p.name, "pid", p.pid, "err", err.Error())
				}
			}()
		}
		return
	}
	s.log.Warn("second stop signal, killing", "signal", sig.String(), "children", len(procs))
	for _, p := range procs {
		if err := p.Kill(); err != nil && !errors.Is(err, ErrFinished) {
			s.log.Warn("kill failed", "name", p.name, "pid", p.pid, "err", fmt.Sprint(err))
		}
	}
}

var slogDiscard = slog.New(slog.DiscardHandler)
