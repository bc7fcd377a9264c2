package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// Log reading bounds.
const (
	// LogFollowPoll is how often a followed log is checked for new lines.
	LogFollowPoll = 250 * time.Millisecond
	// logTailWindow bounds how much of a log's end is read to find the
	// last lines.
	logTailWindow = 4 << 20
)

var _ compute.LogReader = (*Driver)(nil)

// Logs implements compute.LogReader from the revision's supervisor log
// files (gateway.log, harness.log in the revision's directory).
func (d *Driver) Logs(ctx context.Context, rev state.Revision, opts compute.LogOptions, w io.Writer) error {
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return err
	}
	if opts.Container != compute.ContainerGateway && opts.Container != compute.ContainerHarness {
		return fmt.Errorf("%w: container %q", compute.ErrNoLogs, opts.Container)
	}
	f, err := os.Open(filepath.Join(d.RevisionDir(rev), opts.Container+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s has no %s log here", compute.ErrNoLogs, rev.ID, opts.Container)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := copyTail(f, opts.Tail, w); err != nil {
		return err
	}
	if !opts.Follow {
		return nil
	}
	t := time.NewTicker(LogFollowPoll)
	defer t.Stop()
	for {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// copyTail writes the last n lines of f (all when n <= 0) and leaves f at
// its end.
func copyTail(f *os.File, n int, w io.Writer) error {
	if n <= 0 {
		_, err := io.Copy(w, f)
		return err
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	start := max(end-logTailWindow, 0)
	buf := make([]byte, end-start)
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	lines := bytes.SplitAfter(buf, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		if _, err := w.Write(l); err != nil {
			return err
		}
	}
	return nil
}
