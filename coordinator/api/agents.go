package api

import (
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

func (s *server) listAgents(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorOf(r)
	if err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	var out []state.Agent
	visible := s.agentVisibility(r)
	for _, a := range s.b.Machine().Agents(ns.ID) {
		if sel.Matches(a.Labels) && visible(a.ID) {
			out = append(out, a)
		}
	}
	writeJSON(w, http.StatusOK, byName(listOf(out, s.agentView), func(a wire.Agent) string { return a.Name }))
	return nil
}

func (s *server) getAgent(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.agentView(a))
	return nil
}

// agentFor resolves {ns} and {agent} and authorizes act on the Agent.
func (s *server) agentFor(r *http.Request, act iam.Action) (state.Namespace, state.Agent, error) {
	ns, a, err := s.agent(r)
	if err != nil {
		return ns, a, err
	}
	return ns, a, s.refused(r, onAgent(ns, a), s.decider().OnAgent(r.Context(), principal(r), act, ns, a))
}

func (s *server) createAgent(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateAgent
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	if err := validName("agent", req.Name); err != nil {
		return err
	}
	if err := validLabels(req.Labels); err != nil {
		return err
	}
	if req.ExecutionMode == "" {
		req.ExecutionMode = state.ModeEmbedded
	}
	if err := validMode(req.ExecutionMode); err != nil {
		return err
	}
	if err := validHarnessAuth(req.HarnessAuth); err != nil {
		return err
	}
	if err := validComputeID(req.ComputeID); err != nil {
		return err
	}
	if err := validPlugins(req.Plugins); err != nil {
		return err
	}
	rollback, err := statePolicy(req.Rollback)
	if err != nil {
		return err
	}
	if err := validResources(req.Resources); err != nil {
		return err
	}
	if req.Configuration == "" {
		return invalid("configuration is required")
	}
	cfg, err := s.configurationRef(r.Context(), ns, req.Configuration)
	if err != nil {
		return err
	}
	draft := state.Agent{Name: req.Name, NamespaceID: ns.ID, ExecutionMode: req.ExecutionMode,
		HarnessAuth: stateHarnessAuth(req.HarnessAuth), ComputeID: req.ComputeID}
	spName := req.ServicePrincipal
	if spName == "" {
		spName = req.Name
	}
	if err := s.allow(r, iam.CreateAgent, iam.AgentResource(ns.Name, draft, cfg.Name, spName), ns.ID); err != nil {
		return err
	}
	if err := s.referenceInNamespace(r, ns, req.HarnessAuth, auditAt{ns: ns.ID}, iam.CreateAgent); err != nil {
		return err
	}
	spID, own := newID(), true
	if req.ServicePrincipal != "" {
		sp, ok := s.b.Machine().ServicePrincipalByName(ns.ID, req.ServicePrincipal)
		if !ok {
			return notFound("service principal %q not found in namespace %q", req.ServicePrincipal, ns.Name)
		}
		if err := s.refused(r, auditAt{ns: ns.ID}, s.decider().UseServicePrincipal(r.Context(), principal(r), ns, sp, req.Name)); err != nil {
			return err
		}
		spID, own = sp.ID, false
	}
	for _, a := range s.b.Machine().Agents(ns.ID) {
		if a.Name == req.Name {
			return conflict("agent name %q is taken in namespace %q", req.Name, ns.Name)
		}
	}
	return commit(s, w, r, http.StatusCreated, answerCreateAgent, state.CreateAgent{ID: newID(), NamespaceID: ns.ID,
		Name: req.Name, ExecutionMode: req.ExecutionMode, ConfigurationID: cfg.ID,
		HarnessAuth: stateHarnessAuth(req.HarnessAuth), ComputeID: req.ComputeID, Plugins: req.Plugins, Rollback: rollback,
		ServicePrincipalID: spID, OwnServicePrincipal: own, Resources: stateResources(req.Resources), Labels: req.Labels})
}

func (s *server) updateAgent(w http.ResponseWriter, r *http.Request) error {
	var req wire.UpdateAgent
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, a, err := s.agentFor(r, iam.UpdateAgent)
	if err != nil {
		return err
	}
	cmd := state.UpdateAgent{AgentID: a.ID, ExecutionMode: req.ExecutionMode, HarnessAuth: stateHarnessAuth(req.HarnessAuth),
		ComputeID: req.ComputeID, Plugins: req.Plugins}
	if req.ExecutionMode != nil {
		if err := validMode(*req.ExecutionMode); err != nil {
			return err
		}
	}
	if err := validHarnessAuth(req.HarnessAuth); err != nil {
		return err
	}
	if req.ComputeID != nil {
		if err := validComputeID(*req.ComputeID); err != nil {
			return err
		}
	}
	if req.Plugins != nil {
		if err := validPlugins(*req.Plugins); err != nil {
			return err
		}
	}
	if cmd.Rollback, err = statePolicy(req.Rollback); err != nil {
		return err
	}
	if err := validResources(req.Resources); err != nil {
		return err
	}
	cmd.Resources = stateResources(req.Resources)
	if req.Configuration != nil {
		cfg, err := s.configurationRef(r.Context(), ns, *req.Configuration)
		if err != nil {
			return err
		}
		cmd.ConfigurationID = &cfg.ID
	}
	// Authorized on the Agent as it is (agentFor) and as the update would
	// make it: a Restriction on the requested attributes (say, no dedicated
	// mode) is not bypassed by updating an Agent into them.
	if err := s.authorize(r, iam.UpdateAgent, s.agentRes(ns, cmd.Applied(a)), onAgent(ns, a), nil, false); err != nil {
		return err
	}
	if err := s.referenceInNamespace(r, ns, req.HarnessAuth, onAgent(ns, a), iam.UpdateAgent); err != nil {
		return err
	}
	if a.Deleting {
		return conflict("agent %q is being deleted", a.Name)
	}
	return commit(s, w, r, http.StatusOK, answerUpdateAgent, cmd)
}

func (s *server) deleteAgent(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.DeleteAgent)
	if err != nil {
		return err
	}
	if a.Deleting {
		return conflict("agent %q is already being deleted", a.Name)
	}
	return commit(s, w, r, http.StatusAccepted, answerRequestDelete, state.RequestDelete{AgentID: a.ID, WorkID: newID(),
		MaxAttempts: s.cfg.MaxAttempts, ActorGroups: principal(r).ExternalGroups()})
}

func (s *server) stopAgent(w http.ResponseWriter, r *http.Request) error {
	if err := s.decodeOptionalBody(w, r, &struct{}{}); err != nil {
		return err
	}
	_, a, err := s.agentFor(r, iam.StopAgent)
	if err != nil {
		return err
	}
	if a.Deleting {
		return conflict("agent %q is being deleted", a.Name)
	}
	return commit(s, w, r, http.StatusAccepted, answerRequestStop, state.RequestStop{AgentID: a.ID, WorkID: newID(),
		MaxAttempts: s.cfg.MaxAttempts, ActorGroups: principal(r).ExternalGroups()})
}

func (s *server) listRevisions(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(s.b.Machine().Revisions(a.ID), s.revisionView))
	return nil
}

func (s *server) getRevision(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	ref := r.PathValue("rev")
	m := s.b.Machine()
	if rev, ok := m.Revision(ref); ok && rev.AgentID == a.ID {
		writeJSON(w, http.StatusOK, s.revisionView(rev))
		return nil
	}
	// A revision number works too.
	for _, rev := range m.Revisions(a.ID) {
		if formatInt(rev.Number) == ref {
			writeJSON(w, http.StatusOK, s.revisionView(rev))
			return nil
		}
	}
	return notFound("revision %q not found for agent %q", ref, a.Name)
}

func (s *server) agentWork(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	f, err := workFilter(r)
	if err != nil {
		return err
	}
	f.AgentID = a.ID
	writeJSON(w, http.StatusOK, listOf(s.b.Machine().WorkItems(f), s.workView))
	return nil
}
