package memory

import (
	"context"
	"fmt"
	"io"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

var _ compute.LogReader = (*Driver)(nil)

// Logs implements compute.LogReader: one line per driver call on the
// revision, and its held failure when one is injected.
func (d *Driver) Logs(_ context.Context, rev state.Revision, opts compute.LogOptions, w io.Writer) error {
	d.mu.Lock()
	var lines []string
	for _, c := range d.calls {
		if c.ID == rev.ID {
			lines = append(lines, fmt.Sprintf(`{"msg":"memory driver call","op":%q,"container":%q}`, c.Op, opts.Container))
		}
	}
	if h, ok := d.held[rev.ID]; ok {
		lines = append(lines, fmt.Sprintf(`{"msg":"startup failure held","code":%q}`, h.HeldCode))
	}
	d.mu.Unlock()
	if len(lines) == 0 {
		return fmt.Errorf("%w: revision %s", compute.ErrNoLogs, rev.ID)
	}
	if opts.Tail > 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
