package state

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// snapshotVersion is bumped when the snapshot layout changes incompatibly.
const snapshotVersion = 1

// snapshot is the canonical encoding of data: every collection is a slice
// sorted by ID, so equal states marshal to equal bytes.
type snapshot struct {
	Version          int                 `json:"version"`
	Namespaces       []Namespace         `json:"namespaces"`
	Configurations   []Configuration     `json:"configurations"`
	Agents           []Agent             `json:"agents"`
	Revisions        []Revision          `json:"revisions"`
	Work             []Work              `json:"work"`
	PredecessorStops [][]PredecessorStop `json:"predecessorStops"` // per Agent (sorted by Agent ID), oldest first
	Audit            []AuditRecord       `json:"audit"`
	AuditSeq         int64               `json:"auditSeq"`
	Installation     Installation        `json:"installation"`
}

func byID[T any](m map[string]T, id func(T) string) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(id(a), id(b)) })
	return out
}

// MarshalSnapshot returns the canonical, deterministic bytes of the state.
func (m *Machine) MarshalSnapshot() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.d.marshal()
}

func (d *data) marshal() ([]byte, error) {
	s := snapshot{
		Version:          snapshotVersion,
		Namespaces:       byID(d.namespaces, func(v Namespace) string { return v.ID }),
		Configurations:   byID(d.configurations, func(v Configuration) string { return v.ID }),
		Agents:           byID(d.agents, func(v Agent) string { return v.ID }),
		Revisions:        byID(d.revisions, func(v Revision) string { return v.ID }),
		Work:             byID(d.work, func(v Work) string { return v.ID }),
		PredecessorStops: byID(d.stops, func(v []PredecessorStop) string { return v[0].AgentID }),
		Audit:            d.audit,
		AuditSeq:         d.auditSeq,
		Installation:     d.installation,
	}
	if s.Audit == nil {
		s.Audit = []AuditRecord{}
	}
	return json.Marshal(s)
}

// RestoreSnapshot replaces the state with a snapshot from MarshalSnapshot.
// On error the state is unchanged.
func (m *Machine) RestoreSnapshot(b []byte) error {
	var s snapshot
	if err := decodeStrict(b, &s); err != nil {
		return fmt.Errorf("%w: snapshot: %w", ErrInvalid, err)
	}
	if s.Version != snapshotVersion {
		return fmt.Errorf("%w: snapshot version %d", ErrInvalid, s.Version)
	}
	d := newData()
	for _, v := range s.Namespaces {
		d.namespaces[v.ID] = v
	}
	for _, v := range s.Configurations {
		d.configurations[v.ID] = v
	}
	for _, v := range s.Agents {
		d.agents[v.ID] = v
	}
	slices.SortFunc(s.Revisions, func(a, b Revision) int { return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.ID, b.ID)) })
	for _, v := range s.Revisions {
		d.addRevision(v)
	}
	for _, v := range s.Work {
		d.putWork(v)
	}
	for _, list := range s.PredecessorStops {
		if len(list) == 0 {
			return fmt.Errorf("%w: snapshot has an empty predecessor-stop list", ErrInvalid)
		}
		d.stops[list[0].AgentID] = list
	}
	d.audit = s.Audit
	if len(d.audit) == 0 {
		d.audit = nil
	}
	d.auditSeq = s.AuditSeq
	d.installation = s.Installation
	m.mu.Lock()
	defer m.mu.Unlock()
	m.d = d
	m.bump()
	return nil
}

// Digest is the hex SHA-256 of MarshalSnapshot, for identical-state checks
// across replicas and in tests.
func (m *Machine) Digest() string {
	b, err := m.MarshalSnapshot()
	if err != nil {
		// Marshalling plain data cannot fail; make a failure visible anyway.
		return "error:" + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
