package gatewayd

import (
	"context"
	"fmt"
	"io"
	"os"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/status"
)

// Main is the gatewayd command line: `gatewayd [run]` supervises the
// gateway; `gatewayd ready` is the kubelet exec readiness probe.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "run":
		cfg, err := LoadConfig()
		if err != nil {
			fmt.Fprintf(stderr, "{\"level\":\"ERROR\",\"msg\":\"gatewayd: bad environment\",\"code\":\"NOT_CONFIGURED\",\"error\":%q}\n", err.Error())
			return ExitBadInput
		}
		return Run(ctx, cfg, stderr)
	case "ready":
		addr := os.Getenv(contract.EnvStatusAddr)
		if addr == "" {
			addr = status.DefaultAddr
		}
		return status.RunReadyProbe(ctx, addr, stdout)
	default:
		fmt.Fprintln(stderr, "usage: gatewayd [run|ready]")
		return ExitBadInput
	}
}
