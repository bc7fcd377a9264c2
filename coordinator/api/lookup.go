package api

import (
	"context"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/state"
)

// Path segments {ns} and {agent} (and {cfg}) accept an id or a name; ids
// win when both match. Names resolve through the state's O(1) name indexes.

// catchUpTimeout bounds the wait for a new leader's state to catch up before
// a lookup answers "not found".
const catchUpTimeout = 5 * time.Second

// leaderCommitPoll paces the wait of a new leader for its first commit.
const leaderCommitPoll = 20 * time.Millisecond

// caughtUp is called before a lookup answers "not found": it lets the state
// catch up with what the cluster has committed and reports whether the
// lookup is worth repeating. It waits until this member has applied the
// cluster's commit index as it knows it (on a leader its own, once the
// first entry of its term committed: just after a leadership change,
// entries of the previous term can be committed but not yet applied here;
// on a follower the leader's), so a member catching up never reports as
// missing what the cluster has. It writes nothing: a read of a missing
// name appends no entry to the log (a Raft barrier would). A ?stale read
// asked for this member's state as it is and skips it.
func (s *server) caughtUp(ctx context.Context) bool {
	if m, ok := ctx.Value(readModeKey{}).(readMode); ok && m.stale {
		return false
	}
	pos, ok := s.b.(Positions)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	c, ok := pos.LeaderCommit()
	for !ok && s.b.IsLeader() {
		// A new leader knows its commit index once its term's first entry
		// commits (the store's own barrier at the start of every term).
		select {
		case <-ctx.Done():
			return false
		case <-time.After(leaderCommitPoll):
		}
		c, ok = pos.LeaderCommit()
	}
	before := pos.AppliedIndex()
	if !ok || before >= c {
		return false
	}
	_, err := pos.WaitApplied(ctx, c)
	return err == nil && pos.AppliedIndex() > before
}

// missing is the answer for a name the state does not hold: NOT_FOUND only
// when this member knows it is current — it knows the cluster's commit
// index and has applied it (or the caller asked for its state as it is).
// Otherwise NOT_READY (retryable on another member): what it lacks may
// exist. caughtUp waited already on the common path; this covers a member
// whose answer changed meanwhile — a leader replaying its log that lost
// its leadership during the wait learns the new leader's commit index
// without having applied it.
func (s *server) missing(ctx context.Context, nf *Error) error {
	if m, ok := ctx.Value(readModeKey{}).(readMode); ok && m.stale {
		return nf
	}
	pos, ok := s.b.(Positions)
	if !ok {
		return nf
	}
	c, known := pos.LeaderCommit()
	if !known {
		return notReady("this member cannot tell whether it exists ("+nf.Message+"): no fresh commit index from a leader", pos)
	}
	before := pos.AppliedIndex()
	wctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	_, err := pos.WaitApplied(wctx, c)
	cancel()
	if err != nil || pos.AppliedIndex() != before {
		return notReady("this member is still applying the cluster's log ("+nf.Message+")", pos)
	}
	return nf
}

// namespace resolves the request's {ns} for a caller who may view it
// (authz.go: visible).
func (s *server) namespace(r *http.Request) (state.Namespace, error) {
	return s.visible(r, r.PathValue("ns"))
}

func (s *server) namespaceIn(ctx context.Context, ref string) (state.Namespace, error) {
	m := s.b.Machine()
	find := func() (state.Namespace, bool) {
		if ns, ok := m.Namespace(ref); ok {
			return ns, true
		}
		return m.NamespaceByName(ref)
	}
	if ns, ok := find(); ok {
		return ns, nil
	}
	if s.caughtUp(ctx) {
		if ns, ok := find(); ok {
			return ns, nil
		}
	}
	return state.Namespace{}, s.missing(ctx, notFound("namespace %q not found", ref))
}

func (s *server) configurationRef(ns state.Namespace, ref string) (state.Configuration, error) {
	m := s.b.Machine()
	find := func() (state.Configuration, bool) {
		if c, ok := m.Configuration(ref); ok && c.NamespaceID == ns.ID {
			return c, true
		}
		return m.ConfigurationByName(ns.ID, ref)
	}
	if c, ok := find(); ok {
		return c, nil
	}
	if s.caughtUp(context.Background()) {
		if c, ok := find(); ok {
			return c, nil
		}
	}
	return state.Configuration{}, s.missing(context.Background(), notFound("configuration %q not found in namespace %q", ref, ns.Name))
}

func (s *server) agentRef(ctx context.Context, ns state.Namespace, ref string) (state.Agent, error) {
	m := s.b.Machine()
	find := func() (state.Agent, bool) {
		if a, ok := m.Agent(ref); ok && a.NamespaceID == ns.ID {
			return a, true
		}
		return m.AgentByName(ns.ID, ref)
	}
	if a, ok := find(); ok {
		return a, nil
	}
	if s.caughtUp(ctx) {
		if a, ok := find(); ok {
			return a, nil
		}
	}
	return state.Agent{}, s.missing(ctx, notFound("agent %q not found in namespace %q", ref, ns.Name))
}

// agent resolves {ns} and {agent}.
func (s *server) agent(r *http.Request) (state.Namespace, state.Agent, error) {
	ns, err := s.namespace(r)
	if err != nil {
		return ns, state.Agent{}, err
	}
	a, err := s.agentRef(r.Context(), ns, r.PathValue("agent"))
	return ns, a, err
}
