package state

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// Snapshot versions. Version 1 was a JSON document of ID-sorted slices; it
// is still restored (old data directories and backups), never written.
// Version 2 is the compact binary encoding of snapcodec.go: encoding and
// decoding it is several times cheaper than JSON, which dominated snapshot
// and restore time at 10,000 Agents / 100,000 revisions.
const (
	snapshotVersionJSON = 1
	snapshotVersion     = 2
	// snapshotVersionSections is version 2 followed by the trailer of named
	// sections (snapsections.go); a state without section data is written
	// as version 2.
	snapshotVersionSections = 3
)

// snapshotJSON is the version-1 encoding: every collection a slice sorted by
// ID.
type snapshotJSON struct {
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

// MarshalSnapshot returns the canonical, deterministic bytes of the state
// (binary version 2, or 3 with sections): equal states marshal to equal
// bytes.
func (m *Machine) MarshalSnapshot() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.d.marshal(), nil
}

// RestoreSnapshot replaces the state with a snapshot from MarshalSnapshot
// (binary version 2 or 3) or from an earlier release (JSON version 1). On
// error the state is unchanged.
func (m *Machine) RestoreSnapshot(b []byte) error {
	var (
		d   data
		err error
	)
	if bytes.HasPrefix(b, []byte(snapMagic)) {
		d, err = unmarshalBinary(b)
	} else {
		d, err = unmarshalJSON(b)
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.d = d
	m.bump()
	m.idGen++
	return nil
}

func unmarshalJSON(b []byte) (data, error) {
	var s snapshotJSON
	if err := decodeStrict(b, &s); err != nil {
		return data{}, fmt.Errorf("%w: snapshot: %w", ErrInvalid, err)
	}
	if s.Version != snapshotVersionJSON {
		return data{}, fmt.Errorf("%w: snapshot version %d", ErrInvalid, s.Version)
	}
	d := newData()
	var err error
	for _, v := range s.Namespaces {
		err = cmp.Or(err, d.loadNamespace(v))
	}
	for _, v := range s.Configurations {
		err = cmp.Or(err, d.loadConfiguration(v))
	}
	for _, v := range s.Agents {
		err = cmp.Or(err, d.loadAgent(v))
	}
	slices.SortFunc(s.Revisions, func(a, b Revision) int { return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.ID, b.ID)) })
	for _, v := range s.Revisions {
		err = cmp.Or(err, d.loadRevision(v))
	}
	for _, v := range s.Work {
		err = cmp.Or(err, d.loadWork(v))
	}
	for _, list := range s.PredecessorStops {
		err = cmp.Or(err, d.loadStops(list))
	}
	if err != nil {
		return data{}, err
	}
	d.audit = s.Audit
	if len(d.audit) == 0 {
		d.audit = nil
	}
	d.auditSeq = s.AuditSeq
	d.installation = s.Installation
	return d, nil
}

// Loaders used by restore: they refuse duplicate IDs and names (which Apply
// never produces) and rebuild the derived indexes.

func errDuplicate(what, id string) error {
	return fmt.Errorf("%w: snapshot has a duplicate %s %q", ErrInvalid, what, id)
}

func (d *data) loadNamespace(v Namespace) error {
	if _, ok := d.namespaces[v.ID]; ok {
		return errDuplicate("namespace", v.ID)
	}
	if _, ok := d.nsByName[v.Name]; ok {
		return errDuplicate("namespace name", v.Name)
	}
	d.putNamespace(v)
	return nil
}

func (d *data) loadConfiguration(v Configuration) error {
	if _, ok := d.configurations[v.ID]; ok {
		return errDuplicate("configuration", v.ID)
	}
	if _, ok := d.cfgByName[nameKey{v.NamespaceID, v.Name}]; ok {
		return errDuplicate("configuration name", v.Name)
	}
	d.putConfiguration(v)
	return nil
}

func (d *data) loadAgent(v Agent) error {
	if _, ok := d.agents[v.ID]; ok {
		return errDuplicate("agent", v.ID)
	}
	if _, ok := d.agentByName[nameKey{v.NamespaceID, v.Name}]; ok {
		return errDuplicate("agent name", v.Name)
	}
	d.addAgent(v)
	return nil
}

// loadRevision adds revisions in their Agent's Number order.
func (d *data) loadRevision(v Revision) error {
	if _, ok := d.revisions[v.ID]; ok {
		return errDuplicate("revision", v.ID)
	}
	d.addRevision(v)
	return nil
}

func (d *data) loadWork(v Work) error {
	if _, ok := d.work[v.ID]; ok {
		return errDuplicate("work", v.ID)
	}
	d.putWork(v)
	return nil
}

func (d *data) loadStops(list []PredecessorStop) error {
	if len(list) == 0 {
		return fmt.Errorf("%w: snapshot has an empty predecessor-stop list", ErrInvalid)
	}
	if _, ok := d.stops[list[0].AgentID]; ok {
		return errDuplicate("predecessor-stop list of agent", list[0].AgentID)
	}
	d.stops[list[0].AgentID] = list
	return nil
}

// Digest is the hex SHA-256 of MarshalSnapshot, for identical-state checks
// across replicas and in tests. It is stable within a snapshot version.
func (m *Machine) Digest() string {
	m.mu.RLock()
	b := m.d.marshal()
	m.mu.RUnlock()
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
