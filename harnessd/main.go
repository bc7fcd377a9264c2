package harnessd

import (
	"context"
	"fmt"
	"io"
	"os"

	"oce.dev/oce/shared/status"
)

// Ready is `harnessd ready`, the kubelet exec probe: it asks the status
// server's /readyz (which checks the ready marker, the app-server's /readyz
// and a WebSocket opened with the token) within status.ReadyTimeout and
// returns 0 when ready, else 1 after printing the reason (with
// "; startup check <check> failed with <CODE>" when a failure is held).
// It never starts work: a held runtime stays unready.
func Ready(ctx context.Context, stdout io.Writer) int {
	addr := os.Getenv(EnvStatusAddr)
	if addr == "" {
		addr = status.DefaultAddr
	}
	return status.RunReadyProbe(ctx, addr, stdout)
}

// Main dispatches the harnessd command line: no argument or "run" starts
// the supervisor, "ready" is the exec probe.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || args[0] == "run":
		return Run(ctx, Options{Stderr: stderr})
	case args[0] == "ready" && len(args) == 1:
		return Ready(ctx, stdout)
	}
	fmt.Fprintln(stderr, "usage: harnessd [run|ready]")
	return 2
}
