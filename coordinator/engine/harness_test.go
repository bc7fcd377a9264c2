package engine

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// proposal is one proposal the harness saw (accepted or not).
type proposal struct {
	typ     string
	payload any
	at      time.Time
}

// harness runs an Engine against a Machine through a LocalProposer on a fake
// clock, with the memory driver; no Raft.
type harness struct {
	t    *testing.T
	clk  *FakeClock
	m    *state.Machine
	p    *LocalProposer
	d    *memory.Driver
	e    *Engine
	step time.Duration

	mu    sync.Mutex
	props []proposal
	block func(typ string, payload any) error

	cancel context.CancelFunc
	done   chan error
}

type hopt struct {
	mode, harness string
	caps          *compute.Capabilities
	cfg           Config
	noStart       bool
}

func newHarness(t *testing.T, o hopt) *harness {
	if o.mode == "" {
		o.mode = state.ModeEmbedded
	}
	if o.harness == "" {
		o.harness = state.HarnessOpenClaw
	}
	caps := memory.DefaultCapabilities()
	if o.caps != nil {
		caps = *o.caps
	}
	h := &harness{t: t, clk: NewFakeClock(t0), m: state.NewMachine(), d: memory.New(caps), step: 100 * time.Millisecond}
	h.p = NewLocalProposer(h.m, h.clk, "alice")
	h.p.SetHook(func(typ string, payload any) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.props = append(h.props, proposal{typ: typ, payload: payload, at: h.clk.Now()})
		if h.block != nil {
			return h.block(typ, payload)
		}
		return nil
	})
	h.propose(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns1", Name: "one"})
	h.propose(state.CmdPutConfiguration, state.PutConfiguration{ID: "c1", NamespaceID: "ns1", Name: "cfg", Document: json.RawMessage(`{}`)})
	h.propose(state.CmdCreateAgent, state.CreateAgent{ID: "a1", NamespaceID: "ns1", Name: "bot", ConfigurationID: "c1",
		ExecutionMode: o.mode, ComputeID: memory.Name})
	o.cfg.Owner = "eng"
	o.cfg.Seed = 1
	h.e = New(o.cfg, h.p, h.d, h.clk, nil)
	if !o.noStart {
		h.start()
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.e.Run(ctx) }()
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		require.ErrorIs(h.t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		h.t.Fatal("engine did not stop")
	}
	h.cancel = nil
}

func (h *harness) propose(typ state.Named, p any) any {
	h.t.Helper()
	res, err := h.p.Propose(context.Background(), typ.Name(), p)
	require.NoError(h.t, err, typ)
	return res
}

// setBlock installs a proposal filter (nil removes it).
func (h *harness) setBlock(f func(typ string, payload any) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.block = f
}

func (h *harness) proposals() []proposal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]proposal(nil), h.props...)
}

// requeueCodes lists the codes of every RequeueWork proposed for workID.
func (h *harness) requeueCodes(workID string) []string {
	var out []string
	for _, p := range h.proposals() {
		if r, ok := p.payload.(state.RequeueWork); ok && r.WorkID == workID {
			out = append(out, r.Code)
		}
	}
	return out
}

// phases lists the phases proposed for workID, in order.
func (h *harness) phases(workID string) []string {
	var out []string
	for _, p := range h.proposals() {
		if r, ok := p.payload.(state.SetWorkPhase); ok && r.WorkID == workID {
			out = append(out, r.Phase)
		}
	}
	return out
}

// deploy admits a revision of a1 with its activate work w-<revID>.
func (h *harness) deploy(revID, harnessID string, auth *state.HarnessAuth, maxAttempts int) string {
	h.t.Helper()
	a, _ := h.m.Agent("a1")
	cf, _ := h.m.Configuration(a.ConfigurationID)
	r := state.Revision{ID: revID, AgentID: "a1", NamespaceID: "ns1", Document: cf.Document,
		ConfigurationID: cf.ID, ConfigurationGeneration: cf.Generation,
		Harness: state.HarnessIdentity{ID: harnessID, Version: "pinned"}, Mode: a.ExecutionMode,
		ComputeID: memory.Name, HarnessAuth: auth}
	h.propose(state.CmdAdmitRevision, state.AdmitRevision{Revision: r, WorkID: "w-" + revID, MaxAttempts: maxAttempts})
	h.e.Notify()
	return "w-" + revID
}

// drive advances the fake clock step by step until cond holds.
func (h *harness) drive(cond func() bool, msg string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		if cond() {
			return true
		}
		h.clk.Advance(h.step)
		return false
	}, 30*time.Second, time.Millisecond, msg)
}

// settled reports whether the engine has nothing to do at the fake clock's
// current time: no claim in flight and no work claimable now. Work that is
// claimable with no claim in flight gets a Notify (what admission sends):
// a run loop that read the clock just before an Advance armed its timer
// from the advanced time, later than the work came due.
func (h *harness) settled() bool {
	h.e.busyMu.Lock()
	busy := len(h.e.busy)
	h.e.busyMu.Unlock()
	if busy > 0 {
		return false
	}
	if len(h.m.ClaimableN(h.clk.Now(), 1)) > 0 {
		h.e.Notify()
		return false
	}
	return true
}

// driveSettled is drive for schedules measured in fake time: the clock
// moves only while the engine is settled, so a pass runs at the time it
// came due however slowly the machine schedules the engine (a clock racing
// ahead of a busy engine lapses leases and stretches every interval), and
// it returns once cond holds with the pass that made it true finished.
func (h *harness) driveSettled(cond func() bool, msg string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		if !h.settled() {
			return false
		}
		if cond() {
			return true
		}
		h.clk.Advance(h.step)
		return false
	}, 30*time.Second, time.Millisecond, msg)
}

// waitWork drives until workID reaches one of the final states.
func (h *harness) waitWork(workID string, want string) state.Work {
	h.t.Helper()
	h.drive(func() bool {
		w, ok := h.m.Work(workID)
		return ok && (w.State == want)
	}, "work "+workID+" → "+want)
	w, _ := h.m.Work(workID)
	return w
}

// activations counts the activate audit records per revision.
func (h *harness) activations() map[string]int {
	out := map[string]int{}
	for _, a := range h.m.Audit(0, 0) {
		if a.Action == state.AuditActivate {
			out[a.RevisionID]++
		}
	}
	return out
}

// requireReplayable checks the state is a pure function of the entries.
func (h *harness) requireReplayable() {
	h.t.Helper()
	h.stop()
	m := state.NewMachine()
	for _, e := range h.p.Entries() {
		_, _ = m.ApplyBytes(e)
	}
	require.Equal(h.t, h.m.Digest(), m.Digest(), "replaying the log reproduces the state")
}
