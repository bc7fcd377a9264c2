package api

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
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
	v := s.agentVisibility(r)
	var out []state.Work
	for _, wk := range s.b.Machine().WorkItems(f) {
		if v(wk.AgentID) {
			out = append(out, wk)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, s.workView))
	return nil
}

// getWork answers 404 for work the caller may not view, as for missing
// work: its id tells nothing about Namespaces the caller cannot see.
func (s *server) getWork(w http.ResponseWriter, r *http.Request) error {
	wk, ok := s.b.Machine().Work(r.PathValue("id"))
	if !ok || !s.agentVisibility(r)(wk.AgentID) {
		return notFound("work %q not found", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, s.workView(wk))
	return nil
}

// agentVisibility returns a memoized ViewAgent check by Agent id (an Agent
// that no longer exists is visible to cluster-admins only). While no
// Restriction applies to ViewAgent, the roles decide by Namespace alone and
// one decision per Namespace serves all its Agents.
func (s *server) agentVisibility(r *http.Request) func(agentID string) bool {
	m := s.b.Machine()
	memo := map[string]bool{}
	rd, ok := s.iam.(iam.RolesDecider)
	byNamespace := ok && rd.RolesDecide(iam.ViewAgent)
	nsMemo := map[string]bool{}
	return func(id string) bool {
		if v, ok := memo[id]; ok {
			return v
		}
		var v bool
		a, ok := m.Agent(id)
		ns, nsOK := m.Namespace(a.NamespaceID)
		switch {
		case !ok || !nsOK:
			v = s.can(r, iam.ViewAudit, iam.ClusterRes())
		case byNamespace:
			known := false
			if v, known = nsMemo[ns.ID]; !known {
				v = s.can(r, iam.ViewAgent, iam.Scoped(iam.TypeAgent, ns.Name, a.Name, nil))
				nsMemo[ns.ID] = v
			}
		default:
			v = s.can(r, iam.ViewAgent, s.agentRes(ns, a))
		}
		memo[id] = v
		return v
	}
}

// Audit list orders (?order=).
const (
	auditOldest = "oldest"
	auditNewest = "newest"
)

// listAudit reads ?after=&before=&order=&limit=&actor=&namespace=&action=
// &since=&until= and answers the records the caller may view: a
// Namespace's to those who may view its audit, cluster-wide ones to
// cluster-admins. order=oldest (the default, so that after= pages forward
// as it always did) answers the first records in Seq order; order=newest
// the last ones, newest first, and before=SEQ (the last Seq of a page)
// pages back.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	known := map[string]bool{"after": true, "before": true, "order": true, "limit": true, "actor": true,
		"namespace": true, "action": true, "since": true, "until": true}
	for k := range q {
		if !known[k] {
			return invalid("unknown query parameter %q", k)
		}
	}
	f := state.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action")}
	switch q.Get("order") {
	case "", auditOldest:
	case auditNewest:
		f.Newest = true
	default:
		return invalid("order must be %s or %s", auditOldest, auditNewest)
	}
	for name, dst := range map[string]*int64{"after": &f.After, "before": &f.Before} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return invalid("%s must be a non-negative integer", name)
			}
			*dst = n
		}
	}
	limit := defaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			return invalid("limit must be an integer between 1 and %d", maxAuditLimit)
		}
		limit = n
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return invalid("%s must be an RFC 3339 time", name)
			}
			*dst = t
		}
	}
	m := s.b.Machine()
	if ref := q.Get("namespace"); ref != "" {
		ns, err := s.visible(r, ref)
		if err != nil {
			return err
		}
		f.NamespaceID = ns.ID
	}
	memo := map[string]bool{}
	f.Visible = func(nsID string) bool {
		if v, ok := memo[nsID]; ok {
			return v
		}
		res := iam.ClusterRes()
		if nsID != "" {
			ns, ok := m.Namespace(nsID)
			if !ok {
				memo[nsID] = false
				return false
			}
			res = iam.NamespaceRes(ns.Name)
		}
		memo[nsID] = s.can(r, iam.ViewAudit, res)
		return memo[nsID]
	}
	writeJSON(w, http.StatusOK, listOf(m.AuditQuery(f, limit), s.auditView))
	return nil
}

// status summarizes the cluster (for callers who may view it) and every
// Agent the caller may view, for occ status.
func (s *server) status(w http.ResponseWriter, r *http.Request) error {
	out := wire.Status{Agents: []wire.AgentSummary{}}
	if s.can(r, iam.ViewCluster, iam.ClusterRes()) {
		cl, err := s.clusterInfo(r)
		if err != nil {
			return err
		}
		out.Cluster = &cl
	}
	m := s.b.Machine()
	nss := m.Namespaces()
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	visible := s.agentVisibility(r)
	for _, ns := range nss {
		if !s.can(r, iam.ViewNamespace, iam.NamespaceRes(ns.Name)) {
			continue
		}
		agents := m.Agents(ns.ID)
		sort.Slice(agents, func(i, j int) bool { return agents[i].Name < agents[j].Name })
		for _, a := range agents {
			if !visible(a.ID) {
				continue
			}
			st := agentStatus(m, a)
			out.Agents = append(out.Agents, wire.AgentSummary{Namespace: ns.Name, Name: a.Name, ID: a.ID,
				ExecutionMode: a.ExecutionMode, ActiveRevisionID: a.ActiveRevisionID,
				RevisionCount: a.RevisionCount, Deleting: a.Deleting, State: st.State, Reason: st.Reason,
				ActiveRevision: m.NamesOf("", "", "", a.ActiveRevisionID).Revision})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
