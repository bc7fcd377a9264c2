package supervise

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reaper is the one process-wide collector of child statuses. It is the only
// code that waits for children: Start registers a pid under mu in the same
// critical section as the fork, so the reaper can never collect a status
// before its waiter is known.
type reaper struct {
	mu      sync.Mutex
	procs   map[int]*Process // pids started here, not yet collected
	all     atomic.Bool      // reap every child (subreaper / PID 1), not only procs
	orphans atomic.Uint64    // statuses of pids not started here, discarded
	once    sync.Once
	wake    chan os.Signal
}

var global = &reaper{procs: map[int]*Process{}}

// start installs the SIGCHLD loop once per process; reapAll, once set, stays.
func (r *reaper) start(reapAll bool) {
	if reapAll {
		r.all.Store(true)
	}
	r.once.Do(func() {
		r.wake = make(chan os.Signal, 1)
		signal.Notify(r.wake, syscall.SIGCHLD)
		go r.loop()
	})
	// Zombies that predate the handler produce no further SIGCHLD.
	r.kick()
}

func (r *reaper) kick() {
	select {
	case r.wake <- syscall.SIGCHLD:
	default:
	}
}

func (r *reaper) loop() {
	for range r.wake {
		r.drain()
	}
}

// drain collects every child that has exited. SIGCHLDs coalesce, so one
// wake-up must empty the queue; the buffered wake channel re-arms for exits
// that happen during the drain.
func (r *reaper) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.all.Load() {
		for {
			pid, err := peekExited(unix.P_ALL, 0)
			if err != nil || pid <= 0 {
				return
			}
			r.collect(pid)
		}
	}
	for pid := range r.procs {
		if got, err := peekExited(unix.P_PID, pid); err == nil && got == pid {
			r.collect(pid)
		}
	}
}

// collect takes the status of an exited child (mu held). For a pid started
// here it first kills what is left of the child's process group: the zombie
// leader still reserves the pid, so -pid cannot name an unrelated group.
func (r *reaper) collect(pid int) {
	p := r.procs[pid]
	if p != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, unix.WALL, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if p == nil {
		r.orphans.Add(1)
		return
	}
	delete(r.procs, pid)
	p.exited(statusFrom(ws))
}

// spawn forks the child and registers it atomically with respect to drain.
func (r *reaper) spawn(argv0 string, argv []string, attr *syscall.ProcAttr, p *Process) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(argv0, argv, attr)
	if err != nil {
		return err
	}
	p.pid = pid
	r.procs[pid] = p
	return nil
}

// signalGroup signals p's process group while p's pid is still reserved.
func (r *reaper) signalGroup(p *Process, sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.reaped {
		return ErrFinished
	}
	if err := unix.Kill(-p.pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// siginfo mirrors the kernel's siginfo_t for SIGCHLD (x/sys/unix hides the
// union that carries si_pid).
type siginfo struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	status                int32
	_                     [100]byte
}

// peekExited returns the pid of an exited child matching (idtype, id) without
// collecting it (WNOWAIT), or 0 when none has exited.
func peekExited(idtype, id int) (int, error) {
	for {
		var info siginfo
		_, _, e := unix.Syscall6(unix.SYS_WAITID, uintptr(idtype), uintptr(id), uintptr(unsafe.Pointer(&info)),
			unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(info.pid), nil
	}
}

// ReapedOrphans counts the statuses of processes this package did not start
// (orphaned descendants) that the process-wide reaper has collected.
func ReapedOrphans() uint64 { return global.orphans.Load() }
