package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/coordinator/store"
	"oce.dev/oce/shared/atomicfile"
)

// Audit retention (issue 25; docs/OPERATIONS.md "Audit retention"): the
// leader prunes the audit log to its age and count limits through the
// replicated PruneAudit command, so every member drops the same records
// and the Raft log, the snapshots and every member's memory stay bounded.
// Before a prune the leader exports the records it drops, as JSON lines, to
// the export directory; a prune whose export fails is not proposed.

// AuditRetention configures the pruning. Zero fields take the defaults.
type AuditRetention struct {
	// MaxAge drops records older than this; negative keeps records of any
	// age.
	MaxAge time.Duration
	// MaxRecords keeps at most this many records (beyond it the oldest
	// are pruned down to 90 % of it); negative keeps any number.
	MaxRecords int
	// ExportDir receives the pruned records (audit-<first>-<last>.jsonl,
	// mode 0600); default <DataDir>/audit-export. "-" prunes without
	// exporting.
	ExportDir string
	// Every is how often the leader checks the limits.
	Every time.Duration
}

// Defaults of AuditRetention.
const (
	DefaultAuditMaxAge     = 90 * 24 * time.Hour
	DefaultAuditMaxRecords = 100_000
	DefaultAuditCheck      = time.Minute
	auditExportDirName     = "audit-export"
	// NoAuditExport as the export directory prunes without exporting.
	NoAuditExport = "-"
	// retentionActor is the actor of the prune entries.
	retentionActor = "system:audit-retention"
	// pruneTimeout bounds one export and proposal.
	pruneTimeout = 30 * time.Second
)

func (r AuditRetention) withDefaults(dataDir string) AuditRetention {
	if r.MaxAge == 0 {
		r.MaxAge = DefaultAuditMaxAge
	}
	if r.MaxRecords == 0 {
		r.MaxRecords = DefaultAuditMaxRecords
	}
	if r.ExportDir == "" {
		r.ExportDir = filepath.Join(dataDir, auditExportDirName)
	}
	if r.Every <= 0 {
		r.Every = DefaultAuditCheck
	}
	return r
}

// retainAudit prunes the audit log while this node leads (ctx ends with
// the leadership).
func retainAudit(ctx context.Context, r AuditRetention, st *store.Store, clock func() time.Time, log *slog.Logger) {
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		if err := pruneAuditOnce(ctx, r, st, clock); err != nil && ctx.Err() == nil {
			log.Error("audit retention: prune failed; the records are kept", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneAuditOnce exports and prunes what the limits make due, if
// anything. Over the count limit it prunes down to 90 % of it: the prune's
// own record must not make the next check due (one entry a check, forever).
func pruneAuditOnce(ctx context.Context, r AuditRetention, st *store.Store, clock func() time.Time) error {
	var before time.Time
	if r.MaxAge > 0 {
		before = clock().Add(-r.MaxAge)
	}
	m := st.Machine()
	keep := 0
	if n, _, _ := m.AuditStats(); r.MaxRecords > 0 && n > r.MaxRecords {
		keep = r.MaxRecords - max(1, r.MaxRecords/10)
	}
	through := m.AuditPruneThrough(before, keep)
	if through == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pruneTimeout)
	defer cancel()
	export := ""
	if r.ExportDir != NoAuditExport {
		_, first, _ := m.AuditStats() // Seqs are consecutive from first
		name, err := exportAudit(r.ExportDir, m.Audit(first-1, int(through-first+1)), through)
		if err != nil {
			return err
		}
		export = name
	}
	_, err := state.Propose(store.WithActor(ctx, retentionActor), st, state.CmdPruneAudit,
		state.PruneAudit{ThroughSeq: through, Export: export})
	return err
}

// exportAudit writes the records with Seq <= through as JSON lines to a
// new file in dir and returns its name ("" when there is none to write).
func exportAudit(dir string, recs []state.AuditRecord, through int64) (string, error) {
	n := 0
	for n < len(recs) && recs[n].Seq <= through {
		n++
	}
	if n == 0 {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("audit export: %w", err)
	}
	name := fmt.Sprintf("audit-%d-%d.jsonl", recs[0].Seq, recs[n-1].Seq)
	err := atomicfile.WriteFrom(filepath.Join(dir, name), 0o600, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, rec := range recs[:n] {
			if err := enc.Encode(rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("audit export: %w", err)
	}
	return name, nil
}
