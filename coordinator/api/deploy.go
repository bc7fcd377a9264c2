package api

import (
	"net/http"
	"time"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/state"
)

// deployAgent runs admission on the leader against the Agent, its
// Configuration and the installation, then freezes the admitted revision
// and enqueues its activate work in one AdmitRevision entry (202). Apply
// refuses the entry when the Agent or Configuration changed meanwhile.
func (s *server) deployAgent(w http.ResponseWriter, r *http.Request) error {
	var req wire.Deploy
	if err := s.decodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	ns, a, err := s.agent(r)
	if err != nil {
		return err
	}
	if a.Deleting {
		return conflict("agent %q is being deleted", a.Name)
	}
	m := s.b.Machine()
	cfg, ok := m.Configuration(a.ConfigurationID)
	if !ok || cfg.NamespaceID != ns.ID {
		return notFound("configuration %q of agent %q not found", a.ConfigurationID, a.Name)
	}
	computeID, err := s.computeID(a)
	if err != nil {
		return err
	}
	out, err := admission.Admit(s.admissionInput(a, cfg, m.Installation(), req.LogLevel))
	if err != nil {
		return err
	}
	rev := state.Revision{
		ID: newID(), AgentID: a.ID, NamespaceID: ns.ID, Document: out.Document,
		ConfigurationID: cfg.ID, ConfigurationGeneration: cfg.Generation,
		Harness: out.Harness, Mode: out.Mode, ComputeID: computeID,
		HarnessAuth: a.HarnessAuth, Plugins: a.Plugins, Status: state.RevisionPending,
		CreatedAt: time.Now().UTC(),
	}
	workID := newID()
	res, err := s.propose(r, state.CmdAdmitRevision, state.AdmitRevision{Revision: rev, WorkID: workID,
		MaxAttempts: s.cfg.MaxAttempts})
	if err != nil {
		return err
	}
	admitted, ok := res.(state.Revision)
	if !ok {
		if admitted, ok = m.Revision(rev.ID); !ok {
			return notFound("revision %q vanished after admission", rev.ID)
		}
	}
	writeJSON(w, http.StatusAccepted, wire.DeployResult{Revision: s.revisionView(admitted), WorkID: workID})
	return nil
}
