package compute

import (
	"context"
	"errors"
	"io"

	"oce.dev/oce/coordinator/state"
)

// LogReader is optionally implemented by a driver that can read the logs of
// a revision's supervisors (occ agent logs, the console's Logs tab).
type LogReader interface {
	// Logs writes the container's log to w: the last opts.Tail lines (all
	// when 0), then, with opts.Follow, what it appends until ctx ends. A
	// revision without such logs is an error wrapping ErrNoLogs.
	Logs(ctx context.Context, rev state.Revision, opts LogOptions, w io.Writer) error
}

// Containers whose logs LogReader serves.
const (
	ContainerGateway = "gateway"
	ContainerHarness = "harness"
)

// LogOptions select what LogReader.Logs writes.
type LogOptions struct {
	Container string // ContainerGateway or ContainerHarness
	Follow    bool
	Tail      int
}

// ErrNoLogs: the revision has no log for the container on this driver.
var ErrNoLogs = errors.New("compute: no logs for this revision and container")
