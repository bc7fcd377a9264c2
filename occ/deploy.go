package occ

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
)

// ErrRevisionFailed is returned (as exit code 3) when a waited-for revision
// fails or is superseded.
var ErrRevisionFailed = errors.New("revision did not become active")

func (a *app) deployCmd() *cobra.Command {
	var wait bool
	var timeout time.Duration
	var logLevel string
	c := &cobra.Command{
		Use:   "deploy AGENT [--wait] [--timeout D]",
		Short: "Admit a new revision of the Agent and activate it",
		Long: "deploy runs admission on the leader and freezes an immutable revision (202). With --wait it follows\n" +
			"the revision's work through queued → preparing → ready → active, showing the phase, the elapsed time and\n" +
			"the last code and detail (the runtime's startup phase, its held code), until the Agent is observed serving\n" +
			"the revision. It exits 3 with the failure code when the revision fails, is held or is rolled back, 4 when\n" +
			"the timeout passes first, and 130 on Ctrl-C: the deploy continues on the server, and occ prints the commands\n" +
			"that follow it with the -n, --context, --server, --ca-file, --tls-server-name and --token-file you gave.",
		Example:           "  occ agent deploy hello --wait\n  occ agent deploy coder --wait --timeout 10m --log-level debug\n  occ agent deploy hello --dry-run=server",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait && a.dryRun != "" {
				return usageError(errors.New("--wait and --dry-run exclude each other: a dry run starts nothing to wait for"))
			}
			cl := a.client()
			ctx, cancel := a.ctx(cmd)
			res, err := cl.Deploy(ctx, a.settings.Namespace, args[0], wire.Deploy{LogLevel: logLevel})
			cancel()
			if err != nil {
				return err
			}
			return a.afterDeploy(cmd, cl, args[0], res, wait, timeout)
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait until the revision is active or failed, showing progress")
	c.Flags().DurationVar(&timeout, "timeout", DefaultWaitTimeout, "how long --wait waits")
	c.Flags().StringVar(&logLevel, "log-level", "", "runtime log level admitted into the revision")
	a.addDryRun(c)
	_ = c.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

func (a *app) failed(rev wire.Revision, wk wire.Work) error {
	code := rev.FailureCode
	if code == "" {
		code = wk.LastCode
	}
	if code == "" {
		code = rev.Status
		if code == "" {
			code = wk.State
		}
	}
	detail := rev.FailureDetail
	if detail == "" {
		detail = wk.LastDetail
	}
	if detail != "" {
		detail = " (" + detail + ")"
	}
	return &ExitError{Code: ExitFailed, Err: fmt.Errorf("%w: revision %d %s: %s%s", ErrRevisionFailed, rev.Number,
		dash(rev.Status), code, detail)}
}
