package engine

import (
	"context"
	"sync"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/coordinator/store"
)

// LocalProposer is an in-process Proposer without replication: it stamps the
// clock's time and applies to a Machine, one command at a time. It serves
// single-process tests and the in-process baseline benchmark.
type LocalProposer struct {
	mu    sync.Mutex
	m     *state.Machine
	clk   Clock
	actor string
	hook  func(typ string, payload any) error
	lead  error
	log   [][]byte
}

// Entries returns every entry this proposer applied, accepted or rejected, in
// order: replaying them into a fresh Machine must reproduce its Digest.
func (p *LocalProposer) Entries() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.log...)
}

// SetHook installs h to run before every proposal under the proposer's lock;
// an error from it rejects the proposal (tests inject failures with it).
func (p *LocalProposer) SetHook(h func(typ string, payload any) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

// SetLeaderErr makes VerifyLeader (and every later proposal) fail with err;
// nil restores leadership.
func (p *LocalProposer) SetLeaderErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lead = err
}

// NewLocalProposer returns a LocalProposer over m stamping entries with
// clk's time and actor (the context's, store.WithActor, when it has one).
func NewLocalProposer(m *state.Machine, clk Clock, actor string) *LocalProposer {
	return &LocalProposer{m: m, clk: clk, actor: actor}
}

// Propose implements Proposer.
func (p *LocalProposer) Propose(ctx context.Context, typ string, payload any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hook != nil {
		if err := p.hook(typ, payload); err != nil {
			return nil, err
		}
	}
	if p.lead != nil {
		return nil, p.lead
	}
	actor := p.actor
	if a := store.ActorFrom(ctx); a != "" {
		actor = a // as the Raft store stamps it
	}
	b, err := state.Encode(typ, p.clk.Now(), actor, payload)
	if err != nil {
		return nil, err
	}
	p.log = append(p.log, b)
	return p.m.ApplyBytes(b)
}

// VerifyLeader implements Proposer.
func (p *LocalProposer) VerifyLeader(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lead != nil {
		return p.lead
	}
	return ctx.Err()
}

// Machine implements Proposer.
func (p *LocalProposer) Machine() *state.Machine { return p.m }
