package state

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Audit bounds (issue 25): every record is size-bounded however its
// strings arrived, and the log is pruned through a replicated command, so
// the Raft log, the snapshots and every member's memory stay bounded.

// Bounds of one audit record's strings: longer values are cut (at a rune
// boundary) when the record is appended, never refused, so a record
// always lands.
const (
	MaxAuditAction   = 128
	MaxAuditResource = 512
	MaxAuditDetails  = 8
	MaxAuditKey      = 64
	MaxAuditValue    = 512
)

// AuditPrune is the audit action of a prune.
const AuditPrune = "oce.audit.prune"

// PruneAudit drops every audit record with Seq <= ThroughSeq. The leader
// chooses ThroughSeq from its retention settings (AuditPruneThrough) and
// exports the records first; every member drops exactly the same ones.
type PruneAudit struct {
	ThroughSeq int64 `json:"throughSeq"`
	// Export names where the leader exported the records (a file name,
	// recorded in the prune's own record); empty when not exported.
	Export string `json:"export,omitempty"`
}

// AuditPruned is the result of a prune.
type AuditPruned struct {
	Records    int   `json:"records"`
	ThroughSeq int64 `json:"throughSeq"`
}

func applyPruneAudit(d *data, c Command, p PruneAudit) (AuditPruned, error) {
	if p.ThroughSeq <= 0 || p.ThroughSeq > d.auditSeq {
		return AuditPruned{}, fmt.Errorf("%w: throughSeq must name an appended record (1..%d)", ErrInvalid, d.auditSeq)
	}
	i, _ := slices.BinarySearchFunc(d.audit, p.ThroughSeq+1, func(r AuditRecord, s int64) int { return cmp.Compare(r.Seq, s) })
	// A fresh slice: the pruned records' memory is released.
	d.audit = slices.Clone(d.audit[i:])
	if len(d.audit) == 0 {
		d.audit = nil
	}
	res := AuditPruned{Records: i, ThroughSeq: p.ThroughSeq}
	details := map[string]string{"records": strconv.Itoa(i), "throughSeq": strconv.FormatInt(p.ThroughSeq, 10)}
	if p.Export != "" {
		details["export"] = cut(p.Export, MaxAuditValue)
	}
	d.audit3(c, AuditPrune, ClusterResource, "", "", details)
	return res, nil
}

// AuditPruneThrough returns the Seq through which the audit log must be
// pruned to keep no record older than before (zero time: no age limit) and
// at most keep records (<= 0: no count limit); 0 when nothing is due.
func (m *Machine) AuditPruneThrough(before time.Time, keep int) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var through int64
	if !before.IsZero() {
		// Records are appended in time order (entries carry the leader's
		// clock): the first one not older than before ends the run.
		i, _ := slices.BinarySearchFunc(m.d.audit, before, func(r AuditRecord, t time.Time) int {
			if r.Time.Before(t) {
				return -1
			}
			return 1
		})
		if i > 0 {
			through = m.d.audit[i-1].Seq
		}
	}
	if keep > 0 && len(m.d.audit) > keep {
		through = max(through, m.d.audit[len(m.d.audit)-keep-1].Seq)
	}
	return through
}

// AuditStats reports the audit log's length and its first and last Seq.
func (m *Machine) AuditStats() (records int, first, last int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if n := len(m.d.audit); n > 0 {
		return n, m.d.audit[0].Seq, m.d.audit[n-1].Seq
	}
	return 0, 0, 0
}

// boundAudit cuts a record's strings to the audit bounds.
func boundAudit(r AuditRecord) AuditRecord {
	r.Action = cut(r.Action, MaxAuditAction)
	r.Resource = cut(r.Resource, MaxAuditResource)
	if len(r.Details) == 0 {
		return r
	}
	out := make(map[string]string, min(len(r.Details), MaxAuditDetails))
	keys := make([]string, 0, len(r.Details))
	for k := range r.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys[:min(len(keys), MaxAuditDetails)] {
		out[cut(k, MaxAuditKey)] = cut(r.Details[k], MaxAuditValue)
	}
	r.Details = out
	return r
}

// cut returns s cut to at most n bytes at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
