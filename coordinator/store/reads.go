package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Read positions. Every API answer names the Raft index its state was
// served at (AppliedIndex); a read may ask for at least an index
// (WaitApplied) or for linearizability (ReadBarrier, leader only).

// AppliedIndex is the Raft index of the last entry applied to this member's
// state: two members at the same index hold the same state.
func (s *Store) AppliedIndex() uint64 {
	i, _ := s.fsm.applied()
	return i
}

// LastIndex is the last index in this member's Raft log (possibly not yet
// committed or applied).
func (s *Store) LastIndex() uint64 { return s.raft.LastIndex() }

// The state machine sees only command entries; a term's first (no-op)
// entry, barriers and configuration changes never reach it. AppliedIndex is
// therefore the index of the last command applied, and the state at index n
// is the state after the last command at or before n.

// waitPoll paces WaitApplied while the entries it waits for are not
// commands (their commit wakes nothing).
const waitPoll = 20 * time.Millisecond

// maxSettleScan bounds the entries settled inspects.
const maxSettleScan = 64

// WaitApplied waits until this member's state has applied every command up
// to index n, or ctx ends; it returns the applied index.
func (s *Store) WaitApplied(ctx context.Context, n uint64) (uint64, error) {
	for {
		i, moved := s.fsm.applied()
		if i >= n || s.settled(i, n) {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return i, ctx.Err()
		case <-moved:
		case <-time.After(waitPoll):
		}
	}
}

// settled reports whether the committed entries (i, n] hold no command, so
// the state at applied index i is the state at n.
func (s *Store) settled(i, n uint64) bool {
	if n > s.raft.CommitIndex() || n-i > maxSettleScan {
		return false
	}
	var l raft.Log
	for idx := i + 1; idx <= n; idx++ {
		if err := s.logs.GetLog(idx, &l); err != nil || l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// lastCommand finds the last command entry at or before index in the log
// (0 when there is none within maxSettleScan entries' worth of non-commands
// or the log was compacted into a snapshot the state restored at Open).
func (s *Store) lastCommand(last uint64) (uint64, uint64) {
	var l raft.Log
	for idx := last; idx > 0 && last-idx < maxSettleScan; idx-- {
		if err := s.logs.GetLog(idx, &l); err != nil {
			return 0, 0
		}
		if l.Type == raft.LogCommand {
			return l.Index, l.Term
		}
	}
	return 0, 0
}

// WaitIndexChange waits until the applied index passes n, or ctx ends, and
// returns the applied index (blocking queries).
func (s *Store) WaitIndexChange(ctx context.Context, n uint64) uint64 {
	i, _ := s.WaitApplied(ctx, n+1)
	return i
}

// LeaderCommit is the commit index of the cluster as this member knows it:
// its own on a leader that has committed an entry of its term, else the one
// the current term's leader announced within the last heartbeat timeout —
// once that figure is authoritative. ok is false when there is none.
//
// A new leader announces the commit index it had as a follower (zero right
// after its own restart) until the first entry of its term commits, so a
// follower trusts a figure only once the entry at that index is of the
// announcing leader's term (hashicorp/raft advances a leader's commit index
// only to entries of its own term); a follower that does not hold that
// entry yet is behind anyway.
func (s *Store) LeaderCommit() (uint64, bool) {
	term := s.raft.CurrentTerm()
	if s.raft.State() == raft.Leader {
		if s.leaderTerm.Load() != term {
			return 0, false
		}
		return s.raft.CommitIndex(), true
	}
	c, at, verified := s.watch.leaderCommit(term)
	if at.IsZero() || time.Since(at) > s.heartbeat || s.LeaderID() == "" {
		return 0, false
	}
	if !verified {
		var l raft.Log
		if err := s.logs.GetLog(c, &l); err != nil || l.Term != term {
			return 0, false
		}
		s.watch.verify(term)
	}
	return c, true
}

// Replaying reports whether this member is still applying the log it found
// on disk at start (hashicorp/raft restores the snapshot at once but applies
// the entries after it only as it learns their commit from a leader): its
// state is older than what it already acknowledged, so it must not serve
// reads — a lookup could answer "not found" for what exists. Replay ends
// when the last command on disk at start is applied, or everything the
// leader authoritatively reports committed is (an uncommitted tail of a
// crashed leader is replaced, never applied).
func (s *Store) Replaying() bool {
	if s.replayed.Load() {
		return false
	}
	applied := s.AppliedIndex()
	c, ok := s.LeaderCommit()
	if applied >= s.bootLast || (ok && applied >= c) {
		s.replayed.Store(true)
		return false
	}
	return true
}

// ReadBarrier makes the next read linearizable: on the leader it confirms
// leadership with a quorum and waits until the state has applied every entry
// committed before the call (the ReadIndex protocol; a leader that has not
// yet committed an entry of its own term first runs a Barrier). It returns
// the applied index; a follower gets a *NotLeaderError.
func (s *Store) ReadBarrier(ctx context.Context) (uint64, error) {
	if s.raft.State() != raft.Leader {
		return 0, s.notLeader(false)
	}
	if s.leaderTerm.Load() != s.raft.CurrentTerm() {
		if err := s.Barrier(ctx); err != nil {
			return 0, err
		}
	}
	readIndex := s.raft.CommitIndex()
	if err := s.VerifyLeader(ctx); err != nil {
		return 0, err
	}
	i, err := s.WaitApplied(ctx, readIndex)
	if err != nil {
		return i, fmt.Errorf("store: read barrier: %w", err)
	}
	return i, nil
}
