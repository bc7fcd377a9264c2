package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// audits counts the audit records of action per revision.
func (h *harness) audits(action string) map[string]int {
	out := map[string]int{}
	for _, a := range h.m.Audit(0, 0) {
		if a.Action == action {
			out[a.RevisionID]++
		}
	}
	return out
}

// TestFinalizationFaultsAtEveryStep: a driver fault at each finalization
// step (activate, retire — transient or permanent — and the completion's
// own proposal) requeues with REVISION_FINALIZATION_INCOMPLETE, never the
// driver's code and never a failure, and the revision gets exactly one
// activate audit record.
func TestFinalizationFaultsAtEveryStep(t *testing.T) {
	for name, inject := range map[string]func(h *harness){
		"activate transient": func(h *harness) {
			h.d.Fail(memory.OpActivate, "r2", 2, compute.Transient(codes.TransientDependency, nil))
		},
		"activate permanent": func(h *harness) { h.d.Fail(memory.OpActivate, "r2", 2, compute.Permanent(codes.ForeignWorkload, nil)) },
		"retire transient":   func(h *harness) { h.d.Fail(memory.OpRetire, "r1", 2, nil) },
		"retire permanent":   func(h *harness) { h.d.Fail(memory.OpRetire, "r1", 2, compute.Permanent(codes.ForeignWorkload, nil)) },
		"complete proposal": func(h *harness) {
			n := 0
			h.setBlock(func(typ string, _ any) error {
				if typ == state.CmdCompleteActivation.Name() && n < 2 {
					n++
					return errors.New("raft: timed out enqueuing operation")
				}
				return nil
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, hopt{})
			h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
			inject(h)
			w := h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
			require.Equal(t, []string{string(codes.FinalizationIncomplete), string(codes.FinalizationIncomplete)}, h.requeueCodes("w-r2"))
			require.Equal(t, 3, w.Attempts)
			require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations())
			r1, _ := h.m.Revision("r1")
			require.Equal(t, state.RevisionRetired, r1.Status)
			h.requireReplayable()
		})
	}
}

// TestPredecessorNeverListedActiveAfterSwap: between the commit and the
// finalization the predecessor is listed superseded, not active.
func TestPredecessorNeverListedActiveAfterSwap(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	entered, release := make(chan struct{}), make(chan struct{})
	h.d.SetHook(memory.OpActivate, func(ctx context.Context, id string) error {
		if id == "r2" {
			close(entered)
			<-release
		}
		return nil
	})
	h.deploy("r2", state.HarnessOpenClaw, nil, 0)
	h.drive(func() bool {
		select {
		case <-entered:
			return true
		default:
			return false
		}
	}, "r2 committed, activation in flight")
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r2", a.ActiveRevisionID)
	var active []string
	for _, r := range h.m.Revisions("a1") {
		if r.Status == state.RevisionActive {
			active = append(active, r.ID)
		}
	}
	require.Equal(t, []string{"r2"}, active, "only the committed revision is listed active")
	close(release)
	h.waitWork("w-r2", state.WorkCompleted)
}

// TestSupersededDuringFinalizationBackoff: r1 is committed but its
// finalization keeps failing; r2 is deployed inside r1's backoff and
// activates. r1 still gets exactly one activate audit record (from r2's
// completion), its work ends superseded (not failed) and its status is
// retired (not failed).
func TestSupersededDuringFinalizationBackoff(t *testing.T) {
	h := newHarness(t, hopt{cfg: Config{BackoffBase: time.Hour, BackoffMax: time.Hour}})
	h.d.Fail(memory.OpActivate, "r1", -1, nil)
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	h.drive(func() bool {
		codes := h.requeueCodes("w-r1")
		return len(codes) > 0
	}, "r1 committed, finalization failed")
	require.Equal(t, []string{string(codes.FinalizationIncomplete)}, h.requeueCodes("w-r1"))
	h.d.Fail(memory.OpActivate, "r1", 0, nil)
	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations(), "exactly one activate audit each")
	h.clk.Advance(2 * time.Hour)
	h.e.Notify()
	w1 := h.waitWork("w-r1", state.WorkSuperseded)
	require.Empty(t, w1.Owner)
	r1, _ := h.m.Revision("r1")
	require.Equal(t, state.RevisionRetired, r1.Status)
	require.Empty(t, r1.FailureCode)
	require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations())
	h.requireReplayable()
}

// TestMaintenanceFinalizesAfterAttemptsSpent: when a committed revision's
// work runs out of attempts, the maintenance pass enqueues its
// finalization again until it completes with its one activate audit.
func TestMaintenanceFinalizesAfterAttemptsSpent(t *testing.T) {
	h := newHarness(t, hopt{cfg: Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 100 * time.Millisecond}})
	h.d.Fail(memory.OpActivate, "r1", -1, nil)
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 2), state.WorkFailed)
	require.Equal(t, state.CodeMaxAttemptsExhausted, w.LastCode)
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r1", a.ActiveRevisionID)
	require.Empty(t, h.activations(), "not finalized yet")
	h.d.Fail(memory.OpActivate, "r1", 0, nil)
	h.drive(func() bool { return h.activations()["r1"] == 1 }, "maintenance finalized r1")
	rt, _ := h.m.RevisionRuntime("r1")
	require.False(t, rt.Unfinalized)
	var requeued int
	for _, p := range h.proposals() {
		if p.typ == state.CmdRequeueFinalization.Name() {
			requeued++
		}
	}
	require.GreaterOrEqual(t, requeued, 1)
	h.clk.Advance(time.Minute)
	require.Equal(t, map[string]int{"r1": 1}, h.activations(), "exactly one")
	h.requireReplayable()
}

// TestFailedAndSupersededRevisionsLeaveNothingRunning: a held candidate and
// a superseded prepared one are stopped by the engine.
func TestFailedAndSupersededRevisionsLeaveNothingRunning(t *testing.T) {
	h := newHarness(t, hopt{mode: state.ModeDedicated, harness: state.HarnessCodex})
	h.waitWork(h.deploy("r1", state.HarnessCodex, nil, 0), state.WorkCompleted)
	h.d.Hold("r2", codes.LoginFailed, nil)
	w := h.waitWork(h.deploy("r2", state.HarnessCodex, nil, 0), state.WorkFailed)
	require.Equal(t, string(codes.RevisionLoginFailed), w.LastCode)
	require.Contains(t, h.d.CallsOf(memory.OpStop), "r2", "the held candidate is stopped")
	require.False(t, h.d.Runtime("r2").Running)
	rt, _ := h.m.RevisionRuntime("r2")
	require.Equal(t, string(codes.LoginFailed), rt.HeldCode, "the revision carries the held code")

	h.d.ReadyAfter("r3", -1)
	h.deploy("r3", state.HarnessCodex, nil, 0)
	h.drive(func() bool { return h.d.Runtime("r3").Running }, "r3 prepared")
	h.waitWork(h.deploy("r4", state.HarnessCodex, nil, 0), state.WorkCompleted)
	h.waitWork("w-r3", state.WorkSuperseded)
	require.False(t, h.d.Runtime("r3").Running, "the superseded candidate was stopped")
	h.requireReplayable()
}

// TestStopCancelsPendingActivation: a stop cancels queued activate work at
// once and claimed work through its claim, which stops what it started.
func TestStopCancelsPendingActivation(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.d.ReadyAfter("r2", -1)
	h.deploy("r2", state.HarnessOpenClaw, nil, 0)
	h.drive(func() bool { return len(h.requeueCodes("w-r2")) > 0 }, "r2 waits for readiness")
	h.d.ReadyAfter("r3", -1)
	h.propose(state.CmdRequestStop, state.RequestStop{AgentID: "a1", WorkID: "s1"})
	h.e.Notify()
	h.waitWork("s1", state.WorkCompleted)
	w2, _ := h.m.Work("w-r2")
	require.Equal(t, state.WorkFailed, w2.State)
	require.Equal(t, state.CodeActivationCanceled, w2.LastCode)
	r2, _ := h.m.Revision("r2")
	require.Equal(t, state.RevisionStopped, r2.Status)
	require.False(t, h.d.Runtime("r2").Running)
	a, _ := h.m.Agent("a1")
	require.Empty(t, a.ActiveRevisionID)

	// Queued work is canceled by the stop itself.
	h.stop()
	h.deploy("r3", state.HarnessOpenClaw, nil, 0)
	h.propose(state.CmdRequestStop, state.RequestStop{AgentID: "a1", WorkID: "s2"})
	w3, _ := h.m.Work("w-r3")
	require.Equal(t, state.CodeActivationCanceled, w3.LastCode)
	require.Empty(t, h.d.CallsOf(memory.OpPrepare)[2:], "r3 was never prepared")
	h.requireReplayable()
}

// TestCredentialCheckedBeforeCutover: a rejected candidate credential fails
// the candidate held AUTHENTICATION_FAILED with its diagnostics before any
// predecessor is stopped or anything is prepared; the active revision stays.
func TestCredentialCheckedBeforeCutover(t *testing.T) {
	for _, mode := range []string{state.ModeEmbedded, state.ModeDedicated} {
		t.Run(mode, func(t *testing.T) {
			harnessID := state.HarnessOpenClaw
			if mode == state.ModeDedicated {
				harnessID = state.HarnessCodex
			}
			h := newHarness(t, hopt{mode: mode, harness: harnessID})
			h.waitWork(h.deploy("r1", harnessID, nil, 0), state.WorkCompleted)
			h.d.RejectCredential("r2", map[string]string{"status": "401", "providerCode": "openai", "bodyShape": "json-error-code"})
			before := len(h.d.Calls())
			w := h.waitWork(h.deploy("r2", harnessID, nil, 0), state.WorkFailed)
			require.Equal(t, string(codes.RevisionAuthenticationFailed), w.LastCode)
			require.Contains(t, w.LastDetail, "providerCode=openai")
			for _, c := range h.d.Calls()[before:] {
				require.NotEqual(t, memory.OpStop, c.Op, "no predecessor stopped")
				require.NotEqual(t, memory.OpActivate, c.Op)
				require.NotEqual(t, "r2", map[bool]string{true: c.ID}[c.Op == memory.OpPrepare])
			}
			a, _ := h.m.Agent("a1")
			require.Equal(t, "r1", a.ActiveRevisionID)
			require.True(t, h.d.Runtime("r1").Running)
			rt, _ := h.m.RevisionRuntime("r2")
			require.Equal(t, state.CredentialRejected, rt.Credential)
			require.Equal(t, string(codes.AuthenticationFailed), rt.HeldCode)
			require.Equal(t, "openai", rt.Diagnostics["providerCode"])
		})
	}
	// A rejection recorded by a claim that could not fail its work (the
	// leader lost its leadership between the two writes) fails the work at
	// the next claim without a second model request; the candidate is never
	// activated.
	t.Run("recorded rejection, failure lost", func(t *testing.T) {
		h := newHarness(t, hopt{})
		h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
		h.d.RejectCredential("r2", nil)
		lost := false
		h.setBlock(func(typ string, payload any) error {
			if typ == state.CmdFailWork.Name() && !lost {
				lost = true
				return errors.New("raft: node is not the leader")
			}
			return nil
		})
		w := h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkFailed)
		require.True(t, lost, "the first failure was lost")
		require.Equal(t, string(codes.RevisionAuthenticationFailed), w.LastCode)
		require.Equal(t, []string{"r2"}, h.d.CallsOf(memory.OpCheckCredential)[1:], "one model request for r2")
		require.NotContains(t, h.d.CallsOf(memory.OpPrepare), "r2", "never prepared")
		require.NotContains(t, h.d.CallsOf(memory.OpActivate), "r2")
		a, _ := h.m.Agent("a1")
		require.Equal(t, "r1", a.ActiveRevisionID)
	})
	t.Run("seed order", func(t *testing.T) {
		h := newHarness(t, hopt{cfg: Config{CredentialCheck: CredentialCheckSeed}})
		h.d.RejectCredential("r1", nil)
		h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
		require.Empty(t, h.d.CallsOf(memory.OpCheckCredential), "the seeds' order leaves the check to the runtime")
	})
}

// TestHealthObserved: the watcher records the active revision's observed
// readiness, and a held active revision becomes unready with its code.
func TestHealthObserved(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready }, "observed ready")
	h.d.Hold("r1", codes.ModelProbeFailed, &codes.Cause{Kind: codes.CauseProcessExit, Detail: "exit-1"})
	h.drive(func() bool { hl, _ := h.m.Health("a1"); return !hl.Ready }, "observed held")
	hl, _ := h.m.Health("a1")
	require.Equal(t, string(codes.ModelProbeFailed), hl.HeldCode)
	require.Equal(t, "PROCESS_EXIT", hl.CauseKind)
	require.True(t, hl.EverReady)
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r1", a.ActiveRevisionID, "no rollback without a policy")
}

func (h *harness) enableRollback(window time.Duration) {
	h.propose(state.CmdSetRollbackPolicy, state.SetRollbackPolicy{AgentID: "a1",
		Policy: &state.RollbackPolicy{Enabled: true, Window: window}})
}

// TestRollbackToExactPrevious: with the policy, a revision held after its
// activation is rolled back once to the exact previous revision, audited as
// a rollback with its cause; a held rollback target is never rolled back
// again.
func TestRollbackToExactPrevious(t *testing.T) {
	h := newHarness(t, hopt{})
	h.enableRollback(time.Minute)
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.d.SetHook(memory.OpActivate, func(ctx context.Context, id string) error {
		if id == "r3" {
			h.d.Hold("r3", codes.AuthenticationFailed, nil) // held after the cutover
		}
		return nil
	})
	h.waitWork(h.deploy("r3", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { return h.audits(state.AuditRollback)["r2"] == 1 }, "rolled back to r2")
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r2", a.ActiveRevisionID, "the exact previous revision, not r1")
	require.Equal(t, "r2", h.d.Route("a1"))
	var rb state.AuditRecord
	for _, r := range h.m.Audit(0, 0) {
		if r.Action == state.AuditRollback {
			rb = r
		}
	}
	require.Equal(t, "r3", rb.Details["from"])
	require.Contains(t, rb.Details["cause"], "held AUTHENTICATION_FAILED")
	r3, _ := h.m.Revision("r3")
	require.Equal(t, state.RevisionFailed, r3.Status)
	require.False(t, h.d.Runtime("r3").Running)
	require.Equal(t, map[string]int{"r1": 1, "r2": 1, "r3": 1}, h.activations(), "one activate record per activation")

	// Never twice in a loop: the rollback target going bad stays.
	h.d.Hold("r2", codes.AuthenticationFailed, nil)
	h.drive(func() bool { hl, _ := h.m.Health("a1"); return hl.HeldCode != "" }, "r2 held")
	h.clk.Advance(2 * time.Minute)
	h.clk.Advance(DefaultHealthInterval)
	a, _ = h.m.Agent("a1")
	require.Equal(t, "r2", a.ActiveRevisionID)
	require.Equal(t, 1, len(h.audits(state.AuditRollback)))
	h.requireReplayable()
}

// TestRollbackNeedsPolicyAndSameOwner: without the policy nothing rolls
// back; the state refuses a rollback to another owner's revision.
func TestRollbackNeedsPolicyAndSameOwner(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.d.SetHook(memory.OpActivate, func(ctx context.Context, id string) error {
		if id == "r2" {
			h.d.Hold("r2", codes.AuthenticationFailed, nil)
		}
		return nil
	})
	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, _ := h.m.Health("a1"); return hl.HeldCode != "" }, "r2 held")
	h.clk.Advance(DefaultHealthInterval)
	require.Empty(t, h.audits(state.AuditRollback), "no rollback without the policy")

	h.enableRollback(time.Hour)
	h.stop()
	h.propose(state.CmdCreateAgent, state.CreateAgent{ID: "a2", NamespaceID: "ns1", Name: "other", ConfigurationID: "c1"})
	cf, _ := h.m.Configuration("c1")
	h.propose(state.CmdAdmitRevision, state.AdmitRevision{WorkID: "wx", Revision: state.Revision{ID: "rx", AgentID: "a2",
		NamespaceID: "ns1", Document: cf.Document, ConfigurationID: "c1", ConfigurationGeneration: cf.Generation,
		Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "x"}, Mode: state.ModeEmbedded}})
	_, err := h.p.Propose(context.Background(), state.CmdRequestRollback.Name(), state.RequestRollback{AgentID: "a1",
		FromRevisionID: "r2", ToRevisionID: "rx", WorkID: "wr", Cause: "test"})
	require.ErrorIs(t, err, state.ErrInvalid, "never to another owner's revision")
	_, err = h.p.Propose(context.Background(), state.CmdRequestRollback.Name(), state.RequestRollback{AgentID: "a1",
		FromRevisionID: "r2", ToRevisionID: "r1", WorkID: "wr", Cause: "test"})
	require.NoError(t, err, "the exact previous revision of the same owner")
}

// TestObservationFailureIsNotUnhealth: the coordinator failing to look (a
// transient error: the API server slow, a rate limit) leaves the last
// observation standing and rolls nothing back, however long it lasts; a
// permanent finding is recorded.
func TestObservationFailureIsNotUnhealth(t *testing.T) {
	h := newHarness(t, hopt{})
	h.enableRollback(time.Minute)
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready && hl.RevisionID == "r2" }, "r2 observed ready")
	var failed atomic.Int64
	h.d.SetHook(memory.OpObserve, func(context.Context, string) error {
		failed.Add(1)
		return compute.Transient(codes.TransientDependency, errors.New("client rate limiter Wait: context deadline exceeded"))
	})
	h.drive(func() bool { return failed.Load() >= 3 }, "observations failing")
	h.clk.Advance(2 * time.Minute) // past the rollback window
	n := failed.Load()
	h.drive(func() bool { return failed.Load() >= n+3 }, "still failing past the window")
	hl, _ := h.m.Health("a1")
	require.True(t, hl.Ready, "the last observation stands: %+v", hl)
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r2", a.ActiveRevisionID)
	require.Empty(t, h.audits(state.AuditRollback), "nothing rolled back for a failure to look")

	h.d.SetHook(memory.OpObserve, func(context.Context, string) error {
		return compute.Permanent(codes.ForeignWorkload, errors.New("the gateway Deployment has another owner"))
	})
	h.drive(func() bool { hl, _ := h.m.Health("a1"); return !hl.Ready }, "a permanent finding recorded")
	hl, _ = h.m.Health("a1")
	require.Equal(t, "observation-failed:"+string(codes.ForeignWorkload), hl.Reason)
}
