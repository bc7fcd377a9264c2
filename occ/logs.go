package occ

import (
	"io"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
)

func (a *app) logsCmd() *cobra.Command {
	var o client.LogOptions
	var harness, raw bool
	c := &cobra.Command{
		Use:   "logs NAME [--follow] [--gateway|--harness]",
		Short: "Print an Agent's supervisor log (gatewayd or harnessd and its runtime) through the compute driver",
		Long: `Prints the log of the Agent's Gateway (default) or Harness container, read by the compute
driver: the revision's log files with the local driver, the Pod's log on Kubernetes. The active
revision's, unless --revision names another (an id or number); the newest when none is active.

JSON log records are shown as TIME LEVEL message key=value… in the record's field order; other
lines pass through unchanged. --raw (or -o json) prints the log exactly as it was written.`,
		Example: `  occ agent logs hello
  occ agent logs coder --harness --tail 50
  occ agent logs hello -f
  occ agent logs hello --raw | jq .`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if harness {
				o.Container = "harness"
			}
			ctx := cmd.Context()
			if !o.Follow {
				var cancel func()
				ctx, cancel = a.ctx(cmd)
				defer cancel()
			}
			rc, err := a.client().Logs(ctx, a.settings.Namespace, args[0], o)
			if err != nil {
				return err
			}
			defer rc.Close()
			if raw || a.settings.Output == outJSON {
				_, err = io.Copy(cmd.OutOrStdout(), rc)
			} else {
				err = copyPretty(cmd.OutOrStdout(), rc)
			}
			if ctx.Err() != nil {
				return ctx.Err() // interrupted (130) or timed out
			}
			return err
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep streaming what the log appends (Ctrl-C ends)")
	f.Bool("gateway", false, "the Gateway container's log (the default)")
	f.BoolVar(&harness, "harness", false, "the dedicated Harness container's log")
	f.BoolVar(&raw, "raw", false, "print the log as written (JSON records unrendered)")
	f.IntVar(&o.Tail, "tail", 0, "only the last N lines first (0: all)")
	f.StringVar(&o.Revision, "revision", "", "revision id or number (default: the active one)")
	c.MarkFlagsMutuallyExclusive("gateway", "harness")
	_ = c.RegisterFlagCompletionFunc("revision", a.completeFlag(revisionNumbers))
	return c
}
