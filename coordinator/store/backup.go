package store

import (
	"context"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"oce.dev/oce/coordinator/state"
)

// SnapshotSave writes a consistent backup: the FSM's snapshot bytes (the
// same format Raft's snapshots use) at an index no older than every entry
// committed before the call. Leader only, so the backup is never stale.
func (s *Store) SnapshotSave(ctx context.Context, w io.Writer) error {
	if err := s.Barrier(ctx); err != nil {
		return err
	}
	p, err := s.fsm.capture()
	if err != nil {
		return fmt.Errorf("store: snapshot: %w", err)
	}
	if _, err := p.WriteTo(w); err != nil {
		return fmt.Errorf("store: write backup: %w", err)
	}
	return nil
}

// SnapshotRestore replaces the cluster's state with a backup written by
// SnapshotSave. The stream is validated completely (header and a trial
// restore into a scratch machine) before anything changes; an invalid one
// fails with ErrInvalidBackup and changes nothing. The current members' HTTP
// addresses replace the backup's, then hashicorp/raft's user restore
// (Raft.Restore) installs it on the leader and replicates it to followers by
// InstallSnapshot. Leader only; meant for disaster recovery, since entries
// the cluster committed after the backup are discarded.
func (s *Store) SnapshotRestore(ctx context.Context, r io.Reader) error {
	if s.raft.State() != raft.Leader {
		return s.notLeader(false)
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxBackupBytes+1))
	if err != nil {
		return fmt.Errorf("store: read backup: %w", err)
	}
	if len(b) > MaxBackupBytes {
		return fmt.Errorf("%w: larger than %d bytes", ErrInvalidBackup, MaxBackupBytes)
	}
	m, body, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	if err := state.NewMachine().RestoreSnapshot(body); err != nil {
		return fmt.Errorf("%w: state: %v", ErrInvalidBackup, err)
	}
	m.Nodes = s.fsm.nodesCopy()
	head, err := snapshotHeader(m)
	if err != nil {
		return fmt.Errorf("store: re-encode backup: %w", err)
	}
	p := partsSnapshot{head: head, body: body}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: m.Index, Size: p.Size()}
	if err := s.raft.Restore(meta, p.Reader(), applyTimeout(ctx)); err != nil {
		return s.raftErr(err, true)
	}
	s.log.Info("restored backup", "bytes", p.Size(), "backupIndex", m.Index)
	return nil
}
