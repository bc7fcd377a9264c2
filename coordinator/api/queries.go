package api

import (
	"net/http"
	"sort"
	"strconv"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
)

// Audit page sizes.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

var (
	workStates = map[string]bool{state.WorkQueued: true, state.WorkClaimed: true, state.WorkCompleted: true,
		state.WorkFailed: true, state.WorkSuperseded: true}
	workKinds = map[string]bool{state.WorkActivate: true, state.WorkStop: true, state.WorkDelete: true}
)

// workFilter reads ?state=&kind=&agent= and rejects unknown parameters.
func workFilter(r *http.Request) (state.WorkFilter, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "state" && k != "kind" && k != "agent" {
			return state.WorkFilter{}, invalid("unknown query parameter %q", k)
		}
	}
	f := state.WorkFilter{State: q.Get("state"), Kind: q.Get("kind"), AgentID: q.Get("agent")}
	if f.State != "" && !workStates[f.State] {
		return f, invalid("state %q is not one of queued, claimed, completed, failed, superseded", f.State)
	}
	if f.Kind != "" && !workKinds[f.Kind] {
		return f, invalid("kind %q is not one of activate, stop, delete", f.Kind)
	}
	return f, nil
}

func (s *server) listWork(w http.ResponseWriter, r *http.Request) error {
	f, err := workFilter(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(s.b.Machine().WorkItems(f), wireWork))
	return nil
}

func (s *server) getWork(w http.ResponseWriter, r *http.Request) error {
	wk, ok := s.b.Machine().Work(r.PathValue("id"))
	if !ok {
		return notFound("work %q not found", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, wireWork(wk))
	return nil
}

func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "after" && k != "limit" {
			return invalid("unknown query parameter %q", k)
		}
	}
	after := int64(0)
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return invalid("after must be a non-negative integer")
		}
		after = n
	}
	limit := defaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			return invalid("limit must be an integer between 1 and %d", maxAuditLimit)
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, listOf(s.b.Machine().Audit(after, limit), wireAudit))
	return nil
}

// status summarizes the cluster and every Agent for occ status.
func (s *server) status(w http.ResponseWriter, r *http.Request) error {
	cl, err := s.clusterInfo(r)
	if err != nil {
		return err
	}
	m := s.b.Machine()
	out := wire.Status{Cluster: cl, Agents: []wire.AgentSummary{}}
	nss := m.Namespaces()
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	for _, ns := range nss {
		agents := m.Agents(ns.ID)
		sort.Slice(agents, func(i, j int) bool { return agents[i].Name < agents[j].Name })
		for _, a := range agents {
			st := agentStatus(m, a)
			out.Agents = append(out.Agents, wire.AgentSummary{Namespace: ns.Name, Name: a.Name, ID: a.ID,
				ExecutionMode: a.ExecutionMode, ActiveRevisionID: a.ActiveRevisionID,
				RevisionCount: a.RevisionCount, Deleting: a.Deleting, State: st.State, Reason: st.Reason})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
