package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// repairing is the memory driver with drift repair: each pass returns the
// drift set for it (once) or err.
type repairing struct {
	*memory.Driver
	mu    sync.Mutex
	drift []compute.Repair
	err   error
	calls []string // the revisions repaired, in order
}

func (r *repairing) RepairRevision(_ context.Context, rev state.Revision) ([]compute.Repair, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, rev.ID)
	out := r.drift
	r.drift = nil
	return out, r.err
}

func (r *repairing) set(drift []compute.Repair, err error) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drift, r.err = drift, err
	return len(r.calls)
}

func (r *repairing) passes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// repairHarness is a harness whose engine runs over a repairing driver.
func repairHarness(t *testing.T) (*harness, *repairing) {
	h := newHarness(t, hopt{noStart: true})
	rd := &repairing{Driver: h.d}
	h.e = New(Config{Owner: "eng", Seed: 1, RepairInterval: time.Minute, RepairRetry: 5 * time.Second}, h.p, rd, h.clk, nil)
	h.start()
	return h, rd
}

func (h *harness) repairRecords() []state.AuditRecord {
	var out []state.AuditRecord
	for _, r := range h.m.Audit(0, 0) {
		if r.Action == state.AuditRepair {
			out = append(out, r)
		}
	}
	return out
}

// TestDriftRepairAudited: each object a repair changed is audited once, by
// the system, naming it; a foreign object is not audited; the Agent stays
// active on its revision, ready, with no new revision, activation or
// rollback; a later pass that finds nothing audits nothing, and a failing
// repair changes nothing.
func TestDriftRepairAudited(t *testing.T) {
	h, rd := repairHarness(t)
	h.enableRollback(time.Minute)
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready }, "r1 observed ready")
	before, _ := h.m.Agent("a1")

	n := rd.set([]compute.Repair{
		{Kind: "Deployment", Namespace: "oce-x", Name: "gateway-x", Action: compute.RepairRecreated},
		{Kind: "NetworkPolicy", Namespace: "oce-x", Name: "allow-x", Action: compute.RepairRestored},
		{Kind: "Service", Namespace: "oce-x", Name: "theirs", Action: compute.RepairForeign},
	}, nil)
	h.drive(func() bool { return rd.passes() > n && len(h.repairRecords()) == 2 }, "the repair audited")
	recs := h.repairRecords()
	for i, want := range []map[string]string{
		{"revisionId": "r1", "kind": "Deployment", "namespace": "oce-x", "name": "gateway-x", "action": compute.RepairRecreated},
		{"revisionId": "r1", "kind": "NetworkPolicy", "namespace": "oce-x", "name": "allow-x", "action": compute.RepairRestored},
	} {
		require.Equal(t, want, recs[i].Details)
		require.Equal(t, state.SystemRepairActor, recs[i].Actor)
		require.Equal(t, `Agent::"one/bot"`, recs[i].Resource)
		require.Equal(t, "a1", recs[i].AgentID)
		require.Equal(t, state.OutcomeSuccess, recs[i].Outcome)
	}

	// Later passes find nothing, or fail: nothing more is audited.
	n = rd.passes()
	h.drive(func() bool { return rd.passes() >= n+2 }, "two more passes")
	n = rd.set(nil, compute.Transient(codes.TransientDependency, errors.New("apiserver: too many requests")))
	h.drive(func() bool { return rd.passes() >= n+2 }, "two failing passes")
	require.Len(t, h.repairRecords(), 2, "each repaired object audited once")

	after, _ := h.m.Agent("a1")
	require.Equal(t, "r1", after.ActiveRevisionID)
	require.Equal(t, before.RevisionCount, after.RevisionCount, "a repair is no revision")
	rev, _ := h.m.Revision("r1")
	require.Equal(t, state.RevisionActive, rev.Status)
	hl, _ := h.m.Health("a1")
	require.True(t, hl.Ready, "a failing repair is no unhealth: %+v", hl)
	require.Equal(t, map[string]int{"r1": 1}, h.activations(), "no activation")
	require.Empty(t, h.audits(state.AuditRollback))
	require.Empty(t, h.audits(state.AuditDeploy)["r2"])
}

// TestDriftRepairWaitsForWork: an Agent with open work (a deploy under
// way) is not repaired: that work writes its objects.
func TestDriftRepairWaitsForWork(t *testing.T) {
	h, rd := repairHarness(t)
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready }, "r1 observed ready")
	h.d.SetHook(memory.OpPrepare, func(context.Context, string) error {
		return compute.Transient(codes.TransientDependency, errors.New("held for the test"))
	})
	h.deploy("r2", state.HarnessOpenClaw, nil, 0)
	h.drive(func() bool { return len(h.requeueCodes("w-r2")) > 0 }, "r2's work open and retried")
	n := rd.passes()
	start := h.clk.Now()
	h.drive(func() bool { return h.clk.Now().Sub(start) > 3*time.Minute }, "past several repair intervals")
	require.Equal(t, n, rd.passes(), "no repair while work is open")
}

// TestRepairSpacing: an Agent at rest is checked every interval (its first
// check spread); one not ready soon, then less often while its repairs
// find nothing, and soon again after one changed something.
func TestRepairSpacing(t *testing.T) {
	const interval, retry = time.Minute, 5 * time.Second
	r := newRepairs()
	now := t0
	require.False(t, r.due("a", now, false, interval, retry, 20*time.Second), "first seen: spread")
	require.True(t, r.due("a", now.Add(40*time.Second), false, interval, retry, 0))
	require.False(t, r.due("a", now.Add(99*time.Second), false, interval, retry, 0))
	require.True(t, r.due("a", now.Add(100*time.Second), false, interval, retry, 0))

	now = now.Add(100 * time.Second)
	for _, step := range []struct {
		wait    time.Duration
		changed bool
	}{{retry, false}, {2 * retry, false}, {4 * retry, false}, {8 * retry, true}, {retry, false}} {
		require.False(t, r.due("a", now.Add(step.wait-time.Millisecond), true, interval, retry, 0), step.wait)
		now = now.Add(step.wait)
		require.True(t, r.due("a", now, true, interval, retry, 0), step.wait)
		r.done("a", true, step.changed, interval, retry)
	}
	for range 10 {
		r.done("a", true, false, interval, retry)
	}
	require.Equal(t, interval, r.wait["a"], "never rarer than at rest")
	r.done("a", false, false, interval, retry)
	require.NotContains(t, r.wait, "a", "ready again: reset")
}

// TestDriftRepairNeverRevivesAStop: once an Agent's stop has ended, no
// repair pass runs for it — a new leader's driver remembers no stops, so
// only the replicated state may say what is stopped.
func TestDriftRepairNeverRevivesAStop(t *testing.T) {
	h, rd := repairHarness(t)
	h.waitWork(h.deploy("r1", state.HarnessOpenClaw, nil, 0), state.WorkCompleted)
	h.drive(func() bool { hl, ok := h.m.Health("a1"); return ok && hl.Ready }, "r1 observed ready")
	h.drive(func() bool { return rd.passes() > 0 }, "a repair pass at rest")
	h.propose(state.CmdRequestStop, state.RequestStop{AgentID: "a1", WorkID: "s1"})
	h.e.Notify()
	h.waitWork("s1", state.WorkCompleted)
	n := rd.passes()
	start := h.clk.Now()
	h.drive(func() bool { return h.clk.Now().Sub(start) > 3*time.Minute }, "past several repair intervals")
	require.Equal(t, n, rd.passes(), "a stopped Agent is never repaired")
}
