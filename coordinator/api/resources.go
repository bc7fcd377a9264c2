package api

import (
	"net/http"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// propose replicates one command and times it for the apply histogram.
func (s *server) propose(r *http.Request, typ string, payload any) (any, error) {
	ctx := r.Context()
	if s.cfg.WithActor != nil {
		ctx = s.cfg.WithActor(ctx, principal(r).Actor())
	}
	done := s.metrics.observePropose(typ)
	res, err := s.b.Propose(ctx, typ, payload)
	done(err)
	return res, err
}

// listNamespaces lists the Namespaces the caller may view.
func (s *server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	var out []state.Namespace
	for _, ns := range s.b.Machine().Namespaces() {
		if s.can(r, iam.ViewNamespace, iam.NamespaceRes(ns.Name)) {
			out = append(out, ns)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, wireNamespace))
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
	if err := s.allow(r, iam.CreateNamespace, iam.NamespaceRes(req.Name), ""); err != nil {
		return err
	}
	if err := validName("namespace", req.Name); err != nil {
		return err
	}
	return s.commit(w, r, http.StatusCreated, state.CmdCreateNamespace, state.CreateNamespace{ID: newID(), Name: req.Name})
}

func (s *server) listConfigurations(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	var out []state.Configuration
	for _, c := range s.b.Machine().Configurations(ns.ID) {
		if s.can(r, iam.ViewConfiguration, cfgRes(ns, c.Name)) {
			out = append(out, c)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, wireConfiguration))
	return nil
}

func (s *server) getConfiguration(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	c, err := s.configurationRef(ns, r.PathValue("cfg"))
	if err != nil {
		return err
	}
	if err := s.allow(r, iam.ViewConfiguration, cfgRes(ns, c.Name), ns.ID); err != nil {
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
	if err := s.allow(r, iam.CreateConfiguration, cfgRes(ns, req.Name), ns.ID); err != nil {
		return err
	}
	if err := validName("configuration", req.Name); err != nil {
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
	return s.commit(w, r, http.StatusCreated, state.CmdPutConfiguration, state.PutConfiguration{ID: newID(),
		NamespaceID: ns.ID, Name: req.Name, Document: req.Document})
}

func (s *server) updateConfiguration(w http.ResponseWriter, r *http.Request) error {
	var req wire.UpdateConfiguration
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	c, err := s.configurationRef(ns, r.PathValue("cfg"))
	if err != nil {
		return err
	}
	if err := s.allow(r, iam.UpdateConfiguration, cfgRes(ns, c.Name), ns.ID); err != nil {
		return err
	}
	if err := s.validConfiguration(req.Document); err != nil {
		return err
	}
	return s.commit(w, r, http.StatusOK, state.CmdPutConfiguration, state.PutConfiguration{ID: c.ID, NamespaceID: ns.ID,
		Name: c.Name, Document: req.Document})
}

func (s *server) validConfiguration(doc []byte) error {
	if err := validDocument(doc); err != nil {
		return err
	}
	return admission.ValidateConfiguration(doc)
}
