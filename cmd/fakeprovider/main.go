// Command fakeprovider serves oce's offline fake model provider on loopback
// for tests and demos: it prints "PORT n" and serves until SIGTERM.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"oce.dev/oce/probe/fakeprovider"
)

func main() {
	var o fakeprovider.Options
	var keyFile, fault string
	cmd := &cobra.Command{
		Use:           "fakeprovider",
		Short:         "Offline fake OpenAI/Anthropic model provider on 127.0.0.1 (or a test cluster's Service)",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyFile != "" {
				keys, err := fakeprovider.LoadKeyFile(keyFile)
				if err != nil {
					return err
				}
				o.ValidKeys = keys
			}
			o.Fault = fakeprovider.Fault(fault)
			o.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return fakeprovider.Serve(ctx, o, os.Stdout)
		},
	}
	cmd.Flags().StringVar(&o.Addr, "addr", fakeprovider.DefaultAddr, "loopback listen address")
	cmd.Flags().BoolVar(&o.NonLoopback, "non-loopback", false, "accept a non-loopback --addr (a test cluster's in-cluster Service; never a host network)")
	cmd.Flags().StringVar(&o.Reply, "reply", "", "reply text (a prompt digest is appended)")
	cmd.Flags().StringVar(&keyFile, "valid-key-file", "", "file (mode 0600) of accepted keys, one per line")
	cmd.Flags().StringVar(&fault, "fault", "", "fault for every request (401-json-error-code, 500, slow, drop, …)")
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
