package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// errAbandoned marks a claim this engine no longer holds (lost, lapsed, or
// leadership gone): the worker returns and writes nothing more.
var errAbandoned = errors.New("engine: claim abandoned")

// claim is one live claim: its context ends when the lease is lost or lapses.
type claim struct {
	e      *Engine
	ref    state.ClaimRef
	work   state.Work
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	log    *slog.Logger

	mu     sync.Mutex
	expiry time.Time // the lease this engine last secured

	// pmu orders the holder's writes and the heartbeat's renewals, so a
	// renewal never races the write that released the claim (a requeue,
	// a failure, a completion): released is set once such a write
	// committed, and the heartbeat then stops without a word.
	pmu      sync.Mutex
	released bool
}

func (e *Engine) newClaim(ctx context.Context, owner string, w state.Work) *claim {
	cctx, cancel := context.WithCancelCause(ctx)
	cl := &claim{e: e, ref: state.ClaimRef{WorkID: w.ID, Owner: owner}, work: w, ctx: cctx, cancel: cancel,
		done: make(chan struct{}), expiry: w.LeaseExpiry,
		log: e.log.With("work", w.ID, "kind", w.Kind, "agent", w.AgentID, "revision", w.RevisionID, "attempt", w.Attempts)}
	go cl.heartbeat(w.LeaseExpiry)
	return cl
}

func (cl *claim) close() {
	cl.cancel(nil)
	<-cl.done
}

// heartbeat renews the lease every lease/3; a local lapse timer abandons the
// claim once the lease it last secured has passed without a renewal.
func (cl *claim) heartbeat(expiry time.Time) {
	defer close(cl.done)
	e := cl.e
	for {
		wait := min(e.cfg.Lease/3, expiry.Sub(e.clk.Now()))
		select {
		case <-cl.ctx.Done():
			return
		case <-e.clk.After(wait):
		}
		now := e.clk.Now()
		if !now.Before(expiry) {
			cl.log.Warn("claim lease lapsed", "code", state.CodeLeaseExpired)
			cl.cancel(fmt.Errorf("%w: lease lapsed", errAbandoned))
			return
		}
		next := now.Add(e.cfg.Lease)
		cl.pmu.Lock()
		if cl.released {
			cl.pmu.Unlock()
			return
		}
		_, err := state.Propose(cl.ctx, e.p, state.CmdRenewClaim, state.RenewClaim{ClaimRef: cl.ref, LeaseExpiry: next})
		cl.pmu.Unlock()
		switch {
		case err == nil:
			expiry = next
			cl.mu.Lock()
			cl.expiry = next
			cl.mu.Unlock()
		case errors.Is(err, state.ErrClaimLost):
			cl.log.Warn("claim lost", "err", err.Error())
			cl.cancel(fmt.Errorf("%w: %w", errAbandoned, err))
			return
		default:
			cl.log.Warn("claim renewal failed", "err", err.Error())
		}
	}
}

// proposeClaimed writes cmd under cl's claim; once the claim is gone it
// writes nothing and returns errAbandoned.
func proposeClaimed[P, R any](cl *claim, cmd state.Cmd[P, R], payload P) (R, error) {
	var zero R
	if cl.ctx.Err() != nil {
		return zero, fmt.Errorf("%w: %w", errAbandoned, context.Cause(cl.ctx))
	}
	// The lapse check does not wait for the heartbeat goroutine to notice.
	cl.mu.Lock()
	lapsed := !cl.e.clk.Now().Before(cl.expiry)
	cl.mu.Unlock()
	if lapsed {
		cl.cancel(fmt.Errorf("%w: lease lapsed", errAbandoned))
		return zero, fmt.Errorf("%w: lease lapsed", errAbandoned)
	}
	cl.pmu.Lock()
	res, err := state.Propose(cl.ctx, cl.e.p, cmd, payload)
	if err == nil {
		// Released when the work is no longer this claim's.
		w, ok := cl.e.p.Machine().Work(cl.ref.WorkID)
		cl.released = !ok || w.State != state.WorkClaimed || w.Owner != cl.ref.Owner
	}
	cl.pmu.Unlock()
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, state.ErrClaimLost):
		cl.log.Warn("claim lost", "command", cmd.Name(), "err", err.Error())
		cl.cancel(fmt.Errorf("%w: %w", errAbandoned, err))
		return zero, fmt.Errorf("%w: %w", errAbandoned, err)
	case cl.ctx.Err() != nil:
		return zero, fmt.Errorf("%w: %w", errAbandoned, err)
	}
	return zero, err
}

// phase records progress; failures other than a lost claim are only logged
// (progress is informational).
func (cl *claim) phase(p string) error {
	if cl.work.Phase == p {
		return nil
	}
	if _, err := proposeClaimed(cl, state.CmdSetWorkPhase, state.SetWorkPhase{ClaimRef: cl.ref, Phase: p}); err != nil {
		if errors.Is(err, errAbandoned) {
			return err
		}
		cl.log.Warn("set phase failed", "phase", p, "err", err.Error())
		return nil
	}
	cl.work.Phase = p
	return nil
}

// retry requeues after the attempt's backoff with code.
func (cl *claim) retry(code codes.Code, detail string) {
	cl.requeue(code, detail, cl.e.backoff(cl.work.Attempts), false)
}

// requeue releases the claim for a later pass at now+delay; deferred passes
// give their attempt back.
func (cl *claim) requeue(code codes.Code, detail string, delay time.Duration, deferred bool) {
	at := cl.e.clk.Now().Add(delay)
	_, err := proposeClaimed(cl, state.CmdRequeueWork, state.RequeueWork{ClaimRef: cl.ref, AvailableAt: at, Code: string(code),
		Detail: detail, Defer: deferred})
	if err != nil {
		cl.log.Warn("requeue failed", "code", code, "err", err.Error())
		return
	}
	// A deferred pass is routine (a revision still starting): debug. A
	// retry after a failure is worth a warning.
	lvl := slog.LevelDebug
	if !deferred {
		lvl = slog.LevelWarn
	}
	cl.log.Log(cl.ctx, lvl, "work requeued", "code", code, "delay_ms", delay.Milliseconds())
}

// fail ends the work permanently with code.
func (cl *claim) fail(code codes.Code, detail string) {
	if _, err := proposeClaimed(cl, state.CmdFailWork, state.FailWork{ClaimRef: cl.ref, Code: string(code), Detail: detail}); err != nil {
		cl.log.Warn("fail work failed", "code", code, "err", err.Error())
		return
	}
	cl.log.Warn("work failed", "code", code)
}

// driverFailed handles a driver error of a pass: abandon when the claim is
// gone, fail permanent errors, otherwise retry with the error's code (or
// fallback). It reports whether the claim was abandoned.
func (cl *claim) driverFailed(op string, err error, fallback codes.Code) {
	if cl.ctx.Err() != nil {
		cl.log.Info("claim abandoned during driver call", "op", op)
		return
	}
	cl.e.sawOverload(err)
	code, permanent := compute.ErrorCode(err, fallback)
	cl.log.Warn("driver call failed", "op", op, "code", code, "err", err.Error())
	if permanent {
		cl.fail(code, op+": "+err.Error())
		return
	}
	cl.retry(code, op+": "+err.Error())
}
