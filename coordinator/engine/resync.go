package engine

import (
	"sync"
	"time"
)

// Watched observations (issue 27): a driver that answers an Agent's
// readiness from watch-fed caches marks the observation Watched and tells
// the engine when that Agent's objects change (compute.ChangeNotifier).
// Such an Agent is observed again on that notice, and otherwise only every
// ResyncInterval — so a watcher round at rest touches the Agents that
// changed, not all of them, and the leader's work at rest does not grow
// with the number of Agents. Everything else — an Agent not ready, a
// verdict read through the API server or the runtime, a revision just
// switched — is observed every HealthInterval as before.

// DefaultResyncInterval bounds how long a watched verdict stands without a
// change notice: the watch is the source, this only guards against a
// notice lost.
const DefaultResyncInterval = 30 * time.Second

// seen is the watcher's last look at an Agent.
type seen struct {
	at       time.Time
	revision string
	watched  bool
}

// observations is the watcher's leader-local memory of its looks and of
// the change notices since the last round.
type observations struct {
	mu    sync.Mutex
	last  map[string]seen
	dirty map[string]bool // Agents told changed since the last round began
	full  bool            // every Agent is to be observed next round
}

func newObservations() *observations {
	return &observations{last: map[string]seen{}, dirty: map[string]bool{}, full: true}
}

// mark records change notices; nil means any Agent.
func (o *observations) mark(agentIDs []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if agentIDs == nil {
		o.full = true
		return
	}
	for _, id := range agentIDs {
		o.dirty[id] = true
	}
}

// take returns and clears the notices for the round that begins.
func (o *observations) take() (dirty map[string]bool, full bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dirty, full = o.dirty, o.full
	o.dirty, o.full = map[string]bool{}, false
	return dirty, full
}

// due reports whether agentID, running revision, is to be observed at now.
func (o *observations) due(agentID, revision string, now time.Time, dirty map[string]bool, full bool, resync time.Duration) bool {
	if full || dirty[agentID] {
		return true
	}
	o.mu.Lock()
	s, ok := o.last[agentID]
	o.mu.Unlock()
	return !ok || !s.watched || s.revision != revision || now.Sub(s.at) >= resync
}

// record notes a look at agentID; watched: its verdict stands until a
// change notice or the resync bound.
func (o *observations) record(agentID, revision string, at time.Time, watched bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last[agentID] = seen{at: at, revision: revision, watched: watched}
}

// keep forgets every Agent not in active (deleted, stopped): Agent →
// its active revision, as state.Machine.ActiveRevisions lists them.
func (o *observations) keep(active map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id := range o.last {
		if _, ok := active[id]; !ok {
			delete(o.last, id)
		}
	}
}
