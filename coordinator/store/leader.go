package store

import (
	"context"
	"encoding/json"
	"sync"
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
		if err := s.Barrier(ctx); err != nil {
			s.log.Warn("leader barrier failed", "error", err.Error())
			return
		}
		// Every entry of earlier terms is applied: this leader's commit
		// index is a valid read index from now on (ReadIndex).
		s.leaderTerm.Store(term)
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

// applyMeta replicates one node-metadata entry.
func (s *Store) applyMeta(ctx context.Context, op metaOp) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	_, err = s.apply(ctx, append([]byte{metaPrefix}, b...))
	return err
}
