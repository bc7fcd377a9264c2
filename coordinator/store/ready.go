package store

import (
	"context"
	"errors"
	"fmt"
)

// ReadyMaxLag is how many committed entries this node's state may trail by
// and still report ready.
const ReadyMaxLag = 1000

// ErrNotReady: the node cannot serve consistent reads yet.
var ErrNotReady = errors.New("store: not ready")

// Ready reports whether this node knows a leader, is a member of the
// cluster, and has applied (nearly) everything it knows to be committed.
func (s *Store) Ready(ctx context.Context) error {
	if s.LeaderID() == "" {
		return fmt.Errorf("%w: no leader known", ErrNotReady)
	}
	if _, ok, err := s.member(ctx, s.cfg.NodeID); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: not a member of the cluster yet", ErrNotReady)
	}
	if applied, commit := s.raft.AppliedIndex(), s.raft.CommitIndex(); applied+ReadyMaxLag < commit {
		return fmt.Errorf("%w: applied %d of %d committed entries", ErrNotReady, applied, commit)
	}
	return nil
}

// IsMember reports whether this node is in the cluster's configuration (a
// node started with --join is not until the leader adds it).
func (s *Store) IsMember(ctx context.Context) (bool, error) {
	_, ok, err := s.member(ctx, s.cfg.NodeID)
	return ok, err
}
