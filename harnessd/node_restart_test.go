package harnessd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A nodehost that exits quickly and the same way every time is restarted
// with a doubling delay and warned about once; a different exit, or one
// after a stable run, is news again and starts the delay over.
func TestNodeRestartsBackOffAndWarnOnce(t *testing.T) {
	type step struct {
		status string
		ran    time.Duration
		delay  time.Duration
		warn   bool
	}
	quick := 10 * time.Millisecond
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the same quick exit doubles the delay and warns once", []step{
			{"exit 1", quick, time.Second, true},
			{"exit 1", quick, 2 * time.Second, false},
			{"exit 1", quick, 4 * time.Second, false},
			{"exit 1", quick, 8 * time.Second, false},
		}},
		{"the delay stops at NodeRestartMax", []step{
			{"exit 1", quick, time.Second, true}, {"exit 1", quick, 2 * time.Second, false},
			{"exit 1", quick, 4 * time.Second, false}, {"exit 1", quick, 8 * time.Second, false},
			{"exit 1", quick, 16 * time.Second, false}, {"exit 1", quick, 32 * time.Second, false},
			{"exit 1", quick, NodeRestartMax, false}, {"exit 1", quick, NodeRestartMax, false},
		}},
		{"a different exit is news", []step{
			{"exit 1", quick, time.Second, true},
			{"exit 1", quick, 2 * time.Second, false},
			{"exit 3", quick, 4 * time.Second, true},
		}},
		{"an exit after a stable run starts over", []step{
			{"exit 1", quick, time.Second, true},
			{"exit 1", quick, 2 * time.Second, false},
			{"exit 1", NodeStableRun, time.Second, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newNodeRestarts(0)
			for i, s := range tc.steps {
				d, warn := r.exited(s.status, s.ran)
				require.Equal(t, s.delay, d, "step %d delay", i)
				require.Equal(t, s.warn, warn, "step %d warning", i)
			}
		})
	}
}
