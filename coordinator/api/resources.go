package api

import (
	"context"
	"net/http"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// caller is the Backend proposing as r's caller: every proposal carries the
// caller's actor and is timed for the apply histogram.
func (s *server) caller(r *http.Request) state.Proposer {
	if run, ok := r.Context().Value(dryRunKey{}).(*dryRun); ok {
		// A dry run's proposals reach only its private copy (dryrun.go).
		return dryRunProposer{s: s, run: run, actor: principal(r).Actor()}
	}
	return callerProposer{s: s, actor: principal(r).Actor()}
}

type callerProposer struct {
	s     *server
	actor string
}

func (p callerProposer) Propose(ctx context.Context, typ string, payload any) (any, error) {
	if p.s.cfg.WithActor != nil {
		ctx = p.s.cfg.WithActor(ctx, p.actor)
	}
	done := p.s.metrics.observePropose(typ)
	res, err := p.s.b.Propose(ctx, typ, payload)
	done(err)
	return res, err
}

// propose replicates one command as r's caller and returns its result.
func propose[P, R any](s *server, r *http.Request, cmd state.Cmd[P, R], payload P) (R, error) {
	return state.Propose(r.Context(), s.caller(r), cmd, payload)
}

// listNamespaces lists the Namespaces the caller may view.
func (s *server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorOf(r)
	if err != nil {
		return err
	}
	var out []state.Namespace
	for _, ns := range s.b.Machine().Namespaces() {
		if sel.Matches(ns.Labels) && s.can(r, iam.ViewNamespace, iam.NamespaceRes(ns.Name)) {
			out = append(out, ns)
		}
	}
	writeJSON(w, http.StatusOK, byName(listOf(out, wireNamespace), func(n wire.Namespace) string { return n.Name }))
	return nil
}

func (s *server) getNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireNamespace(ns))
	return nil
}

func (s *server) createNamespace(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateNamespace
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	// The name is validated before authorization: a refusal's audit
	// record names only a valid name.
	if err := validName("namespace", req.Name); err != nil {
		return err
	}
	if err := validLabels(req.Labels); err != nil {
		return err
	}
	if err := s.allow(r, iam.CreateNamespace, iam.NamespaceRes(req.Name), ""); err != nil {
		return err
	}
	return commit(s, w, r, http.StatusCreated, answerCreateNamespace, state.CreateNamespace{ID: newID(), Name: req.Name,
		Labels: req.Labels})
}

// setQuota sets or (all zero) removes a Namespace's quota: the platform's
// decision (AdministerCluster), not the Namespace's own. Deploy admission
// applies it from the next deploy on; the Kubernetes driver renders it at
// the Namespace's next deploy.
func (s *server) setQuota(w http.ResponseWriter, r *http.Request) error {
	var req wire.NamespaceQuota
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ns.ID); err != nil {
		return err
	}
	q := stateQuota(req)
	if err := compute.ValidateQuota(q); err != nil {
		return invalid("quota: %v", err)
	}
	return commit(s, w, r, http.StatusOK, answerSetNamespaceQuota, state.SetNamespaceQuota{NamespaceID: ns.ID, Quota: q})
}

func (s *server) listConfigurations(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorOf(r)
	if err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	var out []state.Configuration
	for _, c := range s.b.Machine().Configurations(ns.ID) {
		if sel.Matches(c.Labels) && s.can(r, iam.ViewConfiguration, cfgRes(ns, c.Name)) {
			out = append(out, c)
		}
	}
	writeJSON(w, http.StatusOK, byName(listOf(out, wireConfiguration), func(c wire.Configuration) string { return c.Name }))
	return nil
}

// configurationFor is the request's Configuration, once the caller may act
// on it.
func (s *server) configurationFor(r *http.Request, act iam.Action) (state.Namespace, state.Configuration, error) {
	ns, err := s.namespace(r)
	if err != nil {
		return ns, state.Configuration{}, err
	}
	c, err := s.configurationRef(r.Context(), ns, r.PathValue("cfg"))
	if err != nil {
		return ns, c, err
	}
	return ns, c, s.allow(r, act, cfgRes(ns, c.Name), ns.ID)
}

func (s *server) getConfiguration(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.configurationFor(r, iam.ViewConfiguration)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireConfiguration(c))
	return nil
}

func (s *server) createConfiguration(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateConfiguration
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	if err := validName("configuration", req.Name); err != nil {
		return err
	}
	if err := validLabels(req.Labels); err != nil {
		return err
	}
	if err := s.allow(r, iam.CreateConfiguration, cfgRes(ns, req.Name), ns.ID); err != nil {
		return err
	}
	if err := s.validConfiguration(req.Document); err != nil {
		return err
	}
	for _, c := range s.b.Machine().Configurations(ns.ID) {
		if c.Name == req.Name {
			return conflict("configuration name %q is taken in namespace %q", req.Name, ns.Name)
		}
	}
	return commit(s, w, r, http.StatusCreated, answerPutConfiguration, state.PutConfiguration{ID: newID(),
		NamespaceID: ns.ID, Name: req.Name, Document: req.Document, Labels: req.Labels})
}

func (s *server) updateConfiguration(w http.ResponseWriter, r *http.Request) error {
	var req wire.UpdateConfiguration
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, c, err := s.configurationFor(r, iam.UpdateConfiguration)
	if err != nil {
		return err
	}
	if err := s.validConfiguration(req.Document); err != nil {
		return err
	}
	return commit(s, w, r, http.StatusOK, answerPutConfiguration, state.PutConfiguration{ID: c.ID, NamespaceID: ns.ID,
		Name: c.Name, Document: req.Document})
}

func (s *server) validConfiguration(doc []byte) error {
	if err := validDocument(doc); err != nil {
		return err
	}
	return admission.ValidateConfiguration(doc)
}

// deleteNamespace removes an empty Namespace: 409 while it holds Agents,
// Configurations or credential sources. The compute driver removes the Namespace's runtime
// namespaces first (idempotent), so nothing outlives the record.
func (s *server) deleteNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	// Removing a tenant boundary is a cluster administrator's act.
	if err := s.allow(r, iam.AdministerCluster, iam.ClusterRes(), ns.ID); err != nil {
		return err
	}
	m := s.b.Machine()
	if n := len(m.Agents(ns.ID)); n > 0 {
		return conflict("namespace %q still holds %d agent(s): delete them first", ns.Name, n)
	}
	if n := len(m.Configurations(ns.ID)); n > 0 {
		return conflict("namespace %q still holds %d configuration(s): delete them first", ns.Name, n)
	}
	// Before the driver removes the runtime namespaces, which hold the
	// sources' values.
	if n := len(m.CredentialSources(ns.ID)); n > 0 {
		return conflict("namespace %q still holds %d credential source(s): withdraw them first", ns.Name, n)
	}
	if d := s.b.Driver(); d != nil {
		if err := d.DeleteNamespace(r.Context(), ns); err != nil {
			code, _ := compute.ErrorCode(err, codes.TransientDependency)
			e := conflict("the compute driver could not remove namespace %q yet: %v", ns.Name, err)
			e.Details = map[string]any{"reason": string(code)}
			return e
		}
	}
	return commit(s, w, r, http.StatusOK, answerDeleteNamespace, state.DeleteNamespace{ID: ns.ID})
}

// deleteConfiguration removes a Configuration no Agent uses (409 otherwise).
func (s *server) deleteConfiguration(w http.ResponseWriter, r *http.Request) error {
	_, c, err := s.configurationFor(r, iam.UpdateConfiguration)
	if err != nil {
		return err
	}
	return commit(s, w, r, http.StatusOK, answerDeleteConfiguration, state.DeleteConfiguration{ID: c.ID})
}
