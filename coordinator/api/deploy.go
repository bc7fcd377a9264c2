package api

import (
	"net/http"
	"time"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// deployAgent authorizes the deploy of the exact Agent and every reference
// it uses (docs/design/seed-002.md: its ServicePrincipal and credential source each get
// their own decision), runs admission on the leader against the Agent, its
// Configuration and the installation, enforces the Restrictions on the
// admitted facts, then freezes the revision (with the Agent's
// ServicePrincipal) and enqueues its activate work, recording the actor, in
// one AdmitRevision entry (202). Apply refuses the entry when the Agent or
// Configuration changed meanwhile.
func (s *server) deployAgent(w http.ResponseWriter, r *http.Request) error {
	var req wire.Deploy
	if err := s.decodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	ns, a, err := s.agent(r)
	if err != nil {
		return err
	}
	rev, err := s.admitDeploy(r, ns, a, req.LogLevel)
	if err != nil {
		return err
	}
	return s.commit(w, r, http.StatusAccepted, state.CmdAdmitRevision, state.AdmitRevision{Revision: rev, WorkID: newID(),
		MaxAttempts: s.cfg.MaxAttempts, ActorGroups: principal(r).ExternalGroups()})
}

// admitDeploy is the deploy's decision without its effect: it authorizes
// the deploy of a and its references, admits the revision and enforces the
// Restrictions on the admitted facts, and returns the revision to freeze.
// GET …/access asks it too, so a page offers Deploy exactly when the API
// would accept it.
func (s *server) admitDeploy(r *http.Request, ns state.Namespace, a state.Agent, logLevel string) (state.Revision, error) {
	agentRes := s.agentRes(ns, a)
	// The permission first, before admission can tell the caller anything;
	// the Restrictions once the admitted facts are known.
	if err := s.authorize(r, iam.DeployAgent, agentRes, onAgent(ns, a), nil, true); err != nil {
		return state.Revision{}, err
	}
	if err := s.allowReferences(r, ns, a); err != nil {
		return state.Revision{}, err
	}
	if a.Deleting {
		return state.Revision{}, conflict("agent %q is being deleted", a.Name)
	}
	m := s.b.Machine()
	cfg, ok := m.Configuration(a.ConfigurationID)
	if !ok || cfg.NamespaceID != ns.ID {
		return state.Revision{}, notFound("configuration %q of agent %q not found", a.ConfigurationID, a.Name)
	}
	computeID, err := s.computeID(a)
	if err != nil {
		return state.Revision{}, err
	}
	out, err := admission.Admit(s.admissionInput(a, cfg, m.Installation(), logLevel))
	if err != nil {
		return state.Revision{}, err
	}
	rev := state.Revision{
		ID: newID(), AgentID: a.ID, NamespaceID: ns.ID, Document: out.Document,
		ConfigurationID: cfg.ID, ConfigurationGeneration: cfg.Generation,
		Harness: out.Harness, Mode: out.Mode, ComputeID: computeID,
		HarnessAuth: a.HarnessAuth, Plugins: a.Plugins, Status: state.RevisionPending,
		CreatedAt: time.Now().UTC(), ServicePrincipalID: a.ServicePrincipalID,
	}
	if err := s.authorize(r, iam.DeployAgent, agentRes, onAgent(ns, a), iam.DeployContext(rev, out), false); err != nil {
		return state.Revision{}, err
	}
	return rev, nil
}

// allowReferences authorizes the Agent's separately protected references:
// its ServicePrincipal and the credential source its harnessAuth names.
func (s *server) allowReferences(r *http.Request, ns state.Namespace, a state.Agent) error {
	m := s.b.Machine()
	if a.ServicePrincipalID != "" {
		sp, ok := m.ServicePrincipal(a.ServicePrincipalID)
		if !ok || sp.NamespaceID != ns.ID {
			return conflict("the service principal of agent %q is gone", a.Name)
		}
		if err := s.authorize(r, iam.UseServicePrincipal, iam.ServicePrincipalResource(ns.Name, sp, a.Name), onAgent(ns, a), nil, false); err != nil {
			return err
		}
	}
	if res, ok := iam.CredentialSourceResource(ns.Name, a.HarnessAuth); ok {
		if err := s.authorize(r, iam.UseCredentialSource, res, onAgent(ns, a), nil, false); err != nil {
			return err
		}
	}
	return nil
}
