package state

import (
	"cmp"
	"slices"
	"time"
)

// Reads. Each returns copies in a deterministic order.

// Namespace returns one Namespace.
func (m *Machine) Namespace(id string) (Namespace, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ns, ok := m.d.namespaces[id]
	return cloneNamespace(ns), ok
}

// Namespaces returns every Namespace ordered by ID.
func (m *Machine) Namespaces() []Namespace {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.namespaces, func(Namespace) bool { return true }, cloneNamespace,
		func(a, b Namespace) int { return cmp.Compare(a.ID, b.ID) })
}

// Configuration returns one Configuration.
func (m *Machine) Configuration(id string) (Configuration, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.d.configurations[id]
	return cloneConfiguration(c), ok
}

// Configurations returns a Namespace's Configurations ("" = all) ordered by ID.
func (m *Machine) Configurations(nsID string) []Configuration {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.configurations, func(c Configuration) bool { return nsID == "" || c.NamespaceID == nsID },
		cloneConfiguration, func(a, b Configuration) int { return cmp.Compare(a.ID, b.ID) })
}

// Agent returns one Agent.
func (m *Machine) Agent(id string) (Agent, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a, ok := m.d.agents[id]
	return cloneAgent(a), ok
}

// NamespaceByName returns the Namespace named name.
func (m *Machine) NamespaceByName(name string) (Namespace, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ns, ok := m.d.namespaces[m.d.nsByName[name]]
	return cloneNamespace(ns), ok
}

// ConfigurationByName returns the Configuration named name in a Namespace.
func (m *Machine) ConfigurationByName(nsID, name string) (Configuration, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.d.cfgByName[nameKey{nsID, name}]
	if !ok {
		return Configuration{}, false
	}
	return cloneConfiguration(m.d.configurations[id]), true
}

// AgentByName returns the Agent named name in a Namespace.
func (m *Machine) AgentByName(nsID, name string) (Agent, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.d.agentByName[nameKey{nsID, name}]
	if !ok {
		return Agent{}, false
	}
	return cloneAgent(m.d.agents[id]), true
}

// Agents returns a Namespace's Agents ("" = all) ordered by ID.
func (m *Machine) Agents(nsID string) []Agent {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if nsID != "" {
		out := make([]Agent, 0, len(m.d.nsAgents[nsID]))
		for id := range m.d.nsAgents[nsID] {
			out = append(out, cloneAgent(m.d.agents[id]))
		}
		slices.SortFunc(out, func(a, b Agent) int { return cmp.Compare(a.ID, b.ID) })
		return out
	}
	return sortedValues(m.d.agents, func(a Agent) bool { return nsID == "" || a.NamespaceID == nsID },
		cloneAgent, func(a, b Agent) int { return cmp.Compare(a.ID, b.ID) })
}

// ActiveRevisions maps every Agent with an active revision, not being
// deleted, to that revision's ID: the health watcher's list every round.
// The map is built once per state change and shared by every caller until
// the next one, so it must not be modified: at 10,000 Agents at rest a
// round then lists them without building a map (or collecting it) every
// 2 s.
func (m *Machine) ActiveRevisions() map[string]string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.memoMu.Lock()
	defer m.memoMu.Unlock()
	if m.active != nil && m.activeAt == m.applied {
		return m.active
	}
	out := make(map[string]string, len(m.d.agents))
	for id, a := range m.d.agents {
		if a.ActiveRevisionID != "" && !a.Deleting {
			out[id] = a.ActiveRevisionID
		}
	}
	m.active, m.activeAt = out, m.applied
	return out
}

// Revision returns one Revision.
func (m *Machine) Revision(id string) (Revision, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.d.revisions[id]
	return cloneRevision(r), ok
}

// Revisions returns an Agent's revisions ordered by Number.
func (m *Machine) Revisions(agentID string) []Revision {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := m.d.agentRevs[agentID]
	out := make([]Revision, 0, len(ids))
	for _, id := range ids {
		out = append(out, cloneRevision(m.d.revisions[id]))
	}
	return out
}

// LatestRevision returns an Agent's revision with the highest Number.
func (m *Machine) LatestRevision(agentID string) (Revision, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := m.d.agentRevs[agentID]
	if len(ids) == 0 {
		return Revision{}, false
	}
	return cloneRevision(m.d.revisions[ids[len(ids)-1]]), true
}

// LiveRevisions returns an Agent's revisions that are not retired (they may
// still hold runtime resources), ordered by Number.
func (m *Machine) LiveRevisions(agentID string) []Revision {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Revision
	for _, id := range m.d.agentRevs[agentID] {
		if r := m.d.revisions[id]; r.Status != RevisionRetired {
			out = append(out, cloneRevision(r))
		}
	}
	return out
}

// Work returns one work item.
func (m *Machine) Work(id string) (Work, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w, ok := m.d.work[id]
	return w, ok
}

// WorkFilter selects work items; empty fields match everything.
type WorkFilter struct {
	State   string
	Kind    string
	AgentID string
}

// WorkItems returns the matching work ordered by CreatedAt, then ID.
func (m *Machine) WorkItems(f WorkFilter) []Work {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.work, func(w Work) bool {
		return (f.State == "" || w.State == f.State) && (f.Kind == "" || w.Kind == f.Kind) &&
			(f.AgentID == "" || w.AgentID == f.AgentID)
	}, func(w Work) Work { return w }, workOrder)
}

// LatestRevisionWork returns revision revID's latest work of kind (by
// CreatedAt, then ID), reading only that revision's work: a revision's view
// costs the same however long the work history grows.
func (m *Machine) LatestRevisionWork(revID, kind string) (Work, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var latest Work
	found := false
	for _, id := range m.d.revWork[revID] {
		if w := m.d.work[id]; w.Kind == kind && (!found || workOrder(w, latest) > 0) {
			latest, found = w, true
		}
	}
	return latest, found
}

// OpenWorkItems is WorkItems restricted to queued and claimed work, read
// from the open-work index instead of the whole history.
func (m *Machine) OpenWorkItems(f WorkFilter) []Work {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Work
	for id := range m.d.open {
		w := m.d.work[id]
		if (f.State == "" || w.State == f.State) && (f.Kind == "" || w.Kind == f.Kind) &&
			(f.AgentID == "" || w.AgentID == f.AgentID) {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, workOrder)
	return out
}

func workOrder(a, b Work) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// Claimable returns, at most one per Agent, the work a ClaimWork at time now
// would accept: queued and available or claimed with an expired lease, with
// attempts left, and no live claim on the Agent. Order: AvailableAt,
// CreatedAt, ID (the reference queue's order). The engine polls it.
func (m *Machine) Claimable(now time.Time) []Work {
	return m.ClaimableN(now, 0)
}

// ClaimableN is Claimable limited to the first limit items (limit <= 0: all).
// The engine asks for no more than it can process, so a long queue costs a
// scan and a sort of small keys, not a copy of every item.
func (m *Machine) ClaimableN(now time.Time, limit int) []Work {
	m.mu.RLock()
	defer m.mu.RUnlock()
	busy := map[string]bool{}
	for id := range m.d.open {
		if w := m.d.work[id]; w.State == WorkClaimed && !now.After(w.LeaseExpiry) {
			busy[w.AgentID] = true
		}
	}
	type key struct {
		at, created time.Time
		id, agent   string
	}
	less := func(a, b key) int {
		return cmp.Or(a.at.Compare(b.at), a.created.Compare(b.created), cmp.Compare(a.id, b.id))
	}
	// Only an Agent's first item in the order can be taken, and only the
	// first limit Agents': a scan keeping the best limit items of distinct
	// Agents, not a sort of the whole queue (a deploy storm queues
	// thousands, and the engine asks after every change). An Agent's item
	// replaces its own later one; one evicted never returns, as the
	// Agent's later items are later still. Unlimited: each Agent's first,
	// sorted.
	var top []key
	first := map[string]key{}
	for id := range m.d.open {
		w := m.d.work[id]
		ready := (w.State == WorkQueued && !w.AvailableAt.After(now)) || (w.State == WorkClaimed && now.After(w.LeaseExpiry))
		if !ready || w.Attempts >= w.MaxAttempts || busy[w.AgentID] {
			continue
		}
		k := key{w.AvailableAt, w.CreatedAt, w.ID, w.AgentID}
		if limit <= 0 {
			if cur, ok := first[k.agent]; !ok || less(k, cur) < 0 {
				first[k.agent] = k
			}
			continue
		}
		if len(top) == limit && less(k, top[limit-1]) >= 0 {
			continue
		}
		if j := slices.IndexFunc(top, func(t key) bool { return t.agent == k.agent }); j >= 0 {
			if less(k, top[j]) >= 0 {
				continue
			}
			top = slices.Delete(top, j, j+1)
		}
		i, _ := slices.BinarySearchFunc(top, k, less)
		top = slices.Insert(top, i, k)
		if len(top) > limit {
			top = top[:limit]
		}
	}
	if limit <= 0 {
		for _, k := range first {
			top = append(top, k)
		}
		slices.SortFunc(top, less)
	}
	out := make([]Work, 0, len(top))
	for _, k := range top {
		out = append(out, m.d.work[k.id])
	}
	return out
}

// Exhausted returns work ExpireWork would fail at time now: queued, or
// claimed with an expired lease, without attempts left.
func (m *Machine) Exhausted(now time.Time) []Work {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Work
	for id := range m.d.open {
		w := m.d.work[id]
		stale := w.State == WorkQueued || (w.State == WorkClaimed && now.After(w.LeaseExpiry))
		if stale && w.Attempts >= w.MaxAttempts {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, workOrder)
	if out == nil {
		out = []Work{}
	}
	return out
}

// NextWakeup returns the earliest future time at which some work may become
// claimable (a queued AvailableAt or a lease expiry after now); ok is false
// when there is none.
func (m *Machine) NextWakeup(now time.Time) (t time.Time, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for id := range m.d.open {
		w := m.d.work[id]
		var at time.Time
		switch w.State {
		case WorkQueued:
			at = w.AvailableAt
		case WorkClaimed:
			at = w.LeaseExpiry.Add(time.Nanosecond)
		default:
			continue
		}
		if at.After(now) && (!ok || at.Before(t)) {
			t, ok = at, true
		}
	}
	return t, ok
}

// PredecessorStops returns an Agent's predecessor-stop records, oldest first.
func (m *Machine) PredecessorStops(agentID string) []PredecessorStop {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]PredecessorStop(nil), m.d.stops[agentID]...)
}

// Audit returns up to limit records with Seq > afterSeq, in Seq order
// (limit <= 0 means all).
func (m *Machine) Audit(afterSeq int64, limit int) []AuditRecord {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(m.d.audit, afterSeq+1, func(r AuditRecord, s int64) int { return cmp.Compare(r.Seq, s) })
	var out []AuditRecord
	for ; i < len(m.d.audit) && (limit <= 0 || len(out) < limit); i++ {
		out = append(out, cloneAudit(m.d.audit[i]))
	}
	return out
}

// Installation returns the installation settings.
func (m *Machine) Installation() Installation {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.d.installation
}

func sortedValues[T any](src map[string]T, keep func(T) bool, clone func(T) T, order func(a, b T) int) []T {
	out := make([]T, 0)
	for _, v := range src {
		if keep(v) {
			out = append(out, clone(v))
		}
	}
	slices.SortFunc(out, order)
	return out
}
