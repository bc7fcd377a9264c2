package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

func TestHappyPathEmbedded(t *testing.T) {
	h := newHarness(t, hopt{})
	w1 := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, &state.HarnessAuth{Method: "api_key"}, 0), state.WorkCompleted)
	require.Equal(t, state.PhaseActive, w1.Phase)
	require.Equal(t, 1, w1.Attempts)
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r1", a.ActiveRevisionID)
	require.Equal(t, []memory.Call{{Op: memory.OpCheckCredential, ID: "r1"}, {Op: memory.OpEnsureNamespace, ID: "ns1"},
		{Op: memory.OpPrepare, ID: "r1"}, {Op: memory.OpObserve, ID: "r1"}, {Op: memory.OpActivate, ID: "r1"}},
		h.d.Calls()[:5], "the credential is checked first; embedded stops no predecessor")

	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	a, _ = h.m.Agent("a1")
	require.Equal(t, "r2", a.ActiveRevisionID)
	r1, _ := h.m.Revision("r1")
	require.Equal(t, state.RevisionRetired, r1.Status)
	require.Equal(t, "r2", h.d.Route("a1"))
	require.Equal(t, []string{"r1"}, h.d.CallsOf(memory.OpRetire))
	require.Empty(t, h.d.CallsOf(memory.OpStop))
	require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations())
	// The commit precedes the driver's activation (after-commit default).
	var order []string
	for _, p := range h.proposals() {
		if p.typ == state.CmdActivateRevision.Name() || p.typ == state.CmdCompleteActivation.Name() {
			order = append(order, p.typ)
		}
	}
	require.Equal(t, []string{state.CmdActivateRevision.Name(), state.CmdCompleteActivation.Name(),
		state.CmdActivateRevision.Name(), state.CmdCompleteActivation.Name()}, order)
	h.requireReplayable()
}

func TestHappyPathDedicated(t *testing.T) {
	h := newHarness(t, hopt{mode: state.ModeDedicated, harness: state.HarnessCodex})
	h.waitWork(h.deploy("r1", state.HarnessCodex, &state.HarnessAuth{Method: "codex_pat"}, 0), state.WorkCompleted)
	w2 := h.waitWork(h.deploy("r2", state.HarnessCodex, &state.HarnessAuth{Method: "codex_pat"}, 0), state.WorkCompleted)
	require.Equal(t, 1, w2.Attempts)
	var r2calls []memory.Call
	for _, c := range h.d.Calls() {
		if c.ID == "r2" || c.Op == memory.OpStop || c.Op == memory.OpRetire {
			r2calls = append(r2calls, c)
		}
	}
	require.Equal(t, []memory.Call{{Op: memory.OpCheckCredential, ID: "r2"}, {Op: memory.OpStop, ID: "r1"},
		{Op: memory.OpPrepare, ID: "r2"}, {Op: memory.OpObserve, ID: "r2"}, {Op: memory.OpActivate, ID: "r2"},
		{Op: memory.OpRetire, ID: "r1"}}, r2calls[:6], "the credential is checked, then the predecessor is stopped before preparation")
	require.Empty(t, h.m.PredecessorStops("a1"), "retirement drops the stop record")
	require.Equal(t, []string{state.PhasePreparing, state.PhaseReady}, h.phases("w-r1"))
	require.Equal(t, []string{state.PhaseStopping, state.PhasePreparing, state.PhaseReady}, h.phases("w-r2"))
	require.False(t, h.d.Runtime("r1").Running)
	require.True(t, h.d.Runtime("r2").Running)
	require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations())
	h.requireReplayable()
}

func TestDriverFaultsAtEveryStep(t *testing.T) {
	type tc struct {
		name      string
		dedicated bool
		beforeCmt bool
		op        memory.Op
		onRev     string // revision whose call fails ("" any)
		wantCode  codes.Code
	}
	cases := []tc{
		{name: "ensure namespace", op: memory.OpEnsureNamespace, wantCode: codes.TransientDependency},
		{name: "prepare", op: memory.OpPrepare, onRev: "r2", wantCode: codes.TransientDependency},
		{name: "observe", op: memory.OpObserve, onRev: "r2", wantCode: codes.TransientDependency},
		{name: "activate after commit", op: memory.OpActivate, onRev: "r2", wantCode: codes.FinalizationIncomplete},
		{name: "activate before commit", beforeCmt: true, op: memory.OpActivate, onRev: "r2", wantCode: codes.TransientDependency},
		{name: "retire", op: memory.OpRetire, onRev: "r1", wantCode: codes.FinalizationIncomplete},
		{name: "stop predecessor", dedicated: true, op: memory.OpStop, onRev: "r1", wantCode: codes.TransientDependency},
		{name: "prepare dedicated", dedicated: true, op: memory.OpPrepare, onRev: "r2", wantCode: codes.TransientDependency},
	}
	for _, c := range cases {
		for _, times := range []int{1, 3} {
			t.Run(c.name+"/"+strings.Repeat("x", times), func(t *testing.T) {
				o := hopt{}
				hid, auth := state.HarnessOpenClaw, &state.HarnessAuth{Method: "api_key"}
				if c.dedicated {
					o.mode, hid = state.ModeDedicated, state.HarnessCodex
				}
				if c.beforeCmt {
					caps := memory.DefaultCapabilities()
					caps.ActivateBeforeCommit = true
					o.caps = &caps
				}
				h := newHarness(t, o)
				h.waitWork(h.deploy("r1", hid, auth, 0), state.WorkCompleted)
				h.d.Fail(c.op, c.onRev, times, nil)
				w := h.waitWork(h.deploy("r2", hid, auth, 0), state.WorkCompleted)
				require.Equal(t, times+1, w.Attempts)
				require.Equal(t, slicesRepeat(string(c.wantCode), times), h.requeueCodes("w-r2"))
				a, _ := h.m.Agent("a1")
				require.Equal(t, "r2", a.ActiveRevisionID)
				require.Equal(t, "r2", h.d.Route("a1"))
				r1, _ := h.m.Revision("r1")
				require.Equal(t, state.RevisionRetired, r1.Status)
				require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations(), "exactly one activate audit per revision")
				if c.wantCode == codes.FinalizationIncomplete {
					// Recovery re-ran activation for the already-active revision.
					require.GreaterOrEqual(t, len(h.d.CallsOf(memory.OpActivate)), 2+times)
				}
				h.requireReplayable()
			})
		}
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestPermanentDriverErrorFailsAtOnce(t *testing.T) {
	h := newHarness(t, hopt{})
	h.d.Fail(memory.OpPrepare, "r1", -1, compute.Permanent("FOREIGN_WORKLOAD", errors.New("owned by someone else")))
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkFailed)
	require.Equal(t, "FOREIGN_WORKLOAD", w.LastCode)
	require.Equal(t, 1, w.Attempts)
	r, _ := h.m.Revision("r1")
	require.Equal(t, state.RevisionFailed, r.Status)
	require.Empty(t, h.activations())
}

func TestMaxAttemptsExhausted(t *testing.T) {
	h := newHarness(t, hopt{})
	h.d.Fail(memory.OpPrepare, "r1", -1, nil)
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 3), state.WorkFailed)
	require.Equal(t, state.CodeMaxAttemptsExhausted, w.LastCode)
	require.Equal(t, 3, w.Attempts)
	require.Len(t, h.d.CallsOf(memory.OpPrepare), 3)
	r, _ := h.m.Revision("r1")
	require.Equal(t, state.RevisionFailed, r.Status)
	// Backoff grew between attempts: 1 s then 2 s nominal, jittered into [d/2, d].
	var at []time.Time
	for _, p := range h.proposals() {
		if c, ok := p.payload.(state.ClaimWork); ok && c.WorkID == "w-r1" {
			at = append(at, p.at)
		}
	}
	require.Len(t, at, 3)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 500*time.Millisecond)
	require.GreaterOrEqual(t, at[2].Sub(at[1]), time.Second)
}

func TestHeldCodesFailAtOnce(t *testing.T) {
	cause := &codes.Cause{Kind: codes.CauseProbeStatus, Detail: "rate_limit"}
	for held, want := range map[codes.Code]codes.Code{
		codes.AuthenticationFailed: codes.RevisionAuthenticationFailed,
		codes.ModelProbeCPUStarved: codes.RevisionCPUStarved,
		codes.ModelProbeTimeout:    codes.RevisionModelProbeTimeout,
		codes.ModelProbeFailed:     codes.RevisionModelProbeFailed,
		codes.LoginFailed:          codes.RevisionLoginFailed,
		codes.Unavailable:          codes.RevisionStartupFailed,
		codes.IncompatibleResponse: codes.RevisionStartupFailed,
	} {
		t.Run(string(held), func(t *testing.T) {
			h := newHarness(t, hopt{})
			var c *codes.Cause
			if held == codes.ModelProbeFailed {
				c = cause
			}
			h.d.Hold("r1", held, c)
			w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkFailed)
			require.Equal(t, string(want), w.LastCode)
			require.Equal(t, 1, w.Attempts, "a held failure is not retried")
			r, _ := h.m.Revision("r1")
			require.Equal(t, state.RevisionFailed, r.Status)
			require.Equal(t, string(want), r.FailureCode)
			require.Contains(t, r.FailureDetail, string(held))
			if c != nil {
				require.Contains(t, r.FailureDetail, "PROBE_STATUS:rate_limit")
			}
			require.Empty(t, h.d.CallsOf(memory.OpActivate))
			a, _ := h.m.Agent("a1")
			require.Empty(t, a.ActiveRevisionID)
		})
	}
}

func TestNotReadyIsDeferredWithGrowingDelay(t *testing.T) {
	h := newHarness(t, hopt{})
	h.d.ReadyAfter("r1", 6)
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 3), state.WorkCompleted)
	require.Equal(t, 1, w.Attempts, "readiness polls give their attempt back")
	require.Equal(t, slicesRepeat(string(codes.ActivationPending), 6), h.requeueCodes("w-r1"))
	require.Len(t, h.d.CallsOf(memory.OpObserve), 7)
	for _, p := range h.proposals() {
		if r, ok := p.payload.(state.RequeueWork); ok {
			d := r.AvailableAt.Sub(p.at)
			require.GreaterOrEqual(t, d, DefaultReadinessMin)
			require.LessOrEqual(t, d, DefaultReadinessMax)
		}
	}
	require.Equal(t, map[string]int{"r1": 1}, h.activations())
}

func TestReadinessDelay(t *testing.T) {
	e := New(Config{}, nil, memory.New(memory.DefaultCapabilities()), NewFakeClock(t0), nil)
	require.Equal(t, 500*time.Millisecond, e.readinessDelay(0))
	require.Equal(t, 500*time.Millisecond, e.readinessDelay(20*time.Second))
	require.Equal(t, time.Second, e.readinessDelay(40*time.Second))
	require.Equal(t, 5*time.Second, e.readinessDelay(time.Hour))
	for attempt, nominal := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 12: 300 * time.Second, 40: 300 * time.Second} {
		b := e.backoff(attempt)
		require.GreaterOrEqual(t, b, nominal/2, attempt)
		require.LessOrEqual(t, b, nominal, attempt)
	}
}

func TestConvergenceWindow(t *testing.T) {
	h := newHarness(t, hopt{cfg: Config{ConvergenceWindow: 20 * time.Second}})
	h.step = time.Second
	h.d.ReadyAfter("r1", -1)
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkFailed)
	require.Equal(t, string(codes.RevisionNotReady), w.LastCode)
}

func TestValidationFailures(t *testing.T) {
	for name, c := range map[string]struct {
		mode, harness string
		auth          *state.HarnessAuth
		compute       string
		want          string
	}{
		"codex embedded":       {mode: state.ModeEmbedded, harness: state.HarnessCodex, want: string(codes.HarnessDescriptorMismatch)},
		"auth unsupported":     {mode: state.ModeEmbedded, harness: state.HarnessOpenClaw, auth: &state.HarnessAuth{Method: "codex_pat"}, want: string(codes.HarnessAuthUnsupported)},
		"other compute target": {mode: state.ModeEmbedded, harness: state.HarnessOpenClaw, compute: "k8s-east", want: string(codes.ComputeDriverMismatch)},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, hopt{mode: c.mode})
			cf, _ := h.m.Configuration("c1")
			comp := memory.Name
			if c.compute != "" {
				comp = c.compute
			}
			h.propose(state.CmdAdmitRevision, state.AdmitRevision{WorkID: "w1", Revision: state.Revision{ID: "r1", AgentID: "a1",
				NamespaceID: "ns1", Document: cf.Document, ConfigurationID: "c1", ConfigurationGeneration: cf.Generation,
				Harness: state.HarnessIdentity{ID: c.harness, Version: "x"}, Mode: c.mode, ComputeID: comp, HarnessAuth: c.auth}})
			h.e.Notify()
			w := h.waitWork("w1", state.WorkFailed)
			require.Equal(t, c.want, w.LastCode)
			require.Empty(t, h.d.CallsOf(memory.OpPrepare), "rejected before any workload is created")
		})
	}
}

func TestSupersededRevision(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	h.deploy("r2", state.HarnessOpenClaw, nil, 0)
	h.start()
	w1 := h.waitWork("w-r1", state.WorkSuperseded)
	require.Equal(t, 1, w1.Attempts)
	h.waitWork("w-r2", state.WorkCompleted)
	require.NotContains(t, h.d.CallsOf(memory.OpPrepare), "r1", "a superseded revision is never prepared")
	require.Equal(t, map[string]int{"r2": 1}, h.activations())
	a, _ := h.m.Agent("a1")
	require.Equal(t, "r2", a.ActiveRevisionID)
	h.requireReplayable()
}

// TestComebackAfterLeaderChange: a driver that remembers no stops (a new
// leader's) still has a predecessor that came back judged so, from the
// replicated stop record: the successor stays unready for that pass.
func TestComebackAfterLeaderChange(t *testing.T) {
	h := newHarness(t, hopt{mode: state.ModeDedicated})
	h.step = 250 * time.Millisecond
	h.waitWork(h.deploy("r1", state.HarnessCodex, nil, 0), state.WorkCompleted)
	var mu sync.Mutex
	stops := 0
	h.d.SetHook(memory.OpStop, func(ctx context.Context, id string) error {
		if id == "r1" {
			mu.Lock()
			defer mu.Unlock()
			stops++
		}
		return nil
	})
	nstops := func() int { mu.Lock(); defer mu.Unlock(); return stops }
	h.d.ReadyAfter("r2", -1)
	h.deploy("r2", state.HarnessCodex, nil, 0)
	h.driveSettled(func() bool { return nstops() >= 1 }, "r1 stopped")
	require.Len(t, h.m.PredecessorStops("a1"), 1, "the stop is recorded")
	cameBack := func() int {
		n := 0
		for _, p := range h.proposals() {
			if r, ok := p.payload.(state.RequeueWork); ok && r.WorkID == "w-r2" && strings.Contains(r.Detail, "predecessor-came-back") {
				n++
			}
		}
		return n
	}
	require.Zero(t, cameBack())
	h.d.ForgetStops()
	h.d.ComeBack("r1")
	h.driveSettled(func() bool { return nstops() >= 2 }, "the re-stop")
	h.driveSettled(func() bool { return cameBack() >= 1 }, "a pass judged r1 come back")
	h.d.SetHook(memory.OpStop, nil)
}

func TestReStopSchedule(t *testing.T) {
	h := newHarness(t, hopt{mode: state.ModeDedicated})
	h.step = 250 * time.Millisecond
	h.waitWork(h.deploy("r1", state.HarnessCodex, nil, 0), state.WorkCompleted)
	var mu sync.Mutex
	var stops []time.Time
	var cameBack []bool
	h.d.SetHook(memory.OpStop, func(ctx context.Context, id string) error {
		if id == "r1" {
			mu.Lock()
			defer mu.Unlock()
			stops = append(stops, h.clk.Now())
			cameBack = append(cameBack, h.d.Runtime("r1").Running && h.d.Runtime("r1").Stops > 0)
		}
		return nil
	})
	nstops := func() int { mu.Lock(); defer mu.Unlock(); return len(stops) }
	h.d.ReadyAfter("r2", -1)
	h.deploy("r2", state.HarnessCodex, nil, 0)
	lease := DefaultLease
	// Settled: each stop's pass has recorded it (and requeued) before the
	// test looks, and a predecessor that comes back does so between passes.
	h.driveSettled(func() bool { return nstops() >= 4 }, "four stops of r1")
	// The predecessor comes back; the next due re-stop reports it and the
	// successor stays unready for that pass.
	h.d.ComeBack("r1")
	h.driveSettled(func() bool { return nstops() >= 5 }, "a fifth stop")
	h.d.SetHook(memory.OpStop, nil)
	mu.Lock()
	defer mu.Unlock()
	// Intervals between stops double: 1, 2, 4, 8 leases (plus at most one
	// pass delay, which is ≤ the 5 s readiness maximum and a clock step).
	for i, want := range []time.Duration{lease, 2 * lease, 4 * lease, 8 * lease} {
		gap := stops[i+1].Sub(stops[i])
		require.GreaterOrEqual(t, gap, want, "gap %d", i)
		require.Less(t, gap, want+DefaultReadinessMax+time.Second, "gap %d", i)
	}
	require.Equal(t, []bool{false, false, false, false, true}, cameBack)
	require.Greater(t, len(h.d.CallsOf(memory.OpObserve)), 10, "recorded predecessors are skipped on readiness passes")
	rec := h.m.PredecessorStops("a1")
	require.Len(t, rec, 1)
	require.Equal(t, 4, rec[0].Restops)
	var pending int
	for _, c := range h.requeueCodes("w-r2") {
		if c == string(codes.ActivationPending) {
			pending++
		}
	}
	require.Equal(t, len(h.requeueCodes("w-r2")), pending)
	// Now the successor becomes ready and activates once.
	h.d.ReadyAfter("r2", 0)
	h.waitWork("w-r2", state.WorkCompleted)
	require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations())
	require.Empty(t, h.m.PredecessorStops("a1"))
	h.requireReplayable()
}

func TestFailedPassDropsPredecessorRecords(t *testing.T) {
	h := newHarness(t, hopt{mode: state.ModeDedicated})
	h.waitWork(h.deploy("r1", state.HarnessCodex, nil, 0), state.WorkCompleted)
	h.d.Fail(memory.OpPrepare, "r2", 1, nil)
	h.waitWork(h.deploy("r2", state.HarnessCodex, nil, 0), state.WorkCompleted)
	require.Equal(t, []string{"r1", "r1"}, h.d.CallsOf(memory.OpStop), "the failed pass forgot the stop, so it was repeated")
	var drops int
	for _, p := range h.proposals() {
		if d, ok := p.payload.(state.DropPredecessorStop); ok && len(d.RevisionIDs) == 0 {
			drops++
		}
	}
	require.Equal(t, 1, drops)
}

// TestLostClaimWritesNothing: a claim whose lease lapsed and that another
// owner took over writes nothing more, even when the driver call it was
// blocked in returns.
func TestLostClaimWritesNothing(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		name := "lease expired"
		if takeover {
			name = "reclaimed by another owner"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, hopt{})
			entered, release := make(chan struct{}), make(chan struct{})
			first := true
			h.d.SetHook(memory.OpPrepare, func(ctx context.Context, id string) error {
				if first {
					first = false
					close(entered)
					<-release // ignores ctx: a driver call that outlives the lease
				}
				return nil
			})
			h.deploy("r1", state.HarnessOpenClaw, nil, 0)
			h.drive(func() bool {
				select {
				case <-entered:
					return true
				default:
					return false
				}
			}, "prepare entered")
			w, _ := h.m.Work("w-r1")
			owner := w.Owner
			// Jump past the lease in one step: the lapse timer fires before any
			// renewal can run.
			h.clk.Advance(DefaultLease + time.Second)
			if takeover {
				h.propose(state.CmdClaimWork, state.ClaimWork{WorkID: "w-r1", Owner: "intruder", LeaseExpiry: h.clk.Now().Add(time.Hour)})
			}
			mark := len(h.proposals())
			close(release)
			if takeover {
				// The engine is free again but the intruder's claim is live for an hour.
				require.Never(t, func() bool {
					h.clk.Advance(h.step)
					return h.d.Route("a1") != ""
				}, 300*time.Millisecond, 5*time.Millisecond)
				for _, p := range h.proposals()[mark:] {
					require.NotEqual(t, owner, claimOwner(p.payload), "lost claim wrote %s", p.typ)
				}
				w, _ := h.m.Work("w-r1")
				require.Equal(t, "intruder", w.Owner)
				require.Empty(t, h.activations())
				return
			}
			// Without a takeover the engine reclaims the expired work and
			// finishes it exactly once.
			w = h.waitWork("w-r1", state.WorkCompleted)
			require.Equal(t, 2, w.Attempts)
			for _, p := range h.proposals()[mark:] {
				if p.typ == state.CmdClaimWork.Name() {
					break
				}
				require.NotEqual(t, owner, claimOwner(p.payload), "lost claim wrote %s", p.typ)
			}
			require.Equal(t, map[string]int{"r1": 1}, h.activations())
			h.requireReplayable()
		})
	}
}

func claimOwner(p any) string {
	switch v := p.(type) {
	case state.SetWorkPhase:
		return v.Owner
	case state.RequeueWork:
		return v.Owner
	case state.FailWork:
		return v.Owner
	case state.ActivateRevision:
		return v.Owner
	case state.CompleteActivation:
		return v.Owner
	case state.RenewClaim:
		return v.Owner
	case state.RecordPredecessorStop:
		return v.Owner
	case state.DropPredecessorStop:
		return v.Owner
	}
	return ""
}

func TestLeaseRenewedDuringLongDriverCall(t *testing.T) {
	h := newHarness(t, hopt{})
	release := make(chan struct{})
	h.d.SetHook(memory.OpPrepare, func(ctx context.Context, id string) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	h.drive(func() bool {
		var renewals int
		for _, p := range h.proposals() {
			if p.typ == state.CmdRenewClaim.Name() {
				renewals++
			}
		}
		return renewals >= 6
	}, "renewals over two leases")
	close(release)
	w := h.waitWork("w-r1", state.WorkCompleted)
	require.Equal(t, 1, w.Attempts, "the claim survived several leases")
}

func TestLeadershipLossAbandons(t *testing.T) {
	h := newHarness(t, hopt{})
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	h.d.SetHook(memory.OpObserve, func(ctx context.Context, id string) error {
		if first {
			first = false
			close(entered)
			<-release
		}
		return nil
	})
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	<-entered
	h.p.SetLeaderErr(errors.New("not leader"))
	close(release)
	require.Never(t, func() bool {
		for _, p := range h.proposals() {
			if p.typ == state.CmdActivateRevision.Name() {
				return true
			}
		}
		return false
	}, 200*time.Millisecond, 5*time.Millisecond, "no commit without leadership")
	h.p.SetLeaderErr(nil)
	w := h.waitWork("w-r1", state.WorkCompleted)
	require.Equal(t, 2, w.Attempts, "the next leader term reclaims after the lease")
	require.Equal(t, map[string]int{"r1": 1}, h.activations())
}

func TestStopWork(t *testing.T) {
	h := newHarness(t, hopt{mode: state.ModeDedicated})
	h.waitWork(h.deploy("r1", state.HarnessCodex, nil, 0), state.WorkCompleted)
	h.d.Fail(memory.OpPrepare, "r2", -1, compute.Permanent("FOREIGN_WORKLOAD", nil))
	h.waitWork(h.deploy("r2", state.HarnessCodex, nil, 0), state.WorkFailed)
	h.waitWork(h.deploy("r3", state.HarnessCodex, nil, 0), state.WorkCompleted)
	h.waitWork(h.deploy("r4", state.HarnessCodex, nil, 0), state.WorkCompleted)
	h.d.Hold("r5", codes.LoginFailed, nil)
	h.waitWork(h.deploy("r5", state.HarnessCodex, nil, 0), state.WorkFailed)
	before := len(h.d.CallsOf(memory.OpStop))
	h.d.Fail(memory.OpStop, "r4", 1, nil)
	h.propose(state.CmdRequestStop, state.RequestStop{AgentID: "a1", WorkID: "s1"})
	h.e.Notify()
	w := h.waitWork("s1", state.WorkCompleted)
	require.Equal(t, 2, w.Attempts)
	require.Equal(t, []string{string(codes.TransientDependency)}, h.requeueCodes("s1"))
	// r1–r3 were retired by later activations; r5 (failed after
	// preparation) may still hold resources. The active revision goes first.
	require.Equal(t, []string{"r4", "r4", "r5"}, h.d.CallsOf(memory.OpStop)[before:])
	a, _ := h.m.Agent("a1")
	require.Empty(t, a.ActiveRevisionID)
	r4, _ := h.m.Revision("r4")
	require.Equal(t, state.RevisionStopped, r4.Status)
	au := h.m.Audit(0, 0)
	require.Equal(t, state.AuditStop, au[len(au)-1].Action)
	h.requireReplayable()
}

func TestDeleteWork(t *testing.T) {
	h := newHarness(t, hopt{})
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.waitWork(h.deploy("r2", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.d.Fail(memory.OpDeleteCredentials, "a1", 2, nil)
	h.d.Fail(memory.OpRetire, "r2", 1, nil)
	h.propose(state.CmdRequestDelete, state.RequestDelete{AgentID: "a1", WorkID: "d1"})
	h.e.Notify()
	h.drive(func() bool { _, ok := h.m.Agent("a1"); return !ok }, "agent deleted")
	require.True(t, h.d.CredentialsDeleted("a1"))
	require.Empty(t, h.m.Revisions("a1"))
	retires := h.d.CallsOf(memory.OpRetire)
	require.Equal(t, []string{"r1", "r1", "r2", "r1", "r2", "r1", "r2", "r1", "r2"}, retires,
		"every revision is retired on each pass before credentials are deleted")
	au := h.m.Audit(0, 0)
	require.Equal(t, state.AuditDelete, au[len(au)-1].Action)
	require.Equal(t, map[string]int{"r1": 1, "r2": 1}, h.activations())
	h.requireReplayable()
}

func TestDeletingAgentFailsPendingActivation(t *testing.T) {
	h := newHarness(t, hopt{noStart: true})
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	h.clk.Advance(time.Second)
	h.propose(state.CmdRequestDelete, state.RequestDelete{AgentID: "a1", WorkID: "d1"})
	h.start()
	h.drive(func() bool { _, ok := h.m.Agent("a1"); return !ok }, "agent deleted")
	require.Empty(t, h.d.CallsOf(memory.OpPrepare))
	var failed bool
	for _, a := range h.m.Audit(0, 0) {
		failed = failed || (a.Action == state.AuditFail && a.Details["code"] == string(codes.InvalidTarget))
	}
	require.True(t, failed)
}

func TestConcurrentAgents(t *testing.T) {
	h := newHarness(t, hopt{})
	for _, id := range []string{"a2", "a3"} {
		h.propose(state.CmdCreateAgent, state.CreateAgent{ID: id, NamespaceID: "ns1", Name: id, ConfigurationID: "c1"})
	}
	// Block a1's prepare: a2 and a3 still activate meanwhile.
	release := make(chan struct{})
	h.d.SetHook(memory.OpPrepare, func(ctx context.Context, id string) error {
		if id == "r1" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	cf, _ := h.m.Configuration("c1")
	for _, id := range []string{"a2", "a3"} {
		h.propose(state.CmdAdmitRevision, state.AdmitRevision{WorkID: "w-" + id, Revision: state.Revision{ID: "r-" + id, AgentID: id,
			NamespaceID: "ns1", Document: cf.Document, ConfigurationID: "c1", ConfigurationGeneration: cf.Generation,
			Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "x"}, Mode: state.ModeEmbedded}})
	}
	h.e.Notify()
	h.waitWork("w-a2", state.WorkCompleted)
	h.waitWork("w-a3", state.WorkCompleted)
	w1, _ := h.m.Work("w-r1")
	require.Equal(t, state.WorkClaimed, w1.State)
	close(release)
	h.waitWork("w-r1", state.WorkCompleted)
}

func TestActiveRevisionChangedRequeues(t *testing.T) {
	h := newHarness(t, hopt{})
	rejected := false
	h.setBlock(func(typ string, payload any) error {
		if typ == state.CmdActivateRevision.Name() && !rejected {
			rejected = true
			// What the FSM answers when another activation won the CAS.
			return fmt.Errorf("%s: %w", typ, state.ErrActiveRevisionChanged)
		}
		return nil
	})
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	require.Equal(t, []string{string(codes.ActiveRevisionChanged)}, h.requeueCodes("w-r1"))
	require.Equal(t, 2, w.Attempts)
	require.Equal(t, map[string]int{"r1": 1}, h.activations())
}

func TestProposalFailureAfterCommitRecovers(t *testing.T) {
	h := newHarness(t, hopt{})
	failed := false
	h.setBlock(func(typ string, payload any) error {
		if typ == state.CmdCompleteActivation.Name() && !failed {
			failed = true
			return errors.New("raft: timed out enqueuing operation")
		}
		return nil
	})
	w := h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	require.Equal(t, []string{string(codes.FinalizationIncomplete)}, h.requeueCodes("w-r1"))
	require.Equal(t, 2, w.Attempts)
	require.Equal(t, []string{"r1", "r1"}, h.d.CallsOf(memory.OpActivate), "recovery re-ran activation of the active revision")
	require.Equal(t, map[string]int{"r1": 1}, h.activations())
}

// TestRenewalFailureLapsesClaim: when renewals keep failing (no quorum), the
// local lapse timer cancels the driver call at the lease expiry, and the
// claim writes nothing more.
func TestRenewalFailureLapsesClaim(t *testing.T) {
	h := newHarness(t, hopt{})
	h.setBlock(func(typ string, payload any) error {
		if typ == state.CmdRenewClaim.Name() {
			return errors.New("raft: no quorum")
		}
		return nil
	})
	var mu sync.Mutex
	var cancelledAt time.Time
	first := true
	h.d.SetHook(memory.OpPrepare, func(ctx context.Context, id string) error {
		mu.Lock()
		if !first {
			mu.Unlock()
			return nil
		}
		first = false
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		cancelledAt = h.clk.Now()
		mu.Unlock()
		return ctx.Err()
	})
	h.deploy("r1", state.HarnessOpenClaw, nil, 0)
	h.drive(func() bool { mu.Lock(); defer mu.Unlock(); return !cancelledAt.IsZero() }, "claim lapsed")
	var claimedAt time.Time
	for _, p := range h.proposals() {
		if c, ok := p.payload.(state.ClaimWork); ok && c.WorkID == "w-r1" {
			// the lease runs from the time the engine computed its expiry,
			// which the fake clock may have passed before the proposal
			claimedAt = c.LeaseExpiry.Add(-DefaultLease)
			break // the first claim, not the engine's reclaim after the lapse
		}
	}
	mu.Lock()
	lapse := cancelledAt.Sub(claimedAt)
	mu.Unlock()
	require.GreaterOrEqual(t, lapse, DefaultLease)
	require.Less(t, lapse, DefaultLease+3*h.step)
	var renewals, claims int
	for _, p := range h.proposals() {
		if p.typ == state.CmdClaimWork.Name() {
			if claims++; claims == 2 {
				break // the engine's next claim, after the lapsed one
			}
		}
		require.NotContains(t, []string{state.CmdRequeueWork.Name(), state.CmdFailWork.Name(), state.CmdActivateRevision.Name()}, p.typ,
			"the lapsed claim wrote nothing")
		if p.typ == state.CmdRenewClaim.Name() {
			renewals++
		}
	}
	require.GreaterOrEqual(t, renewals, 2, "renewal was attempted every lease/3")
	h.setBlock(nil)
	w := h.waitWork("w-r1", state.WorkCompleted)
	require.Equal(t, 2, w.Attempts)
	require.Equal(t, map[string]int{"r1": 1}, h.activations())
}
