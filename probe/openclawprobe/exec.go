package openclawprobe

import (
	"context"
	"errors"
	"time"

	"oce.dev/oce/shared/cgroupcpu"
	"oce.dev/oce/shared/supervise"
)

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
	status    *supervise.ExitStatus
	waitErr   error
	readErr   error
	stdout    []byte
	elapsed   time.Duration
	cpuWaitMs *int64
}

// execute runs the probe through supervise.RunCommand (so it cooperates with
// a supervisor's reaper): its own process group, stdin on /dev/null, stderr
// captured and discarded (it can carry provider text), at most spec.limit
// bytes of stdout. The group is killed with SIGKILL at the cap, on overflow,
// on ctx cancellation, and after the leader exits. The CPU wait counter
// starts right before the spawn.
func execute(ctx context.Context, spec execSpec) outcome {
	counter := cgroupcpu.NewWaitCounter(spec.cgroupRoot)
	start := time.Now()
	res, err := supervise.RunCommand(ctx, supervise.RunSpec{Name: "openclaw-probe", Path: spec.argv[0], Args: spec.argv[1:],
		Env: spec.env, Dir: spec.dir, Timeout: spec.cap, OutputLimit: spec.limit})
	out := outcome{elapsed: time.Since(start), cpuWaitMs: counter.Since(), stdout: res.Stdout}
	switch {
	case errors.Is(err, supervise.ErrStart), errors.Is(err, supervise.ErrNotFound), errors.Is(err, supervise.ErrInvalidSpec):
		out.startErr = err
		return out
	case res.TimedOut || errors.Is(err, supervise.ErrTimeout):
		out.capHit = true
	case res.OutputLimited || errors.Is(err, supervise.ErrOutputLimit):
		out.overflow = true
	case ctx.Err() != nil:
		out.cancelled = ctx.Err()
	case err != nil:
		out.waitErr = err
		return out
	}
	st := res.Status
	out.status = &st
	return out
}
