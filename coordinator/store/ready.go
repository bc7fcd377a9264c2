package store

import (
	"context"
	"errors"
	"fmt"
)

// ReadyMaxLag is how many committed entries this node's state may trail the
// leader's commit index by and still report ready (and serve default reads).
const ReadyMaxLag = 1000

// ErrNotReady: the node cannot serve reads yet (no leader, replaying its
// log, or too far behind the leader).
var ErrNotReady = errors.New("store: not ready")

// Ready reports whether this node is a member of the cluster and Fresh: the
// /readyz rule.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.Fresh(); err != nil {
		return err
	}
	if _, ok, err := s.member(ctx, s.cfg.NodeID); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: not a member of the cluster yet", ErrNotReady)
	}
	return nil
}

// Fresh reports whether this node's state may serve a default read: a leader
// is known, the node is not replaying its log, and its state trails the
// leader's commit index — announced within the last heartbeat timeout — by
// at most ReadyMaxLag entries. A member cut off from the leader, restarting,
// or catching up is not fresh. It costs no Raft round trip.
func (s *Store) Fresh() error {
	if s.LeaderID() == "" {
		return fmt.Errorf("%w: no leader known", ErrNotReady)
	}
	applied := s.AppliedIndex()
	commit, ok := s.LeaderCommit()
	switch {
	case s.Replaying():
		return fmt.Errorf("%w: replaying the log: applied %d of %d entries on disk", ErrNotReady, applied, s.bootLast)
	case !ok:
		return fmt.Errorf("%w: no commit index from the leader within %s", ErrNotReady, s.heartbeat)
	case applied+ReadyMaxLag < commit:
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
