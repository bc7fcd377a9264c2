package api

import (
	"errors"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// deployAgent decides the deploy of the exact Agent and every reference it
// uses (docs/design/seed-002.md: its ServicePrincipal and credential source
// each get their own decision) with admission on the leader and the
// Restrictions on the admitted facts (admitDeploy), then freezes the
// revision (with the Agent's ServicePrincipal) and enqueues its activate
// work, recording the actor, in one AdmitRevision entry (202). Apply refuses
// the entry when the Agent or Configuration changed meanwhile.
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
	return commit(s, w, r, http.StatusAccepted, answerAdmitRevision, state.AdmitRevision{Revision: rev, WorkID: newID(),
		MaxAttempts: s.cfg.MaxAttempts, ActorGroups: principal(r).ExternalGroups()})
}

// admitDeploy is the deploy's decision without its effect
// (policy.Decider.Deploy: the permission, the references, admission and the
// Restrictions on the admitted facts); it returns the revision to freeze.
// GET …/access asks it too, so a page offers Deploy exactly when the API
// would accept it.
func (s *server) admitDeploy(r *http.Request, ns state.Namespace, a state.Agent, logLevel string) (state.Revision, error) {
	rev, err := s.decider().Deploy(r.Context(), policy.Deploy{Principal: principal(r), Namespace: ns, Agent: a,
		ServicePrincipalID: a.ServicePrincipalID, HarnessAuth: a.HarnessAuth, Quota: true,
		Admit: func() (state.Revision, admission.Output, error) { return s.admit(ns, a, logLevel) }})
	if errors.Is(err, policy.ErrServicePrincipalGone) {
		return state.Revision{}, conflict("the service principal of agent %q is gone", a.Name)
	}
	var over *policy.OverQuota
	if errors.As(err, &over) {
		return state.Revision{}, s.overQuota(r, ns, a, over)
	}
	return rev, s.referenceRefused(r, onAgent(ns, a), iam.UseCredentialSource, s.refused(r, onAgent(ns, a), err))
}

// admit runs admission on the leader against the Agent, its Configuration
// and the installation, and builds the revision to freeze (with the Agent's
// ServicePrincipal).
func (s *server) admit(ns state.Namespace, a state.Agent, logLevel string) (state.Revision, admission.Output, error) {
	if a.Deleting {
		return state.Revision{}, admission.Output{}, conflict("agent %q is being deleted", a.Name)
	}
	m := s.b.Machine()
	cfg, ok := m.Configuration(a.ConfigurationID)
	if !ok || cfg.NamespaceID != ns.ID {
		return state.Revision{}, admission.Output{}, notFound("configuration %q of agent %q not found", a.ConfigurationID, a.Name)
	}
	computeID, err := s.computeID(a)
	if err != nil {
		return state.Revision{}, admission.Output{}, err
	}
	out, err := admission.Admit(s.admissionInput(a, cfg, m.Installation(), logLevel))
	if err != nil {
		return state.Revision{}, admission.Output{}, err
	}
	rev := state.Revision{
		ID: newID(), AgentID: a.ID, NamespaceID: ns.ID, Document: out.Document,
		ConfigurationID: cfg.ID, ConfigurationGeneration: cfg.Generation,
		Harness: out.Harness, Mode: out.Mode, ComputeID: computeID,
		HarnessAuth: a.HarnessAuth, Plugins: a.Plugins, Status: state.RevisionPending,
		CreatedAt: time.Now().UTC(), ServicePrincipalID: a.ServicePrincipalID, Resources: a.Resources,
	}
	return rev, out, nil
}

// overQuota answers a deploy refused by the Namespace's quota (409
// QUOTA_EXCEEDED naming the quota) and, for a write, records the refusal
// in the audit log; nothing else changes.
func (s *server) overQuota(r *http.Request, ns state.Namespace, a state.Agent, over *policy.OverQuota) error {
	details := map[string]string{"code": string(codes.QuotaExceeded), "quota": over.Quota, "limit": over.Limit,
		"used": over.Used, "requested": over.Requested}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if _, err := propose(s, r, state.CmdRecordAudit, state.RecordAudit{Action: state.AuditDeploy, Resource: s.agentRes(ns, a).String(),
			NamespaceID: ns.ID, AgentID: a.ID, Outcome: state.OutcomeDenied, Details: details}); err != nil {
			s.log.Warn("quota refusal audit failed", "agent", a.ID, "error", err.Error())
		}
	}
	e := &Error{Status: http.StatusConflict, Code: codes.QuotaExceeded, Message: over.Error(), Details: map[string]any{}}
	for k, v := range details {
		if k != "code" {
			e.Details[k] = v
		}
	}
	return e
}
