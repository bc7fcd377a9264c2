package api

import (
	"cmp"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
)

// Views of truthful activation (issue 14): an Agent with its observed state
// and rollback policy, a revision with what its runtime is doing.

// agentView converts an Agent and adds its observed status and policy.
func (s *server) agentView(a state.Agent) wire.Agent {
	m := s.b.Machine()
	return s.agentViewWith(m, a, agentStatus(m, a))
}

// agentViewWith converts an Agent with the status already derived.
func (s *server) agentViewWith(m *state.Machine, a state.Agent, st wire.AgentStatus) wire.Agent {
	out := s.wireAgentOf(a)
	out.Status = &st
	if p, ok := m.RollbackPolicyOf(a.ID); ok {
		out.Rollback = &wire.RollbackPolicy{Enabled: p.Enabled, Window: p.Window.String()}
	}
	return out
}

// revisionView converts a revision and adds its runtime record and the
// progress of its latest activate work.
func (s *server) revisionView(r state.Revision) wire.Revision {
	m := s.b.Machine()
	out := wireRevision(r)
	rt, ok := m.RevisionRuntime(r.ID)
	w, _ := m.LatestRevisionWork(r.ID, state.WorkActivate)
	if !ok && w.ID == "" {
		return out
	}
	v := &wire.RevisionRuntime{Phase: rt.Phase, Reason: rt.Reason, HeldCode: rt.HeldCode, CauseKind: rt.CauseKind,
		CauseDetail: rt.CauseDetail, Credential: rt.Credential, Diagnostics: rt.Diagnostics,
		PreviousRevisionID: rt.PreviousRevisionID, FinalizationIncomplete: rt.Unfinalized, Rollback: rt.Rollback,
		RollbackCause: rt.RollbackCause, WorkPhase: w.Phase, LastCode: w.LastCode, LastDetail: w.LastDetail}
	if !rt.ActivatedAt.IsZero() {
		v.ActivatedAt = rt.ActivatedAt.Format(time.RFC3339Nano)
	}
	// The active revision's runtime is what the health watcher observes.
	if a, ok := m.Agent(r.AgentID); ok && a.ActiveRevisionID == r.ID {
		if h, ok := m.Health(a.ID); ok && h.RevisionID == r.ID {
			// The phase recorded before the commit is history now (an
			// embedded replacement probed before its cutover).
			v.Phase = ""
			v.HeldCode, v.CauseKind, v.CauseDetail = h.HeldCode, h.CauseKind, h.CauseDetail
			if !h.Ready {
				v.Reason = h.Reason
			} else {
				v.Reason = ""
			}
		}
	}
	out.Runtime = v
	return out
}

// agentStatus derives an Agent's state: deleting; activating while
// activate work is open (or the active revision was not observed yet);
// serving or degraded from the observed readiness of the active revision;
// failed or stopped without one.
func agentStatus(m *state.Machine, a state.Agent) wire.AgentStatus {
	return agentStatusWith(m, a, m.OpenWorkItems(state.WorkFilter{AgentID: a.ID, Kind: state.WorkActivate}))
}

// agentStatusWith is agentStatus given the Agent's activate work in
// creation order (a list page indexes it once for every Agent); only its
// open (queued or claimed) items matter.
func agentStatusWith(m *state.Machine, a state.Agent, activate []state.Work) wire.AgentStatus {
	if a.Deleting {
		return wire.AgentStatus{State: wire.AgentDeleting}
	}
	var open *state.Work
	for _, w := range activate {
		if (w.State == state.WorkQueued || w.State == state.WorkClaimed) && w.RevisionID != a.ActiveRevisionID {
			open = &w
		}
	}
	h, observed := m.Health(a.ID)
	observed = observed && a.ActiveRevisionID != "" && h.RevisionID == a.ActiveRevisionID
	st := wire.AgentStatus{}
	if observed {
		st.HeldCode, st.CauseKind, st.CauseDetail = h.HeldCode, h.CauseKind, h.CauseDetail
		st.ObservedAt = h.Since.Format(time.RFC3339Nano)
		if h.Ready {
			st.ServingRevisionID = a.ActiveRevisionID
		}
	}
	switch {
	case open != nil:
		st.State, st.PendingRevisionID = wire.AgentActivating, open.RevisionID
		st.Reason = open.LastCode
	case a.ActiveRevisionID == "":
		st.State = wire.AgentStopped
		if latest, ok := m.LatestRevision(a.ID); ok && latest.Status == state.RevisionFailed {
			st.State, st.Reason = wire.AgentFailed, latest.FailureCode
		}
	case !observed:
		st.State, st.Reason = wire.AgentActivating, "readiness-not-observed"
	case !h.Ready && !h.EverReady && h.HeldCode == "":
		// committed active but still starting (an embedded replacement
		// starts at the cutover): not serving yet, and not degraded either
		st.State, st.Reason = wire.AgentActivating, cmp.Or(h.Reason, "starting")
	case h.Ready:
		st.State = wire.AgentServing
	default:
		st.State, st.Reason = wire.AgentDegraded, h.Reason
		if h.HeldCode != "" {
			st.Reason = h.HeldCode
		}
	}
	return st
}

// statePolicy converts a request's rollback policy.
func statePolicy(p *wire.RollbackPolicy) (*state.RollbackPolicy, error) {
	if p == nil {
		return nil, nil
	}
	if !p.Enabled {
		return &state.RollbackPolicy{}, nil
	}
	w := DefaultRollbackWindow
	if p.Window != "" {
		d, err := time.ParseDuration(p.Window)
		if err != nil || d <= 0 || d > state.MaxRollbackWindow {
			return nil, invalid("rollback.window %q must be a duration in (0, %s]", p.Window, state.MaxRollbackWindow)
		}
		w = d
	}
	return &state.RollbackPolicy{Enabled: true, Window: w}, nil
}

// DefaultRollbackWindow is the rollback window when a policy names none:
// long enough for an OpenClaw gateway's model probe and start (~30–75 s on
// a small machine) to reach readiness.
const DefaultRollbackWindow = 5 * time.Minute
