package engine

import (
	"context"

	"oce.dev/oce/coordinator/state"
)

// releaseStaleClaims frees, once this engine's leadership is verified, the
// work claimed by engines of earlier terms (a dead or deposed leader's, or
// this node's previous run), so it is claimable at once instead of after
// its lease. Safe because such an engine can commit nothing more: every
// engine command names its claim's owner and Apply refuses it once the
// claim is released, and activation commits only after VerifyLeader. The
// store runs a Raft barrier before the engine starts, so the local state
// holds every claim committed by earlier leaders. On failure the leases
// still expire as before.
func (e *Engine) releaseStaleClaims(ctx context.Context, owner string) {
	m := e.p.Machine()
	if m.ForeignClaims(owner) == 0 {
		return
	}
	if err := e.p.VerifyLeader(ctx); err != nil {
		e.log.Warn("not releasing earlier claims: leadership not verified", "err", err.Error())
		return
	}
	ids, err := state.Propose(ctx, e.p, state.CmdReleaseClaims, state.ReleaseClaims{Keep: owner})
	if err != nil {
		e.log.Warn("releasing earlier claims failed; their leases will expire", "err", err.Error())
		return
	}
	e.log.Info("released claims of earlier leaders", "count", len(ids), "code", state.CodeLeaderChanged)
}
