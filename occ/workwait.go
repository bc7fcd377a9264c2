package occ

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

// ErrWorkFailed is returned (as exit code 3) when the stop or delete work
// that --wait follows fails or is superseded.
var ErrWorkFailed = errors.New("the work did not complete")

// workWait describes what `agent stop|delete --wait` waits for.
type workWait struct {
	kind  string // wire.WorkStop or wire.WorkDelete
	doing string // what the engine does meanwhile, in words
}

var (
	stopWait = workWait{kind: wire.WorkStop, doing: "stopping its runtimes and clearing its active revision"}
	delWait  = workWait{kind: wire.WorkDelete, doing: "stopping its runtimes, retiring its revisions and removing it"}
)

// waitWork follows the stop or delete work wk of agent until it is done
// (stop: the work completed and the Agent has no active revision; delete:
// the Agent is not found), it fails or is superseded (ExitFailed), ctx's
// deadline passes (ExitTimeout) or the user interrupts (ExitInterrupted).
// Each change is printed in words with the elapsed time.
func (a *app) waitWork(ctx context.Context, cmd *cobra.Command, cl *client.Client, ww workWait, agent string, wk wire.Work) (wire.Work, error) {
	ns := a.settings.Namespace
	errw := cmd.ErrOrStderr()
	start := time.Now()
	last := ""
	show := func(line string) {
		if line != last {
			fmt.Fprintf(errw, "  %6.1fs  %s\n", time.Since(start).Seconds(), line)
			last = line
		}
	}
	check := func() (bool, error) {
		if ww.kind == wire.WorkDelete {
			_, err := cl.Agent(ctx, ns, agent)
			if isNotFound(err) {
				show("deleted: agent " + agent + " is gone")
				return true, nil
			}
			if err != nil {
				return false, fatalRead(err)
			}
		}
		cur, err := cl.WorkItem(ctx, wk.ID)
		switch {
		case isNotFound(err) && ww.kind == wire.WorkStop:
			// Only a deletion removes work: nothing of the Agent runs.
			if _, aerr := cl.Agent(ctx, ns, agent); isNotFound(aerr) {
				show("agent " + agent + " was deleted meanwhile: nothing of it runs")
				return true, nil
			}
			return false, nil
		case err != nil:
			return false, fatalRead(err)
		}
		wk = cur
		switch wk.State {
		case wire.WorkFailed, wire.WorkSuperseded:
			show(workWords(ww, wk))
			return true, &ExitError{Code: ExitFailed, Err: fmt.Errorf("%w: the %s of agent %s %s: %s%s", ErrWorkFailed, ww.kind, agent,
				wk.State, dash(wk.LastCode), detailText(wk.LastDetail))}
		case wire.WorkCompleted:
			if ww.kind == wire.WorkDelete {
				return false, nil // the Agent's removal is read next
			}
			ag, err := cl.Agent(ctx, ns, agent)
			if err != nil {
				return false, fatalRead(err)
			}
			if ag.ActiveRevisionID != "" {
				return true, &ExitError{Code: ExitFailed, Err: fmt.Errorf("%w: the stop of agent %s completed, but a later deploy "+
					"activated revision %s", ErrWorkFailed, agent, revNumber(ag.ActiveRevision, ag.ActiveRevisionID))}
			}
			state := wire.AgentStopped
			if ag.Status != nil {
				state = ag.Status.State
			}
			show(fmt.Sprintf("stopped: agent %s has no active revision (state %s)", agent, state))
			return true, nil
		}
		show(workWords(ww, wk))
		return false, nil
	}
	err := a.untilDone(ctx, cl, check)
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return wk, err
	}
	follow := "follow it with: " + a.again(cmd, "agent", "work", agent) + "; " + a.again(cmd, "agent", "get", agent)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return wk, &ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out waiting for the %s of agent %s (last: %s); it continues on the server; %s",
			ww.kind, agent, dash(last), follow)}
	}
	fmt.Fprintf(errw, "interrupted: the %s of agent %s continues on the server; %s\n", ww.kind, agent, follow)
	return wk, &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("%w: the %s of agent %s is still %s", ErrInterrupted, ww.kind, agent, wk.State)}
}

// untilDone calls check, then again after every change of the
// coordinator's state (a blocking query; polling while the coordinator
// cannot answer it), until check says done or ctx ends (ctx.Err()).
func (a *app) untilDone(ctx context.Context, cl *client.Client, check func() (bool, error)) error {
	index := uint64(0)
	for {
		if done, err := check(); done || err != nil {
			return err
		}
		next, err := cl.WaitIndex(ctx, index, changeWait)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(a.opts.PollInterval):
			}
		default:
			index = next
		}
	}
}

// fatalRead keeps a wait going through what may pass (no leader yet, a
// lost connection, the wait's own end) and ends it on a refusal
// (UNAUTHORIZED, FORBIDDEN, …).
func fatalRead(err error) error {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return nil
	}
	switch ae.Code {
	case codes.NotLeader, codes.NotReady, codes.OutcomeUnknown, codes.RateLimited, codes.Internal:
		return nil
	}
	return err
}

// workWords says in words where stop or delete work is.
func workWords(ww workWait, wk wire.Work) string {
	attempt := fmt.Sprintf("attempt %d of %d", wk.Attempts, wk.MaxAttempts)
	lastTry := ""
	if wk.LastCode != "" {
		lastTry = "; the last attempt ended " + wk.LastCode + detailText(wk.LastDetail)
	}
	switch wk.State {
	case wire.WorkQueued:
		if wk.Attempts > 0 {
			return fmt.Sprintf("%s queued again after %s%s: waiting for the activation engine to retry", ww.kind, attempt, lastTry)
		}
		return ww.kind + " queued: waiting for the activation engine to pick it up"
	case wire.WorkClaimed:
		return fmt.Sprintf("the activation engine is %s (%s)%s", ww.doing, attempt, lastTry)
	case wire.WorkFailed:
		return fmt.Sprintf("%s failed after %s%s", ww.kind, attempt, lastTry)
	case wire.WorkSuperseded:
		return ww.kind + " superseded by newer work of the Agent"
	case wire.WorkCompleted:
		return ww.kind + " completed"
	}
	return ww.kind + " " + wk.State
}

func detailText(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}
