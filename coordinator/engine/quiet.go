package engine

import (
	"context"
	"sync"

	"oce.dev/oce/coordinator/state"
)

// Quiescence: a state in which this engine writes nothing more until
// something outside it changes (a request is applied, or an observation of
// the driver differs from the recorded one). Whoever compares whole-state
// digests (tests, an operator checking replicas) waits for it instead of
// hoping the background writers — the watcher's health records, the owed
// finalizations, claims, expiries and the release of earlier leaders'
// claims — are done.
//
// The engine is quiescent when it has started (earlier leaders' claims are
// released), no work is open or in flight, no finalization is owed, and a
// whole watcher round ran over the current state: it began at the replica's
// current Applied count, so neither the round nor anyone else wrote since.
// A round that left watched Agents unobserved (resync.go) is not whole;
// ObserveNow asks for a whole one.

// quiet records the watcher's rounds for Quiescent.
type quiet struct {
	mu      sync.Mutex
	started bool          // Run released earlier claims and started watching
	begun   uint64        // rounds begun
	last    uint64        // the last finished round's number (its begun count)
	round   uint64        // Applied when the last finished round began
	ended   uint64        // rounds ended, whole or not
	done    chan struct{} // closed when the next round finishes
	kick    chan struct{} // wakes the watcher for a round now
}

func newQuiet() *quiet {
	return &quiet{done: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// roundBegins numbers a watcher round that begins at Applied count start.
func (q *quiet) roundBegins() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.begun++
	return q.begun
}

// roundFinished records round n, which began at Applied count start;
// only a whole round counts for quiescence.
func (q *quiet) roundFinished(n, start uint64, whole bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended++
	if !whole {
		return
	}
	q.last, q.round = n, start
	close(q.done)
	q.done = make(chan struct{})
}

// Quiescent reports whether the engine will write nothing more until a
// request or a changed observation moves the state (see above).
func (e *Engine) Quiescent() bool { return e.quiescentSince(0) }

// quiescentSince is Quiescent with a round begun after round number after.
func (e *Engine) quiescentSince(after uint64) bool {
	m := e.p.Machine()
	e.q.mu.Lock()
	ok := e.q.started && e.q.last > after && e.q.round == m.Applied()
	e.q.mu.Unlock()
	if !ok {
		return false
	}
	e.busyMu.Lock()
	idle := len(e.busy) == 0
	e.busyMu.Unlock()
	return idle && len(m.OpenWorkItems(state.WorkFilter{})) == 0 && len(m.Unfinalized()) == 0
}

// ObserveNow wakes the watcher for a round over every Agent now instead of
// at its next interval. It never blocks.
func (e *Engine) ObserveNow() {
	e.obs.mark(nil)
	e.kick()
}

// ObserveAgents wakes the watcher for a round now that observes at least
// agentIDs (nil: every Agent) — a driver's change notice
// (compute.ChangeNotifier). It never blocks.
func (e *Engine) ObserveAgents(agentIDs []string) {
	e.obs.mark(agentIDs)
	e.kick()
}

func (e *Engine) kick() {
	select {
	case e.q.kick <- struct{}{}:
	default:
	}
}

// WaitQuiescent waits until the engine is quiescent with observations
// current as of the call (a watcher round begun after it found nothing to
// record), or ctx ends. It asks the watcher for rounds meanwhile, so it
// returns within a round or two of the last write instead of waiting out
// the health interval.
func (e *Engine) WaitQuiescent(ctx context.Context) error {
	e.q.mu.Lock()
	after := e.q.begun
	e.q.mu.Unlock()
	for {
		e.q.mu.Lock()
		next := e.q.done
		e.q.mu.Unlock()
		if e.quiescentSince(after) {
			return nil
		}
		e.ObserveNow()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		}
	}
}
