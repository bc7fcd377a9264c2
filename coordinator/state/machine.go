package state

import (
	"sync"
)

// Machine is the replicated state machine. ApplyCommand is deterministic: it
// reads no clock, no random source and never lets map iteration order affect
// the result, so every replica applying the same log reaches the same Digest.
// Reads return deep copies and are safe to call concurrently with Apply.
type Machine struct {
	mu      sync.RWMutex
	d       data
	applied uint64        // successful applies since creation or restore; not replicated state
	changed chan struct{} // closed and replaced after every successful apply
}

// data is the replicated content; the snapshot is its canonical encoding.
type data struct {
	namespaces     map[string]Namespace
	configurations map[string]Configuration
	agents         map[string]Agent
	revisions      map[string]Revision
	work           map[string]Work
	stops          map[string][]PredecessorStop // per Agent, oldest first
	audit          []AuditRecord
	auditSeq       int64
	installation   Installation

	// Indexes derived from the above (rebuilt on restore, not snapshotted),
	// so scheduling scans only live work however long the history grows.
	open      map[string]bool     // IDs of queued or claimed work
	agentRevs map[string][]string // revision IDs per Agent in Number order
}

func newData() data {
	return data{
		namespaces:     map[string]Namespace{},
		configurations: map[string]Configuration{},
		agents:         map[string]Agent{},
		revisions:      map[string]Revision{},
		work:           map[string]Work{},
		stops:          map[string][]PredecessorStop{},
		open:           map[string]bool{},
		agentRevs:      map[string][]string{},
	}
}

// putWork stores w and keeps the open-work index.
func (d *data) putWork(w Work) {
	d.work[w.ID] = w
	if w.State == WorkQueued || w.State == WorkClaimed {
		d.open[w.ID] = true
	} else {
		delete(d.open, w.ID)
	}
}

// addRevision stores a newly admitted revision (its Number is the Agent's
// highest) and indexes it.
func (d *data) addRevision(r Revision) {
	d.revisions[r.ID] = r
	d.agentRevs[r.AgentID] = append(d.agentRevs[r.AgentID], r.ID)
}

// NewMachine returns an empty Machine.
func NewMachine() *Machine {
	return &Machine{d: newData(), changed: make(chan struct{})}
}

// Changed returns a channel that is closed after the next successful apply
// or restore; callers waiting for progress (deploy --wait, the engine) re-read
// state and call Changed again.
func (m *Machine) Changed() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

// Applied counts successful applies (and restores) on this replica. It is a
// local progress counter, not replicated state, and not part of the Digest.
func (m *Machine) Applied() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.applied
}

// bump records a successful state change; m.mu is held for writing.
func (m *Machine) bump() {
	m.applied++
	close(m.changed)
	m.changed = make(chan struct{})
}
