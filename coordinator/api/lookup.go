package api

import (
	"context"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/state"
)

// Path segments {ns} and {agent} (and {cfg}) accept an id or a name; ids
// win when both match. Names resolve through the state's O(1) name indexes.

// catchUpTimeout bounds the wait for a member's state to catch up with the
// cluster's commit index (and a new leader's for its first commit) before a
// lookup answers, or a write is decided.
const catchUpTimeout = 5 * time.Second

// lookup runs find against this member's state and says whether a miss is
// authoritative (behind == ""): whether find ran on a state that had applied
// the cluster's commit index as this member knows it after the miss — on a
// leader its own, once its term's barrier completed (just after a leadership
// change, entries of the previous term can be committed but not yet applied
// here); on a follower the leader's. When the state it missed in was older,
// it waits for the state to reach that index and runs find once more, on a
// state that has. The applied index is taken before the first find, so an
// entry applied between the miss and reading the commit index cannot make
// the miss look current. When it cannot catch up, behind says why and the
// miss answers NOT_READY (missing): a member catching up never reports as
// missing what the cluster has. It writes nothing: a read of a missing name
// appends no entry to the log (a Raft barrier would). A ?stale read asked
// for this member's state as it is.
func (s *server) lookup(ctx context.Context, find func() bool) (ok bool, behind string) {
	pos, has := s.b.(Positions)
	if m, set := ctx.Value(readModeKey{}).(readMode); !has || (set && m.stale) {
		return find(), ""
	}
	at := pos.AppliedIndex()
	if find() {
		return true, ""
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	c, known := s.commitIndex(ctx, pos)
	if !known {
		return false, "this member cannot tell whether it exists: no fresh commit index from a leader"
	}
	if at >= c {
		return false, ""
	}
	// Past c, or every entry up to c holds no command: the state is the
	// one at c or newer.
	if _, err := pos.WaitApplied(ctx, c); err != nil {
		return false, "this member is still applying the cluster's log"
	}
	return find(), ""
}

// commitIndex is the cluster's commit index as this member knows it; a new
// leader waits for its term's barrier (its first commit) to learn it.
func (s *server) commitIndex(ctx context.Context, pos Positions) (uint64, bool) {
	if s.b.IsLeader() {
		_ = pos.WaitLeading(ctx) // LeaderCommit says whether it got there
	}
	return pos.LeaderCommit()
}

// missing is the answer for a name the state does not hold: NOT_FOUND when
// the lookup's miss was authoritative, else NOT_READY (retryable on another
// member): what it lacks may exist.
func (s *server) missing(nf *Error, behind string) error {
	pos, has := s.b.(Positions)
	if behind == "" || !has {
		return nf
	}
	return notReady(behind+" ("+nf.Message+")", pos)
}

// lookupValue is lookup of a find that answers the value it found.
func lookupValue[T any](ctx context.Context, s *server, find func() (T, bool)) (v T, ok bool, behind string) {
	ok, behind = s.lookup(ctx, func() bool {
		var found bool
		v, found = find()
		return found
	})
	return v, ok, behind
}

// resolve looks a reference up with find (an id, else a name, in its
// scope) and answers a miss with nf's error (missing).
func resolve[T any](ctx context.Context, s *server, find func() (T, bool), nf func() *Error) (T, error) {
	v, ok, behind := lookupValue(ctx, s, find)
	if ok {
		return v, nil
	}
	return v, s.missing(nf(), behind)
}

// namespace resolves the request's {ns} for a caller who may view it
// (authz.go: visible).
func (s *server) namespace(r *http.Request) (state.Namespace, error) {
	return s.visible(r, r.PathValue("ns"))
}

func (s *server) namespaceIn(ctx context.Context, ref string) (state.Namespace, error) {
	m := s.b.Machine()
	return resolve(ctx, s, func() (state.Namespace, bool) {
		if ns, ok := m.Namespace(ref); ok {
			return ns, true
		}
		return m.NamespaceByName(ref)
	}, func() *Error { return notFound("namespace %q not found", ref) })
}

func (s *server) configurationRef(ctx context.Context, ns state.Namespace, ref string) (state.Configuration, error) {
	m := s.b.Machine()
	return resolve(ctx, s, func() (state.Configuration, bool) {
		if c, ok := m.Configuration(ref); ok && c.NamespaceID == ns.ID {
			return c, true
		}
		return m.ConfigurationByName(ns.ID, ref)
	}, func() *Error { return notFound("configuration %q not found in namespace %q", ref, ns.Name) })
}

func (s *server) agentRef(ctx context.Context, ns state.Namespace, ref string) (state.Agent, error) {
	m := s.b.Machine()
	return resolve(ctx, s, func() (state.Agent, bool) {
		if a, ok := m.Agent(ref); ok && a.NamespaceID == ns.ID {
			return a, true
		}
		return m.AgentByName(ns.ID, ref)
	}, func() *Error { return notFound("agent %q not found in namespace %q", ref, ns.Name) })
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
