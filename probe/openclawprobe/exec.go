package openclawprobe

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"oce.dev/oce/shared/cgroupcpu"
)

// drainGrace bounds the wait for the stdout pipe to close after the probe's
// process group was killed (a descendant that left the group could hold it).
const drainGrace = 2 * time.Second

type execSpec struct {
	argv       []string
	dir        string
	env        []string
	cap        time.Duration
	cgroupRoot string
	limit      int
}

// outcome is everything classify needs about one probe process.
type outcome struct {
	startErr  error
	capHit    bool
	overflow  bool
	cancelled error
	state     *os.ProcessState
	waitErr   error
	readErr   error
	stdout    []byte
	elapsed   time.Duration
	cpuWaitMs *int64
}

type readResult struct {
	data     []byte
	overflow bool
	err      error
}

// execute runs the probe in its own process group with stdin and stderr on
// /dev/null (stderr can carry provider text, which is never kept) and at most
// spec.limit bytes of stdout. The group is killed with SIGKILL at the cap, on
// overflow, on ctx cancellation, and after the leader exits (so no helper
// outlives the probe). The CPU wait counter starts right before the spawn.
func execute(ctx context.Context, spec execSpec) outcome {
	r, w, err := os.Pipe()
	if err != nil {
		return outcome{startErr: err}
	}
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout = spec.dir, spec.env, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	counter := cgroupcpu.NewWaitCounter(spec.cgroupRoot)
	start := time.Now()
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return outcome{startErr: err, elapsed: time.Since(start), cpuWaitMs: counter.Since()}
	}
	pgid := cmd.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

	overflowed := make(chan struct{})
	readDone := make(chan readResult, 1)
	go func() {
		buf, over, err := readLimited(r, spec.limit)
		if over {
			close(overflowed)
			_, _ = io.Copy(io.Discard, r)
		}
		readDone <- readResult{buf, over, err}
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	timer := time.NewTimer(spec.cap)
	defer timer.Stop()
	var out outcome
	select {
	case out.waitErr = <-waitDone:
	case <-timer.C:
		out.capHit = true
		killGroup()
		out.waitErr = <-waitDone
	case <-overflowed:
		killGroup()
		out.waitErr = <-waitDone
	case <-ctx.Done():
		out.cancelled = ctx.Err()
		killGroup()
		out.waitErr = <-waitDone
	}
	out.elapsed = time.Since(start)
	out.cpuWaitMs = counter.Since()
	out.state = cmd.ProcessState
	killGroup()

	select {
	case rr := <-readDone:
		out.stdout, out.overflow, out.readErr = rr.data, rr.overflow, rr.err
	case <-time.After(drainGrace):
		out.readErr = errors.New("stdout still open after the probe exited")
	}
	_ = r.Close()
	return out
}

// readLimited reads up to limit bytes; over is true when more followed.
func readLimited(r io.Reader, limit int) (buf []byte, over bool, err error) {
	buf, err = io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if len(buf) > limit {
		return buf[:limit], true, err
	}
	return buf, false, err
}
