package occ

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
)

// dryRunServer is the one --dry-run value: the server decides the write
// in full and changes nothing (docs/API.md, "Dry runs").
const dryRunServer = "server"

// addDryRun gives a create, update or deploy command --dry-run=server:
// its writes go out as server-side dry runs (a.ctx), and it says on stderr
// that nothing changed.
func (a *app) addDryRun(c *cobra.Command) {
	c.Flags().StringVar(&a.dryRun, "dry-run", "", "server: the server checks the request in full (validation, authorization, admission, quota) and answers what it would do, changing nothing")
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if a.dryRun != "" && a.dryRun != dryRunServer {
			return usageError(fmt.Errorf("--dry-run=%s: only server is supported", a.dryRun))
		}
		if err := run(cmd, args); err != nil {
			return err
		}
		if a.dryRun != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "server dry run: nothing was changed")
		}
		return nil
	}
}

// withDryRun makes ctx's writes dry runs when --dry-run=server was given.
func (a *app) withDryRun(ctx context.Context) context.Context {
	if a.dryRun == dryRunServer {
		return client.WithDryRun(ctx)
	}
	return ctx
}
