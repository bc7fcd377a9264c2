package store

import "sync/atomic"

type stats struct {
	proposals       atomic.Uint64
	proposeFailures atomic.Uint64
	leaderships     atomic.Uint64
}

// Stats are the store's counters since Open.
type Stats struct {
	// Proposals counts Propose calls.
	Proposals uint64
	// ProposeFailures counts proposals that failed for want of leadership
	// (not the leader, leadership lost, outcome unknown).
	ProposeFailures uint64
	// Leaderships counts the terms this node started leader work in.
	Leaderships uint64
	// AppliedIndex and CommitIndex are Raft's.
	AppliedIndex uint64
	CommitIndex  uint64
	Term         uint64
	Leader       bool
}

// Stats returns the store's counters and Raft position.
func (s *Store) Stats() Stats {
	return Stats{
		Proposals:       s.stats.proposals.Load(),
		ProposeFailures: s.stats.proposeFailures.Load(),
		Leaderships:     s.stats.leaderships.Load(),
		AppliedIndex:    s.raft.AppliedIndex(),
		CommitIndex:     s.raft.CommitIndex(),
		Term:            s.raft.CurrentTerm(),
		Leader:          s.IsLeader(),
	}
}
