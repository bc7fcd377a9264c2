package store

import (
	"errors"
	"fmt"

	"oce.dev/oce/coordinator/state"
)

// Sentinel errors callers branch on.
var (
	// ErrNotLeader: this node is not the Raft leader. The concrete error is a
	// *NotLeaderError naming the leader when one is known.
	ErrNotLeader = errors.New("store: not the leader")
	// ErrOutcomeUnknown: the entry was handed to Raft but its fate is unknown
	// (leadership lost, timeout, caller gave up); it may still commit.
	ErrOutcomeUnknown = errors.New("store: outcome unknown")
	// ErrInvalidBackup: a restore stream is not a backup this store wrote.
	// It wraps state.ErrInvalid, so the API answers 400 INVALID_REQUEST.
	ErrInvalidBackup = fmt.Errorf("store: INVALID_BACKUP: %w", state.ErrInvalid)
	// ErrInvalidMember: a join/remove/transfer request names no valid
	// member. It wraps state.ErrInvalid (400 INVALID_REQUEST).
	ErrInvalidMember = fmt.Errorf("store: INVALID_MEMBER: %w", state.ErrInvalid)
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
)

// NotLeaderError is returned by leader-only operations on a follower (or a
// deposed leader). LeaderHTTP is the leader's HTTP address, empty when no
// leader is known.
type NotLeaderError struct {
	LeaderID   string
	LeaderHTTP string
	// Unknown is true when the operation had already been handed to Raft, so
	// it may still commit (ErrOutcomeUnknown also matches).
	Unknown bool
}

// Error implements error.
func (e *NotLeaderError) Error() string {
	s := "store: not the leader"
	if e.LeaderHTTP != "" {
		s += fmt.Sprintf(" (leader %s at %s)", e.LeaderID, e.LeaderHTTP)
	} else if e.LeaderID != "" {
		s += fmt.Sprintf(" (leader %s)", e.LeaderID)
	}
	if e.Unknown {
		s += "; outcome unknown"
	}
	return s
}

// Is makes errors.Is(err, ErrNotLeader) (and ErrOutcomeUnknown when Unknown)
// hold.
func (e *NotLeaderError) Is(target error) bool {
	return target == ErrNotLeader || (e.Unknown && target == ErrOutcomeUnknown)
}

// LeaderHTTPAddr returns the leader's HTTP address ("" when unknown); the API
// uses it to answer NOT_LEADER.
func (e *NotLeaderError) LeaderHTTPAddr() string { return e.LeaderHTTP }
