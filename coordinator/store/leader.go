package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"oce.dev/oce/shared/backoff"
)

// observeLeadership runs cfg.OnLeader for as long as this node leads.
func (s *Store) observeLeadership(ctx context.Context) {
	defer s.observing.Done()
	var stop func()
	for {
		select {
		case <-ctx.Done():
			if stop != nil {
				stop()
			}
			return
		case leader := <-s.raft.LeaderCh():
			// Two trues in a row mean leadership was lost and regained
			// meanwhile: restart the leader's work from a fresh barrier.
			if stop != nil {
				stop()
				stop = nil
				s.log.Info("leadership lost", "term", s.raft.CurrentTerm())
			}
			if leader {
				s.log.Info("leadership acquired", "term", s.raft.CurrentTerm())
				stop = s.lead(ctx)
			}
		}
	}
}

// lead starts the leader's work and returns a function that stops it and
// waits for it to end.
func (s *Store) lead(parent context.Context) func() {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The FSM must hold every committed entry before the leader acts on it.
		term := s.raft.CurrentTerm()
		if !s.leaderBarrier(ctx) {
			return
		}
		// Every entry of earlier terms is applied: this leader's commit
		// index is a valid read index from now on (ReadIndex).
		s.setLeaderTerm(term)
		if s.fsm.httpAddr(s.cfg.NodeID) != s.cfg.HTTPAddr {
			if err := s.applyMeta(ctx, metaOp{Op: "set", ID: s.cfg.NodeID, HTTPAddr: s.cfg.HTTPAddr}); err != nil {
				s.log.Warn("recording own HTTP address failed", "error", err.Error())
			}
		}
		if s.cfg.OnLeader != nil {
			s.stats.leaderships.Add(1)
			s.cfg.OnLeader(ctx, s)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// barrierRetry paces a leader's barrier that failed while it still leads
// (its apply queue full): until one passes it executes no write.
var barrierRetry = backoff.Policy{Base: 50 * time.Millisecond, Max: 2 * time.Second}

// leaderBarrier runs the barrier of a new term until it passes (true) or
// this node stops leading (false).
func (s *Store) leaderBarrier(ctx context.Context) bool {
	delays := backoff.Sequence{Policy: barrierRetry}
	for {
		err := s.Barrier(ctx)
		if err == nil {
			return true
		}
		s.log.Warn("leader barrier failed", "error", err.Error())
		if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delays.Next()):
		}
	}
}

// applyMeta replicates one node-metadata entry.
func (s *Store) applyMeta(ctx context.Context, op metaOp) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	_, err = s.apply(ctx, append([]byte{metaPrefix}, b...))
	return err
}

// setLeaderTerm records that this node's barrier for term completed and
// wakes WaitLeading.
func (s *Store) setLeaderTerm(term uint64) {
	s.leaderTerm.Store(term)
	s.ledMu.Lock()
	if s.led != nil {
		close(s.led)
	}
	s.led = make(chan struct{})
	s.ledMu.Unlock()
}

func (s *Store) ledChanged() <-chan struct{} {
	s.ledMu.Lock()
	defer s.ledMu.Unlock()
	if s.led == nil {
		s.led = make(chan struct{})
	}
	return s.led
}

// WaitLeading waits until this leader has applied every entry committed in
// earlier terms (its term's barrier completed), or ctx ends. Until then its
// state may lack what the previous leader committed and acknowledged — a
// write decided on it could answer "not found" for what exists, or pass a
// check the cluster's state fails. A follower gets a *NotLeaderError.
func (s *Store) WaitLeading(ctx context.Context) error {
	for {
		if s.raft.State() != raft.Leader {
			return s.notLeader(false)
		}
		if s.leaderTerm.Load() == s.raft.CurrentTerm() {
			return nil // the path of every write: no lock taken
		}
		changed := s.ledChanged()
		if s.leaderTerm.Load() == s.raft.CurrentTerm() {
			return nil // it completed before the wait began
		}
		// A lost leadership wakes nothing here: poll for it.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(waitPoll):
		}
	}
}
