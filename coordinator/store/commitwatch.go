package store

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// commitWatch is the Raft transport with one addition: it notes the commit
// index every AppendEntries request carries from the leader. Raft itself
// caps a follower's commit index at the follower's last log index, so a
// member that restarted behind (or was cut off) believes it has applied
// "everything committed" while the cluster is far ahead; readiness and
// at-least-index reads compare with the leader's figure instead. The leader
// sends its commit index at least every commit timeout when idle
// (hashicorp/raft's replication loop), so the figure is fresh.
type commitWatch struct {
	*raft.NetworkTransport
	out  chan raft.RPC
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	term   uint64
	commit uint64
	at     time.Time
	// verified is the term whose leader's figure has been seen to be
	// authoritative (see Store.LeaderCommit).
	verified uint64
}

func newCommitWatch(t *raft.NetworkTransport) *commitWatch {
	w := &commitWatch{NetworkTransport: t, out: make(chan raft.RPC), stop: make(chan struct{})}
	w.wg.Add(1)
	go w.relay(t.Consumer())
	return w
}

// Consumer implements raft.Transport: the RPCs of the wrapped transport,
// after a look at each.
func (w *commitWatch) Consumer() <-chan raft.RPC { return w.out }

func (w *commitWatch) relay(in <-chan raft.RPC) {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case rpc := <-in:
			if ae, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				w.observe(ae.Term, ae.LeaderCommitIndex)
			}
			select {
			case w.out <- rpc:
			case <-w.stop:
				return
			}
		}
	}
}

func (w *commitWatch) observe(term, commit uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case term < w.term:
		return
	case term > w.term:
		w.term, w.commit = term, commit
	default:
		w.commit = max(w.commit, commit)
	}
	w.at = time.Now()
}

// leaderCommit returns the highest commit index a leader of term announced,
// when it was last heard (zero when none of that term was) and whether the
// term's figure was verified.
func (w *commitWatch) leaderCommit(term uint64) (uint64, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.term != term {
		return 0, time.Time{}, false
	}
	return w.commit, w.at, w.verified == term
}

// verify records that the leader of term has committed an entry of its own
// term: its announcements are authoritative from now on.
func (w *commitWatch) verify(term uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verified = max(w.verified, term)
}

// close stops the relay; raft must be shut down first.
func (w *commitWatch) close() {
	close(w.stop)
	w.wg.Wait()
}
