package codexprobe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"oce.dev/oce/shared/supervise"
)

// attemptOutputLimit caps one attempt's captured stdout (its JSON events).
const attemptOutputLimit = 4 << 20

type attemptExit struct {
	exit
	startErr bool // the binary could not be started
}

// runAttempt runs one codex process through supervise.RunCommand (its own
// process group, stdin and stderr never read, cooperating with a
// supervisor's reaper), killing the whole group at the attempt cap or when
// ctx ends. A non-nil error means ctx ended (the caller is terminating).
func runAttempt(ctx context.Context, cfg *Config, model string, limit time.Duration) (attemptExit, []event, error) {
	workdir, err := os.MkdirTemp(cfg.TmpDir, "codex-probe-")
	if err != nil {
		return attemptExit{exit: exit{code: -1}, startErr: true}, nil, nil
	}
	defer os.RemoveAll(workdir)

	res, err := supervise.RunCommand(ctx, supervise.RunSpec{Name: "codex-probe", Path: cfg.Codex,
		Args: args(cfg, model, workdir), Env: env(cfg), Dir: workdir, Timeout: limit, OutputLimit: attemptOutputLimit})
	if ctx.Err() != nil {
		return attemptExit{}, nil, ctx.Err()
	}
	if errors.Is(err, supervise.ErrStart) || errors.Is(err, supervise.ErrNotFound) || errors.Is(err, supervise.ErrInvalidSpec) {
		return attemptExit{exit: exit{code: -1}, startErr: true}, nil, nil
	}
	x := attemptExit{exit: exitOf(res.Status)}
	// Only a kill by the cap is a timeout; an exit that beat it keeps its
	// own classification.
	x.timedOut = res.TimedOut
	if x.timedOut && x.signal == "" {
		x.signal = "SIGKILL"
	}
	return x, readEvents(bytes.NewReader(res.Stdout)), nil
}

// readEvents reads JSON lines from stdout until EOF, keeping at most maxLines.
func readEvents(r io.Reader) []event {
	var evs []event
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 && len(evs) < maxLines {
			evs = append(evs, parseEvent(line))
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, br)
			return evs
		}
	}
}

// readLine reads one line, truncating (and so invalidating) lines over maxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		} else {
			line = append(line[:0], '!') // too long: not JSON
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

func exitOf(st supervise.ExitStatus) exit {
	if !st.Exited {
		name := unix.SignalName(st.Signal)
		if name == "" {
			name = "SIGUNKNOWN" // the log carries only recognized names
		}
		return exit{code: -1, signal: name}
	}
	return exit{code: st.Code}
}
