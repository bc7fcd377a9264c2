package state

import (
	"sync"
	"time"
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
	idGen   uint64        // changes of identity data on this replica (IdentityGeneration)

	// The memo of ActiveRevisions (reads.go), valid while applied is
	// activeAt (a refused command changes nothing); memoMu guards it.
	memoMu   sync.Mutex
	activeAt uint64
	active   map[string]string
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
	act            activation  // truthful activation (activation.go), snapshot section "activation"
	ids            ids         // users, service principals, tokens, role bindings, Restrictions
	idem           idempotency // recorded keyed writes (idempotency.go), snapshot section "idempotency"
	// creds: the credential sources' metadata (credentials.go), snapshot
	// section "credentials"; credByName below indexes them.
	creds map[string]CredentialSource
	// started: open activate work → when its first pass left the queued
	// phase (workstart.go), snapshot section "workstarts".
	started map[string]time.Time

	// Indexes derived from the above (rebuilt on restore, not snapshotted),
	// so scheduling scans only live work however long the history grows.
	open      map[string]bool     // IDs of queued or claimed work
	agentRevs map[string][]string // revision IDs per Agent in Number order
	revWork   map[string][]string // work IDs per revision, so a revision's view reads its own work
	// Name indexes, so API lookups by name and the uniqueness checks of
	// Apply are O(1) instead of a scan of every entity.
	nsByName    map[string]string              // Namespace name → ID
	cfgByName   map[nameKey]string             // (Namespace ID, Configuration name) → ID
	agentByName map[nameKey]string             // (Namespace ID, Agent name) → ID
	nsAgents    map[string]map[string]struct{} // Namespace ID → its Agent IDs
	credByName  map[nameKey]string             // (Namespace ID, credential source name) → ID
}

// nameKey is a name within a Namespace.
type nameKey struct{ ns, name string }

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
		revWork:        map[string][]string{},
		nsByName:       map[string]string{},
		cfgByName:      map[nameKey]string{},
		agentByName:    map[nameKey]string{},
		nsAgents:       map[string]map[string]struct{}{},
		act:            newActivation(),
		ids:            newIDs(),
		creds:          map[string]CredentialSource{},
		credByName:     map[nameKey]string{},
		started:        map[string]time.Time{},
	}
}

// putNamespace stores a new Namespace and indexes its name.
func (d *data) putNamespace(ns Namespace) {
	d.namespaces[ns.ID] = ns
	d.nsByName[ns.Name] = ns.ID
}

// putConfiguration stores a Configuration and keeps its name index (a
// replacement may rename it).
func (d *data) putConfiguration(c Configuration) {
	if prev, ok := d.configurations[c.ID]; ok {
		delete(d.cfgByName, nameKey{prev.NamespaceID, prev.Name})
	}
	d.configurations[c.ID] = c
	d.cfgByName[nameKey{c.NamespaceID, c.Name}] = c.ID
}

// addAgent stores a new Agent and indexes it; later updates of an Agent
// (which never change its Namespace or name) write d.agents directly.
func (d *data) addAgent(a Agent) {
	d.agents[a.ID] = a
	d.agentByName[nameKey{a.NamespaceID, a.Name}] = a.ID
	set := d.nsAgents[a.NamespaceID]
	if set == nil {
		set = map[string]struct{}{}
		d.nsAgents[a.NamespaceID] = set
	}
	set[a.ID] = struct{}{}
}

// removeAgent deletes an Agent and its index entries.
func (d *data) removeAgent(a Agent) {
	delete(d.agents, a.ID)
	delete(d.agentByName, nameKey{a.NamespaceID, a.Name})
	if set := d.nsAgents[a.NamespaceID]; set != nil {
		delete(set, a.ID)
		if len(set) == 0 {
			delete(d.nsAgents, a.NamespaceID)
		}
	}
}

// putWork stores w and keeps the open-work and per-revision indexes.
func (d *data) putWork(w Work) {
	if _, ok := d.work[w.ID]; !ok && w.RevisionID != "" {
		d.revWork[w.RevisionID] = append(d.revWork[w.RevisionID], w.ID)
	}
	d.work[w.ID] = w
	if w.State == WorkQueued || w.State == WorkClaimed {
		d.open[w.ID] = true
	} else {
		delete(d.open, w.ID)
		delete(d.started, w.ID)
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
