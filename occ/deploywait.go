package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// ExitInterrupted is occ's exit code after Ctrl-C (128 + SIGINT).
const ExitInterrupted = 130

// ErrInterrupted: the user interrupted a wait; the server goes on.
var ErrInterrupted = errors.New("interrupted")

// progress is one line of deploy --wait: what changed since the last one.
type progress struct {
	phase, runtime, code, detail string
}

func (p progress) String() string {
	var b strings.Builder
	b.WriteString(dash(p.phase))
	if p.runtime != "" {
		b.WriteString("  runtime " + p.runtime)
	}
	if p.code != "" {
		b.WriteString("  " + p.code)
		if p.detail != "" {
			b.WriteString(": " + p.detail)
		}
	}
	return b.String()
}

// waitActive follows the revision until the Agent is observed serving it
// (nil), it fails, is held or rolled back (ExitFailed), ctx's deadline
// passes (ExitTimeout) or the user interrupts (ExitInterrupted). Each
// change of phase, runtime phase or code is printed with the elapsed time.
func (a *app) waitActive(ctx context.Context, cmd *cobra.Command, cl *client.Client, agent string, res wire.DeployResult) (wire.Revision, error) {
	ns := a.settings.Namespace
	errw := cmd.ErrOrStderr()
	follow := a.follow(cmd, agent)
	start := time.Now()
	var last progress
	show := func(p progress) {
		if p != last {
			fmt.Fprintf(errw, "  %6.1fs  %s\n", time.Since(start).Seconds(), p)
			last = p
		}
	}
	show(progress{phase: wire.PhaseQueued})
	rev := res.Revision
	index := uint64(0)
	for {
		r, rerr := cl.Revision(ctx, ns, agent, res.ID)
		wk, werr := cl.WorkItem(ctx, res.WorkID)
		if rerr == nil {
			rev = r
			if done, err := a.judge(ctx, cl, agent, rev, wk, werr == nil, show); done {
				return rev, err
			}
		}
		// A blocking query: back as soon as the coordinator's state moves
		// past what was read, instead of polling.
		next, err := cl.WaitIndex(ctx, index, changeWait)
		switch {
		case ctx.Err() != nil:
			return rev, waitEnded(ctx, errw, follow, res, last)
		case err != nil:
			// A coordinator that cannot answer it now: poll meanwhile.
			select {
			case <-ctx.Done():
				return rev, waitEnded(ctx, errw, follow, res, last)
			case <-time.After(a.opts.PollInterval):
			}
		default:
			index = next
		}
	}
}

// changeWait bounds one blocking query of deploy --wait; an unchanged state
// is read again after it.
const changeWait = 10 * time.Second

// judge decides one poll: done with the outcome, or keep waiting.
func (a *app) judge(ctx context.Context, cl *client.Client, agent string, rev wire.Revision, wk wire.Work, haveWork bool,
	show func(progress)) (bool, error) {
	p := progress{}
	if haveWork {
		p.phase, p.code, p.detail = wk.Phase, wk.LastCode, wk.LastDetail
	}
	if rt := rev.Runtime; rt != nil {
		p.runtime = rt.Phase
		if rt.HeldCode != "" {
			p.code, p.detail = rt.HeldCode, heldText(rt)
		}
	}
	switch rev.Status {
	case wire.RevisionFailed, wire.RevisionSuperseded, wire.RevisionRetired, wire.RevisionStopped:
		show(p)
		return true, a.failed(rev, wk)
	case wire.RevisionActive:
		ag, err := cl.Agent(ctx, a.settings.Namespace, agent)
		if err != nil || ag.Status == nil {
			show(p)
			return false, nil
		}
		st := ag.Status
		p.phase = wire.PhaseActive + " (" + st.State + ")"
		p.code, p.detail = st.HeldCode, st.Reason
		if st.HeldCode != "" && st.CauseKind != "" {
			p.detail = "cause " + st.CauseKind + ":" + st.CauseDetail
		}
		show(p)
		switch {
		case ag.ActiveRevisionID == rev.ID && st.State == wire.AgentServing:
			return true, nil
		case ag.ActiveRevisionID == rev.ID && st.State == wire.AgentDegraded && st.HeldCode != "":
			return true, &ExitError{Code: ExitFailed, Err: fmt.Errorf("%w: revision %d is active but held %s (%s); the Agent is not serving",
				ErrRevisionFailed, rev.Number, st.HeldCode, dash(p.detail))}
		}
		return false, nil
	}
	if haveWork && (wk.State == wire.WorkFailed || wk.State == wire.WorkSuperseded) {
		show(p)
		return true, a.failed(rev, wk)
	}
	show(p)
	return false, nil
}

// heldText is the short detail of a held runtime.
func heldText(rt *wire.RevisionRuntime) string {
	var parts []string
	if rt.CauseKind != "" {
		parts = append(parts, "cause "+rt.CauseKind+":"+rt.CauseDetail)
	}
	if rt.Credential != "" {
		parts = append(parts, "credential "+rt.Credential)
	}
	for _, k := range []string{"status", "providerCode", "bodyShape", "providerErrorCode"} {
		if v := rt.Diagnostics[k]; v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// follow is the hint of how to keep watching an Agent's deploy, spelled
// for the coordinator and Namespace the user reached.
func (a *app) follow(cmd *cobra.Command, agent string) string {
	return "follow it with: " + a.again(cmd, "revisions", agent) + "; " + a.again(cmd, "agent", "work", agent) + "; " +
		a.againAll(cmd, "status")
}

// waitEnded turns the end of a wait into its exit: the deadline (4) or an
// interrupt (130), saying the deploy goes on and how to follow it.
func waitEnded(ctx context.Context, w io.Writer, follow string, res wire.DeployResult, last progress) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out waiting for revision %d (last: %s); the deploy continues on the server; %s",
			res.Number, last, follow)}
	}
	fmt.Fprintf(w, "interrupted: revision %d's deploy continues on the server; %s\n", res.Number, follow)
	return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("%w: revision %d is still %s", ErrInterrupted, res.Number, dash(last.phase))}
}
