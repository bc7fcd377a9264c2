package api

import (
	"net/http"
	"regexp"
	"slices"
	"sort"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// The console's routes and the actions they authorize first (routeActions).
func init() {
	const ns, agent = "/v1/namespaces/{ns}", "/v1/namespaces/{ns}/agents/{agent}"
	for route, act := range map[string]iam.Action{
		"GET " + ns + "/overview":           iam.ViewAgent,
		"GET " + agent + "/overview":        iam.ViewAgent,
		"GET " + agent + "/logs":            iam.ViewAgent,
		"GET " + agent + "/files":           iam.ViewAgent,
		"GET " + agent + "/files/{name}":    iam.ViewAgent,
		"GET " + agent + "/files/{path...}": iam.ViewAgent,
		// writing an Agent's workspace documents changes what its next turn
		// does: those who may update the Agent may
		"PUT " + agent + "/files/{name}":    iam.UpdateAgent,
		"PUT " + agent + "/files/{path...}": iam.UpdateAgent,
		// what the caller may do (access.go)
		"GET " + ns + "/access":    iam.ViewNamespace,
		"GET " + agent + "/access": iam.ViewAgent,
	} {
		routeActions[route] = act
	}
}

// Overviews: what the console's lists and Agent page show, in one request
// each — the Agents with a derived state, revision numbers, the phase of
// in-flight work and the latest failure spelled out.

// consoleRoutes registers the routes the console added to the API: the
// overviews, the Agent's workspace documents and what the caller may do.
func (s *server) consoleRoutes(ns, agent string) {
	s.read("GET "+ns+"/overview", s.namespaceOverview)
	s.read("GET "+agent+"/overview", s.agentOverview)
	s.workspaceRoutes(agent)
	s.accessRoutes(ns, agent)
}

// workIndex is the open (queued or claimed) work of every Agent, indexed
// once for a whole list: the newest item, and the activate items in
// creation order (what the observed state reads).
type workIndex struct {
	newest   map[string]state.Work
	activate map[string][]state.Work
}

func inflight(m *state.Machine) workIndex {
	ix := workIndex{newest: map[string]state.Work{}, activate: map[string][]state.Work{}}
	var open []state.Work
	for _, st := range []string{state.WorkQueued, state.WorkClaimed} {
		open = append(open, m.WorkItems(state.WorkFilter{State: st})...)
	}
	sort.SliceStable(open, func(i, j int) bool { return open[i].CreatedAt.Before(open[j].CreatedAt) })
	for _, w := range open {
		ix.newest[w.AgentID] = w
		if w.Kind == state.WorkActivate {
			ix.activate[w.AgentID] = append(ix.activate[w.AgentID], w)
		}
	}
	return ix
}

// heldRE reads the engine's failure detail of a held runtime failure:
// "held <CODE>" or "held <CODE> cause <KIND>:<detail>".
var heldRE = regexp.MustCompile(`^held ([A-Z][A-Z0-9_]*)(?: cause ([A-Z][A-Z0-9_]*):(\S*))?$`)

// heldOf spells out a revision's held failure.
func heldOf(detail string) (held, kind, cause string) {
	if m := heldRE.FindStringSubmatch(detail); m != nil {
		return m[1], m[2], m[3]
	}
	return "", "", ""
}

// overviewOf is the Agent with its observed state (truth.go's agentStatus),
// revision numbers, in-flight work and the failure it shows: the active
// revision's held code while it is held, else the latest revision's failure.
func (s *server) overviewOf(m *state.Machine, a state.Agent, work workIndex, cfgName string) wire.AgentOverview {
	o := wire.AgentOverview{Agent: s.agentViewWith(m, a, agentStatusWith(m, a, work.activate[a.ID])), Configuration: cfgName}
	if st := o.Agent.Status; st != nil {
		o.State, o.HeldCode, o.CauseKind, o.CauseDetail = st.State, st.HeldCode, st.CauseKind, st.CauseDetail
	}
	if a.ActiveRevisionID != "" {
		if active, ok := m.Revision(a.ActiveRevisionID); ok {
			o.ActiveRevision = active.Number
		}
	}
	if latest, ok := m.LatestRevision(a.ID); ok {
		o.LatestRevision = latest.Number
		if latest.Status == state.RevisionFailed && latest.Number > o.ActiveRevision {
			o.FailureCode = latest.FailureCode
			if o.HeldCode == "" {
				sum := revisionSummary(m, latest)
				o.HeldCode, o.CauseKind, o.CauseDetail = sum.HeldCode, sum.CauseKind, sum.CauseDetail
			}
		}
	}
	if w, busy := work.newest[a.ID]; busy {
		ww := s.workView(w)
		o.Work, o.Phase = &ww, w.Phase
	}
	return o
}

func (s *server) namespaceOverview(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	m := s.b.Machine()
	cfgs := map[string]string{}
	for _, c := range m.Configurations(ns.ID) {
		cfgs[c.ID] = c.Name
	}
	work := inflight(m)
	visible := s.agentVisibility(r)
	var agents []state.Agent
	for _, a := range m.Agents(ns.ID) {
		if visible(a.ID) {
			agents = append(agents, a)
		}
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i].Name < agents[j].Name })
	out := wire.NamespaceOverview{Namespace: wireNamespace(ns), Agents: make([]wire.AgentOverview, 0, len(agents))}
	for _, a := range agents {
		out.Agents = append(out.Agents, s.overviewOf(m, a, work, cfgs[a.ConfigurationID]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) agentOverview(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	m := s.b.Machine()
	cfgName := ""
	if c, ok := m.Configuration(a.ConfigurationID); ok {
		cfgName = c.Name
	}
	out := wire.AgentDetail{AgentOverview: s.overviewOf(m, a, inflight(m), cfgName),
		Revisions: []wire.RevisionSummary{}, Work: []wire.Work{}, Audit: []wire.AuditRecord{}}
	revs := m.Revisions(a.ID)
	for i := len(revs) - 1; i >= 0; i-- {
		out.Revisions = append(out.Revisions, revisionSummary(m, revs[i]))
	}
	ws := m.WorkItems(state.WorkFilter{AgentID: a.ID})
	for i := len(ws) - 1; i >= 0 && len(out.Work) < wire.DetailHistory; i-- {
		out.Work = append(out.Work, s.workView(ws[i]))
	}
	out.Audit = agentAudit(m, a.ID)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// agentAudit is the Agent's newest audit records, newest first.
func agentAudit(m *state.Machine, agentID string) []wire.AuditRecord {
	var keep []wire.AuditRecord
	for after := int64(0); ; {
		page := m.Audit(after, maxAuditLimit)
		for _, rec := range page {
			if rec.AgentID == agentID {
				keep = append(keep, wireAudit(rec))
				if len(keep) > wire.DetailHistory {
					keep = keep[1:]
				}
			}
			after = rec.Seq
		}
		if len(page) < maxAuditLimit {
			break
		}
	}
	slices.Reverse(keep)
	if keep == nil {
		keep = []wire.AuditRecord{}
	}
	return keep
}

func revisionSummary(m *state.Machine, r state.Revision) wire.RevisionSummary {
	out := wire.RevisionSummary{ID: r.ID, Number: r.Number, Harness: wire.HarnessIdentity{ID: r.Harness.ID,
		Version: r.Harness.Version}, Mode: r.Mode, Status: r.Status, FailureCode: r.FailureCode,
		FailureDetail: r.FailureDetail, ConfigurationGeneration: r.ConfigurationGeneration, CreatedAt: r.CreatedAt}
	// what the engine recorded of the runtime, else the failure's detail
	rt, ok := m.RevisionRuntime(r.ID)
	if ok && rt.HeldCode != "" {
		out.HeldCode, out.CauseKind, out.CauseDetail = rt.HeldCode, rt.CauseKind, rt.CauseDetail
	} else {
		out.HeldCode, out.CauseKind, out.CauseDetail = heldOf(r.FailureDetail)
	}
	if ok {
		out.Credential, out.Diagnostics = rt.Credential, rt.Diagnostics
	}
	return out
}
