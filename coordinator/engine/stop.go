package engine

import (
	"cmp"
	"errors"
	"slices"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// stop runs stop work (docs/design/reference.md#s6-4): the active revision first, then the
// Agent's other unretired revisions newest first (the driver stops each
// Gateway before its Harness), then the compare-and-clear of the active
// revision in CompleteStop.
func (e *Engine) stop(cl *claim) {
	m := e.p.Machine()
	a, ok := m.Agent(cl.work.AgentID)
	if !ok {
		cl.fail(codes.InvalidTarget, "agent is missing")
		return
	}
	if err := cl.phase(state.PhaseStopping); err != nil {
		return
	}
	revs := m.LiveRevisions(a.ID)
	slices.SortFunc(revs, func(x, y state.Revision) int {
		if x.ID == a.ActiveRevisionID {
			return -1
		}
		if y.ID == a.ActiveRevisionID {
			return 1
		}
		return cmp.Compare(y.Number, x.Number)
	})
	for _, r := range revs {
		if _, err := e.d.StopRevision(cl.ctx, r); err != nil {
			cl.driverFailed("stopRevision", err, codes.TransientDependency)
			return
		}
	}
	if _, err := proposeClaimed(cl, state.CmdCompleteStop, state.CompleteStop{ClaimRef: cl.ref, Expected: a.ActiveRevisionID}); err != nil {
		switch {
		case errors.Is(err, errAbandoned):
		case errors.Is(err, state.ErrActiveRevisionChanged):
			cl.retry(codes.ActiveRevisionChanged, err.Error())
		default:
			cl.log.Warn("complete stop failed", "err", err.Error())
		}
		return
	}
	cl.log.Info("agent stopped")
}

// remove runs delete work (docs/design/reference.md#s6-4): retire every revision, delete the
// Agent's runtime credentials and claims, then remove its identity.
func (e *Engine) remove(cl *claim) {
	m := e.p.Machine()
	a, ok := m.Agent(cl.work.AgentID)
	if !ok {
		cl.fail(codes.InvalidTarget, "agent is missing")
		return
	}
	for _, r := range m.Revisions(a.ID) {
		if err := e.d.RetireRevision(cl.ctx, r); err != nil {
			cl.driverFailed("retireRevision", err, codes.TransientDependency)
			return
		}
	}
	if err := e.d.DeleteAgentRuntimeCredentials(cl.ctx, a); err != nil {
		cl.driverFailed("deleteAgentRuntimeCredentials", err, codes.TransientDependency)
		return
	}
	if _, err := proposeClaimed(cl, state.CmdCompleteDeletion, state.CompleteDeletion{ClaimRef: cl.ref}); err != nil {
		if !errors.Is(err, errAbandoned) {
			cl.log.Warn("complete deletion failed", "err", err.Error())
		}
		return
	}
	cl.log.Info("agent deleted")
}
