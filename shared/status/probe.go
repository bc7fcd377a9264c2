package status

import (
	"context"
	"fmt"
	"io"
)

// RunReadyProbe is the body of the `gatewayd ready` / `harnessd ready` exec
// probes: it asks the status server at addr (ReadyCheck, ReadyTimeout) and
// returns the exit status, 0 when ready; otherwise it prints the one-line
// reason to w and returns 1.
func RunReadyProbe(ctx context.Context, addr string, w io.Writer) int {
	ok, reason, _ := ReadyCheck(ctx, addr)
	if ok {
		return 0
	}
	fmt.Fprintln(w, reason)
	return 1
}
