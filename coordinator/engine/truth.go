package engine

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Truthful activation (issue 14): a failed, superseded or canceled
// revision leaves nothing running; the revision records what its runtime
// is doing; the candidate's credential is checked before cutover;
// finalization failures are always REVISION_FINALIZATION_INCOMPLETE.

// Credential check choices of an installation (Config.CredentialCheck).
const (
	// CredentialCheckBeforeCutover checks the candidate's credential from
	// the coordinator before any predecessor is stopped (beyond the seeds:
	// a bad key never takes a serving Agent down). The default.
	CredentialCheckBeforeCutover = "before-cutover"
	// CredentialCheckSeed keeps the seeds' order: the runtime's own
	// startup check is the only one, and embedded cutover can stop the
	// serving gateway before the replacement validates its credential.
	CredentialCheckSeed = "seed"
)

// ErrCredentialCheck: Config.CredentialCheck names no activation order.
var ErrCredentialCheck = errors.New("engine: the credential check must be " + CredentialCheckBeforeCutover + " or " + CredentialCheckSeed)

// ValidateCredentialCheck checks an installation's activation order choice
// ("" takes the default).
func ValidateCredentialCheck(v string) error {
	switch v {
	case "", CredentialCheckBeforeCutover, CredentialCheckSeed:
		return nil
	}
	return fmt.Errorf("%w, not %q", ErrCredentialCheck, v)
}

// supersededBySwap reports whether a newer activation swapped r out: it was
// active (or committed) and is now listed superseded or retired.
func supersededBySwap(m *state.Machine, r state.Revision) bool {
	if r.Status != state.RevisionSuperseded && r.Status != state.RevisionRetired {
		return false
	}
	a, ok := m.Agent(r.AgentID)
	return ok && a.ActiveRevisionID != r.ID
}

// mayRun reports whether this pass's work may have started the revision's
// runtime (it reached preparation in some pass).
func mayRun(w state.Work) bool {
	return w.Phase == state.PhasePreparing || w.Phase == state.PhaseReady
}

// stopCandidate stops a revision that will not become active, so nothing
// that failed is left running. It reports whether the pass may go on; on a
// driver failure the work is requeued with code (the next pass comes back
// here).
func (e *Engine) stopCandidate(cl *claim, rev state.Revision, code codes.Code, detail string) bool {
	if rev.ID == "" {
		return true
	}
	if a, ok := e.p.Machine().Agent(rev.AgentID); ok && a.ActiveRevisionID == rev.ID {
		return true // never stop the active revision here
	}
	if _, err := e.d.StopRevision(cl.ctx, rev); err != nil {
		if cl.ctx.Err() != nil {
			return false
		}
		dc, _ := compute.ErrorCode(err, codes.TransientDependency)
		cl.log.Warn("stop of a failed revision failed", "code", dc, "err", err.Error())
		cl.retry(code, detail+"; stop pending: "+string(dc))
		return false
	}
	return true
}

// failRevision ends the work as failed with code after stopping whatever
// the revision runs; a held observation is recorded on the revision first.
func (e *Engine) failRevision(cl *claim, rev state.Revision, code codes.Code, detail string, held *compute.Observation) {
	if held != nil {
		rec := state.RecordRevisionRuntime{ClaimRef: cl.ref, Phase: held.Phase, Reason: held.Reason,
			HeldCode: string(held.HeldCode)}
		if held.Cause != nil {
			rec.CauseKind, rec.CauseDetail = string(held.Cause.Kind), held.Cause.Detail
		}
		if _, err := proposeClaimed(cl, state.CmdRecordRevisionRuntime, rec); errors.Is(err, errAbandoned) {
			return
		}
	}
	if held != nil || mayRun(cl.work) {
		if !e.stopCandidate(cl, rev, code, detail) {
			return
		}
	}
	cl.fail(code, detail)
}

// supersede ends the work because a newer revision exists, stopping what
// this revision may run first.
func (e *Engine) supersede(cl *claim, rev state.Revision) {
	if mayRun(cl.work) && !e.stopCandidate(cl, rev, codes.TransientDependency, "superseded") {
		return
	}
	if _, err := proposeClaimed(cl, state.CmdSupersedeWork, state.SupersedeWork{ClaimRef: cl.ref}); err != nil {
		cl.log.Warn("supersede failed", "err", err.Error())
	}
}

// cancelActivation ends work a stop canceled: the revision's runtime stops
// first (the stop work, claimable after this claim, stops the rest).
func (e *Engine) cancelActivation(cl *claim, rev state.Revision) {
	if mayRun(cl.work) && !e.stopCandidate(cl, rev, codes.TransientDependency, "canceled by a stop") {
		return
	}
	if _, err := proposeClaimed(cl, state.CmdCancelWork, state.CancelWork{ClaimRef: cl.ref}); err != nil {
		cl.log.Warn("cancel failed", "err", err.Error())
		return
	}
	cl.log.Info("activation canceled by a stop")
}

// checkCredential runs the pre-cutover credential check once per revision
// (its outcome is recorded; readiness passes never repeat a model request).
// A rejected credential fails the candidate held AUTHENTICATION_FAILED
// before any predecessor is stopped. It reports whether the pass may go on.
func (e *Engine) checkCredential(cl *claim, rev state.Revision) bool {
	cc, ok := e.d.(compute.CredentialChecker)
	if !ok || e.cfg.CredentialCheck != CredentialCheckBeforeCutover {
		return true
	}
	if rt, ok := e.p.Machine().RevisionRuntime(rev.ID); ok && rt.Credential != "" {
		return true
	}
	res, err := cc.CheckCredential(cl.ctx, rev)
	if err != nil {
		if cl.ctx.Err() != nil {
			return false
		}
		code, permanent := compute.ErrorCode(err, codes.HarnessAuthRequired)
		if permanent || code == codes.HarnessAuthRequired {
			cl.fail(code, "credential: "+err.Error())
		} else {
			cl.retry(code, "credential: "+err.Error())
		}
		return false
	}
	if res.Outcome == "" {
		res.Outcome = state.CredentialSkipped
	}
	rec := state.RecordRevisionRuntime{ClaimRef: cl.ref, Credential: res.Outcome, Diagnostics: maps.Clone(res.Diagnostics)}
	if res.Outcome == state.CredentialRejected {
		rec.HeldCode = string(codes.AuthenticationFailed)
		rec.Reason = "credential-rejected"
	}
	if _, err := proposeClaimed(cl, state.CmdRecordRevisionRuntime, rec); err != nil {
		if !errors.Is(err, errAbandoned) {
			cl.retry(codes.TransientDependency, "record credential check: "+err.Error())
		}
		return false
	}
	cl.log.Info("credential checked before cutover", "outcome", res.Outcome, "reason", res.Reason)
	if res.Outcome != state.CredentialRejected {
		return true
	}
	cl.fail(codes.RevisionFailure(codes.AuthenticationFailed), credentialDetail(res))
	return false
}

// credentialDetail is the short, closed-set detail of a rejected credential.
func credentialDetail(res compute.CredentialCheck) string {
	var b strings.Builder
	b.WriteString("held AUTHENTICATION_FAILED (credential checked before cutover)")
	for _, k := range []string{"status", "providerCode", "bodyShape", "responseHeaderMarker", "providerErrorCode", "providerErrorType"} {
		if v := res.Diagnostics[k]; v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	return b.String()
}

// recordProgress records what the runtime is doing when it changed since
// the last record (a not-ready pass).
func (e *Engine) recordProgress(cl *claim, rev state.Revision, obs compute.Observation) {
	rt, _ := e.p.Machine().RevisionRuntime(rev.ID)
	if rt.Phase == obs.Phase && rt.Reason == obs.Reason && rt.HeldCode == "" && !rt.ObservedAt.IsZero() {
		return
	}
	if _, err := proposeClaimed(cl, state.CmdRecordRevisionRuntime, state.RecordRevisionRuntime{ClaimRef: cl.ref,
		Phase: obs.Phase, Reason: obs.Reason}); err != nil && !errors.Is(err, errAbandoned) {
		cl.log.Warn("record progress failed", "err", err.Error())
	}
}

// progressDetail is the requeue detail of a not-ready pass.
func progressDetail(obs compute.Observation) string {
	if obs.Phase == "" {
		return obs.Reason
	}
	return obs.Reason + " (phase " + obs.Phase + ")"
}

// finalizationFailed requeues after a failure past the commit: always
// REVISION_FINALIZATION_INCOMPLETE (the driver's code goes in the detail)
// and never a permanent failure — the revision is active.
func (e *Engine) finalizationFailed(cl *claim, op string, err error) {
	if cl.ctx.Err() != nil {
		cl.log.Info("claim abandoned during driver call", "op", op)
		return
	}
	cl.e.sawOverload(err)
	dc, _ := compute.ErrorCode(err, codes.TransientDependency)
	cl.log.Warn("finalization failed", "op", op, "code", dc, "err", err.Error())
	cl.retry(codes.FinalizationIncomplete, op+": "+string(dc)+": "+err.Error())
}
