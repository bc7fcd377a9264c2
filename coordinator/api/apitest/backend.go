// Package apitest provides an in-process api.Backend over a real
// state.Machine for tests of the API, its client and occ: proposals are
// stamped with a clock and applied directly, as a single-node leader would.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/state"
)

type actorKey struct{}

// WithActor is api.Config.WithActor for this Backend: proposals carry the
// actor as the Raft store's do ("test" without one).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// NotLeaderError is what a follower Backend's Propose returns.
type NotLeaderError struct{ Leader string }

func (e *NotLeaderError) Error() string { return "apitest: not the leader (leader " + e.Leader + ")" }

// LeaderHTTPAddr implements api.NotLeader.
func (e *NotLeaderError) LeaderHTTPAddr() string { return e.Leader }

// Member is one fake cluster member.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
}

// Backend is a fake single-node store.
type Backend struct {
	M *state.Machine

	mu       sync.Mutex
	follower bool
	leader   string // leader HTTP address when follower
	now      func() time.Time
	members  []Member
	driver   compute.Driver
	engine   *engine.Engine // the one RunEngine started
	// Proposals counts Propose calls that reached the machine.
	proposals int
	// ProposeHook, when set, runs before each proposal is applied and may
	// fail it (e.g. to simulate losing leadership).
	ProposeHook func(typ string) error
	// ContextHook, when set, sees each proposal's context (actor checks).
	ContextHook func(ctx context.Context)
	// EntryHook, when set, sees each encoded log entry before it is
	// applied: the bytes a Raft log would store and replicate.
	EntryHook func(entry []byte)
}

// New returns a leader Backend over a fresh Machine with the in-memory
// compute driver.
func New() *Backend {
	return &Backend{M: state.NewMachine(), now: time.Now, driver: memory.New(memory.DefaultCapabilities()),
		members: []Member{{ID: "node-1", RaftAddr: "127.0.0.1:7401", HTTPAddr: "127.0.0.1:7400"}}}
}

// SetFollower makes the Backend a follower of the leader at addr ("" means
// no known leader).
func (b *Backend) SetFollower(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.follower, b.leader = true, addr
}

// SetDriver sets what Driver returns.
func (b *Backend) SetDriver(d compute.Driver) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.driver = d
}

// Proposals returns how many proposals were applied or refused by the machine.
func (b *Backend) Proposals() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proposals
}

// Propose stamps and applies one command, as the Raft leader would.
func (b *Backend) Propose(ctx context.Context, typ string, payload any) (any, error) {
	b.mu.Lock()
	follower, leader, hook, ctxHook := b.follower, b.leader, b.ProposeHook, b.ContextHook
	b.mu.Unlock()
	if ctxHook != nil {
		ctxHook(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if follower {
		return nil, &NotLeaderError{Leader: leader}
	}
	if hook != nil {
		if err := hook(typ); err != nil {
			return nil, err
		}
	}
	actor := "test"
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		actor = a
	}
	entry, err := state.EncodeStamped(typ, b.now(), actor, state.IdempotencyFrom(ctx), payload)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.proposals++
	entryHook := b.EntryHook
	b.mu.Unlock()
	if entryHook != nil {
		entryHook(entry)
	}
	return b.M.ApplyBytes(entry)
}

// Apply is Propose for test setup: it fails the test's expectations loudly
// by returning the error.
func (b *Backend) Apply(cmd state.Named, payload any) (any, error) {
	return b.Propose(context.Background(), cmd.Name(), payload)
}

// Machine returns the state machine.
func (b *Backend) Machine() *state.Machine { return b.M }

// VerifyLeader fails on a follower.
func (b *Backend) VerifyLeader(context.Context) error {
	if !b.IsLeader() {
		return &NotLeaderError{Leader: b.LeaderHTTPAddr()}
	}
	return nil
}

// IsLeader reports leadership.
func (b *Backend) IsLeader() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.follower
}

// LeaderHTTPAddr is the leader's HTTP address (empty on the leader itself
// in this fake, which is enough for the API).
func (b *Backend) LeaderHTTPAddr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leader
}

// Cluster describes the fake cluster in the API's own shape.
func (b *Backend) Cluster(context.Context) (any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := "Leader"
	if b.follower {
		st = "Follower"
	}
	out := wire.Cluster{NodeID: "node-1", State: st, LeaderHTTP: b.leader, LastApplied: b.M.Applied(),
		Digest: b.M.Digest(), Members: []wire.Member{}}
	for _, m := range b.members {
		out.Members = append(out.Members, wire.Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr,
			Suffrage: "voter", Leader: !b.follower && m.ID == "node-1"})
	}
	return out, nil
}

// ErrInvalidMember is returned for unknown or duplicate members.
var ErrInvalidMember = errors.New("apitest: INVALID_MEMBER")

// Join adds a member.
func (b *Backend) Join(_ context.Context, id, raftAddr, httpAddr string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.members {
		if m.ID == id {
			return fmt.Errorf("%w: %s is a member", ErrInvalidMember, id)
		}
	}
	b.members = append(b.members, Member{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr})
	return nil
}

// Remove removes a member.
func (b *Backend) Remove(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, m := range b.members {
		if m.ID == id {
			b.members = append(b.members[:i], b.members[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not a member", ErrInvalidMember, id)
}

// TransferLeadership accepts any member id (or empty).
func (b *Backend) TransferLeadership(_ context.Context, id string) error {
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.members {
		if m.ID == id {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not a member", ErrInvalidMember, id)
}

// SnapshotSave writes the machine's snapshot.
func (b *Backend) SnapshotSave(_ context.Context, w io.Writer) error {
	data, err := b.M.MarshalSnapshot()
	if err != nil {
		return err
	}
	_, err = io.Copy(w, bytes.NewReader(data))
	return err
}

// SnapshotRestore replaces the machine's state.
func (b *Backend) SnapshotRestore(_ context.Context, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return b.M.RestoreSnapshot(data)
}

// Driver returns what SetDriver set.
func (b *Backend) Driver() compute.Driver {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.driver
}

// RunEngine runs the activation engine over the Backend's machine and
// driver until ctx ends, so deploys and stops complete as on a leader.
func (b *Backend) RunEngine(ctx context.Context) {
	e := engine.New(engine.Config{Owner: "apitest", PollInterval: 5 * time.Millisecond, ReadinessMin: 2 * time.Millisecond,
		ReadinessMax: 20 * time.Millisecond, BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		HealthInterval: 10 * time.Millisecond},
		engine.NewLocalProposer(b.M, engine.RealClock{}, "engine"), b.Driver(), engine.RealClock{}, nil)
	b.mu.Lock()
	b.engine = e
	b.mu.Unlock()
	go func() { _ = e.Run(ctx) }()
}

// WaitQuiescent waits until the engine RunEngine started writes nothing
// more until a request or a changed observation moves the state
// (engine.Quiescent): a test reaches it before it compares whole-state
// digests. Without an engine nothing writes in the background.
func (b *Backend) WaitQuiescent(ctx context.Context) error {
	b.mu.Lock()
	e := b.engine
	b.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.WaitQuiescent(ctx)
}

// Read positions (api.Positions): the fake's index counts the machine's
// applies, and it is always fresh and linearizable.

// AppliedIndex is the machine's apply count.
func (b *Backend) AppliedIndex() uint64 { return b.M.Applied() }

// LastIndex equals AppliedIndex: nothing is in flight.
func (b *Backend) LastIndex() uint64 { return b.M.Applied() }

// LeaderCommit equals AppliedIndex.
func (b *Backend) LeaderCommit() (uint64, bool) { return b.M.Applied(), true }

// WaitApplied waits for the machine to reach n applies.
func (b *Backend) WaitApplied(ctx context.Context, n uint64) (uint64, error) {
	for {
		ch := b.M.Changed()
		if i := b.M.Applied(); i >= n {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return b.M.Applied(), ctx.Err()
		case <-ch:
		}
	}
}

// WaitIndexChange waits for an apply past n.
func (b *Backend) WaitIndexChange(ctx context.Context, n uint64) uint64 {
	i, _ := b.WaitApplied(ctx, n+1)
	return i
}

// ReadBarrier fails on a follower.
func (b *Backend) ReadBarrier(ctx context.Context) (uint64, error) {
	if err := b.VerifyLeader(ctx); err != nil {
		return 0, err
	}
	return b.M.Applied(), nil
}

// WaitLeading fails on a follower; this fake's leader is current at once.
func (b *Backend) WaitLeading(ctx context.Context) error { return b.VerifyLeader(ctx) }

// Fresh is always nil.
func (b *Backend) Fresh() error { return nil }
