package state

import (
	"maps"
	"slices"
	"time"
)

// Work starts (issue 27): an activation admitted in a deploy storm may wait
// in the queue until the driver can start it (engine admission), so its
// convergence window runs from when its first pass left the queued phase,
// not from the revision's creation. The time is replicated — a new leader
// measures the same window — and kept only while the work is open.

// markStarted records c's time as w's start the first time an open
// activation leaves the queued phase.
func (d *data) markStarted(w Work, at time.Time) {
	if w.Kind != WorkActivate || w.Phase == PhaseQueued || !d.open[w.ID] {
		return
	}
	if _, ok := d.started[w.ID]; !ok {
		d.started[w.ID] = at
	}
}

// WorkStarted is when open activate work first left the queued phase; ok
// is false before that and once the work ended.
func (m *Machine) WorkStarted(workID string) (time.Time, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, ok := m.d.started[workID]
	return t, ok
}

// marshalWorkStarts writes the snapshot section "workstarts": work ID and
// start, by ID.
func marshalWorkStarts(e *snapEnc, d *data) {
	e.uint(uint64(len(d.started)))
	for _, id := range slices.Sorted(maps.Keys(d.started)) {
		e.str(id)
		e.time(d.started[id])
	}
}

func unmarshalWorkStarts(r *snapDec, d *data) {
	for range r.count() {
		id, at := r.str(), r.time()
		if r.err != nil {
			return
		}
		if _, ok := d.started[id]; ok {
			r.fail(errDuplicate("work start", id))
			return
		}
		d.started[id] = at
	}
}
