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

// barrierer is implemented by the Raft store: Barrier waits until every
// entry committed before the call is applied to this leader's state.
type barrierer interface {
	Barrier(ctx context.Context) error
}

// caughtUp is called before a lookup answers "not found": it lets the state
// catch up with what the cluster has committed and reports whether the
// lookup is worth repeating. On a leader it runs a Raft barrier (just after
// a leadership change, entries of the previous term can be committed but
// not yet applied here); on a follower it waits for the leader's commit
// index as this member knows it, so a member catching up never reports as
// missing what the cluster has. A ?stale read asked for this member's state
// as it is and skips it.
func (s *server) caughtUp(ctx context.Context) bool {
	if m, ok := ctx.Value(readModeKey{}).(readMode); ok && m.stale {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	if b, ok := s.b.(barrierer); ok && s.b.IsLeader() {
		return b.Barrier(ctx) == nil
	}
	pos, ok := s.b.(Positions)
	if !ok {
		return false
	}
	c, ok := pos.LeaderCommit()
	before := pos.AppliedIndex()
	if !ok || before >= c {
		return false
	}
	_, err := pos.WaitApplied(ctx, c)
	return err == nil && pos.AppliedIndex() > before
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
	return state.Namespace{}, notFound("namespace %q not found", ref)
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
	return state.Configuration{}, notFound("configuration %q not found in namespace %q", ref, ns.Name)
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
	return state.Agent{}, notFound("agent %q not found in namespace %q", ref, ns.Name)
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
