package occ

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
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
			"the revision's work through queued → preparing → ready → active and exits non-zero (3) with the\n" +
			"failure code when the revision fails, or (4) when the timeout passes first.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl := a.client()
			ctx, cancel := a.ctx(cmd)
			res, err := cl.Deploy(ctx, a.settings.Namespace, args[0], wire.Deploy{LogLevel: logLevel})
			cancel()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !wait {
				return a.print(out, res, func() table { return revisionTable("", res.Revision) })
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "revision %d (%s) admitted: %s/%s\n", res.Number, res.ID, res.Harness.ID, res.Mode)
			wctx, wcancel := context.WithTimeout(cmd.Context(), timeout)
			defer wcancel()
			rev, err := a.waitActive(wctx, cmd, cl, args[0], res)
			if err != nil {
				return err
			}
			return a.print(out, rev, func() table { return revisionTable(rev.ID, rev) })
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait until the revision is active or failed, showing progress")
	c.Flags().DurationVar(&timeout, "timeout", DefaultWaitTimeout, "how long --wait waits")
	c.Flags().StringVar(&logLevel, "log-level", "", "runtime log level admitted into the revision")
	return c
}

// waitActive polls the revision and its work, printing each new phase, until
// the revision is active (nil), failed (ExitFailed) or ctx ends (ExitTimeout).
func (a *app) waitActive(ctx context.Context, cmd *cobra.Command, cl *client.Client, agent string, res wire.DeployResult) (wire.Revision, error) {
	ns := a.settings.Namespace
	errw := cmd.ErrOrStderr()
	last := ""
	show := func(phase string) {
		if phase != "" && phase != last {
			fmt.Fprintf(errw, "  %s\n", phase)
			last = phase
		}
	}
	show(wire.PhaseQueued)
	tick := time.NewTicker(a.opts.PollInterval)
	defer tick.Stop()
	for {
		rev, rerr := cl.Revision(ctx, ns, agent, res.ID)
		wk, werr := cl.WorkItem(ctx, res.WorkID)
		if rerr == nil {
			if werr == nil {
				show(wk.Phase)
			}
			switch rev.Status {
			case wire.RevisionActive:
				show(wire.PhaseActive)
				return rev, nil
			case wire.RevisionFailed, wire.RevisionSuperseded, wire.RevisionRetired, wire.RevisionStopped:
				return rev, a.failed(rev, wk)
			}
		}
		if werr == nil && (wk.State == wire.WorkFailed || wk.State == wire.WorkSuperseded) {
			// The revision record may lag one read behind the work.
			if rev2, err := cl.Revision(ctx, ns, agent, res.ID); err == nil {
				rev = rev2
			}
			return rev, a.failed(rev, wk)
		}
		if werr == nil && wk.State == wire.WorkCompleted && rerr == nil && rev.Status == wire.RevisionActive {
			return rev, nil
		}
		// Transient read errors (leader change) are retried until ctx ends.
		select {
		case <-ctx.Done():
			return rev, &ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out waiting for revision %d; last phase %q", res.Number, last)}
		case <-tick.C:
		}
	}
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
