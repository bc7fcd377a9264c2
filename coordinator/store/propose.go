package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"oce.dev/oce/coordinator/state"
)

// Propose stamps the command with the leader's clock, the context's actor
// (WithActor) and idempotency stamp (state.WithIdempotency), replicates it through one Raft log entry and returns what
// state.Machine's Apply returned. On a follower it returns a *NotLeaderError
// without touching Raft; when leadership is lost after the hand-off the error
// also matches ErrOutcomeUnknown.
func (s *Store) Propose(ctx context.Context, typ string, payload any) (any, error) {
	s.stats.proposals.Add(1)
	if s.raft.State() != raft.Leader {
		s.stats.proposeFailures.Add(1)
		return nil, s.notLeader(false)
	}
	b, err := state.EncodeStamped(typ, s.clock(), ActorFrom(ctx), state.IdempotencyFrom(ctx), payload)
	if err != nil {
		return nil, fmt.Errorf("store: encode %s: %w", typ, err)
	}
	v, err := s.apply(ctx, b)
	if err != nil && (errors.Is(err, ErrNotLeader) || errors.Is(err, ErrOutcomeUnknown)) {
		s.stats.proposeFailures.Add(1)
	}
	return v, err
}

// apply replicates one raw entry and unwraps the FSM's result.
func (s *Store) apply(ctx context.Context, b []byte) (any, error) {
	f := s.raft.Apply(b, applyTimeout(ctx))
	if err := wait(ctx, f); err != nil {
		return nil, s.raftErr(err, true)
	}
	r, ok := f.Response().(applyResult)
	if !ok {
		return nil, fmt.Errorf("store: unexpected apply response %T", f.Response())
	}
	return r.val, r.err
}

// VerifyLeader confirms with a quorum that this node is still the leader;
// it returns a *NotLeaderError otherwise.
func (s *Store) VerifyLeader(ctx context.Context) error {
	if s.raft.State() != raft.Leader {
		return s.notLeader(false)
	}
	if err := wait(ctx, s.raft.VerifyLeader()); err != nil {
		return s.raftErr(err, false)
	}
	return nil
}

// Barrier waits until every entry committed before the call is applied to
// this (leader) node's FSM.
func (s *Store) Barrier(ctx context.Context) error {
	if s.raft.State() != raft.Leader {
		return s.notLeader(false)
	}
	if err := wait(ctx, s.raft.Barrier(applyTimeout(ctx))); err != nil {
		return s.raftErr(err, false)
	}
	return nil
}

// raftErr maps raft's leadership errors onto *NotLeaderError.
func (s *Store) raftErr(err error, handedOff bool) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return s.notLeader(false)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return s.notLeader(handedOff)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case handedOff && (errors.Is(err, raft.ErrEnqueueTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("store: raft: %w", err)
}

func applyTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if t := time.Until(d); t > 0 {
			return t
		}
		return time.Millisecond
	}
	return DefaultApplyTimeout
}

// wait waits for a raft future or the context, whichever ends first.
func wait(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
