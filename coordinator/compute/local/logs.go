package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// maxLogScan bounds how much of a log file Logs reads to find its tail.
const maxLogScan = 16 << 20

var _ compute.LogReader = (*Driver)(nil)

// Logs implements compute.LogReader from the revision's supervisor log
// files (<revision>/gateway.log, harness.log). Following is not offered:
// the tail is written and Logs returns.
func (d *Driver) Logs(_ context.Context, rev state.Revision, opts compute.LogOptions, w io.Writer) error {
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return err
	}
	name := "gateway.log"
	if opts.Container == compute.ContainerHarness {
		name = "harness.log"
	}
	f, err := os.Open(filepath.Join(d.RevisionDir(rev), name))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: revision %s keeps no %s log here", compute.ErrNoLogs, rev.ID, opts.Container)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxLogScan {
		if _, err := f.Seek(st.Size()-maxLogScan, io.SeekStart); err != nil {
			return err
		}
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if opts.Tail > 0 && len(lines) > opts.Tail {
			lines = lines[1:]
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return sc.Err()
}
