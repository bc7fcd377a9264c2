package api

import (
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Labels of Namespaces, Configurations, Agents and role bindings: set when
// one is created, replaced as a whole by PUT …/labels (an empty map removes
// them), never touched by the other updates; the lists filter by
// ?labelSelector=. A malformed set or selector is 400 INVALID_REQUEST with
// details.reason INVALID_LABELS or INVALID_LABEL_SELECTOR, and nothing is
// stored.

// validLabels refuses malformed labels.
func validLabels(m map[string]string) error {
	if err := state.ValidateLabels(m); err != nil {
		return invalidLabels(err)
	}
	return nil
}

func invalidLabels(err error) *Error {
	e := invalid("%v", err)
	e.Details = map[string]any{"reason": codes.InvalidLabels}
	return e
}

// selectorOf parses r's labelSelector (absent: select all).
func selectorOf(r *http.Request) (state.Selector, error) {
	q := r.URL.Query()
	vals, ok := q[wire.LabelSelectorParam]
	if !ok {
		return nil, nil
	}
	if len(vals) != 1 {
		return nil, invalidSelector("give %s once", wire.LabelSelectorParam)
	}
	sel, err := state.ParseSelector(vals[0])
	if err != nil {
		return nil, invalidSelector("%s: %v", wire.LabelSelectorParam, err)
	}
	return sel, nil
}

func invalidSelector(format string, a ...any) *Error {
	e := invalid(format, a...)
	e.Details = map[string]any{"reason": codes.InvalidLabelSelector}
	return e
}

// decodeLabels reads a PUT …/labels body and validates it.
func (s *server) decodeLabels(w http.ResponseWriter, r *http.Request) (map[string]string, error) {
	var req wire.PutLabels
	if err := s.decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	return req.Labels, validLabels(req.Labels)
}

var (
	answerSetNamespaceLabels     = answerOf(state.CmdSetNamespaceLabels, pure(wireNamespace))
	answerSetConfigurationLabels = answerOf(state.CmdSetConfigurationLabels, pure(wireConfiguration))
	answerSetAgentLabels         = answerOf(state.CmdSetAgentLabels, (*server).agentView)
)

// putNamespaceLabels replaces a Namespace's labels: whoever may create the
// Namespace may label it.
func (s *server) putNamespaceLabels(w http.ResponseWriter, r *http.Request) error {
	labels, err := s.decodeLabels(w, r)
	if err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	if err := s.allow(r, iam.CreateNamespace, iam.NamespaceRes(ns.Name), ns.ID); err != nil {
		return err
	}
	return commit(s, w, r, http.StatusOK, answerSetNamespaceLabels, state.SetLabels{ID: ns.ID, Labels: labels})
}

// putConfigurationLabels replaces a Configuration's labels; its document
// and generation stay.
func (s *server) putConfigurationLabels(w http.ResponseWriter, r *http.Request) error {
	labels, err := s.decodeLabels(w, r)
	if err != nil {
		return err
	}
	_, c, err := s.configurationFor(r, iam.UpdateConfiguration)
	if err != nil {
		return err
	}
	return commit(s, w, r, http.StatusOK, answerSetConfigurationLabels, state.SetLabels{ID: c.ID, Labels: labels})
}

// putAgentLabels replaces an Agent's labels; no revision freezes them, so
// nothing is deployed.
func (s *server) putAgentLabels(w http.ResponseWriter, r *http.Request) error {
	labels, err := s.decodeLabels(w, r)
	if err != nil {
		return err
	}
	_, a, err := s.agentFor(r, iam.UpdateAgent)
	if err != nil {
		return err
	}
	return commit(s, w, r, http.StatusOK, answerSetAgentLabels, state.SetLabels{ID: a.ID, Labels: labels})
}

// putRoleBindingLabels replaces a role binding's labels: whoever may manage
// the binding may label it.
func (s *server) putRoleBindingLabels(w http.ResponseWriter, r *http.Request) error {
	labels, err := s.decodeLabels(w, r)
	if err != nil {
		return err
	}
	b, ok := s.b.Machine().RoleBinding(r.PathValue("id"))
	if !ok || !s.can(r, iam.ViewRoleBindings, s.bindingScope(b)) {
		return notFound("role binding %q not found", r.PathValue("id"))
	}
	if err := s.allow(r, iam.ManageRoleBindings, s.bindingScope(b), b.NamespaceID); err != nil {
		return err
	}
	res, err := propose(s, r, state.CmdSetRoleBindingLabels, state.SetLabels{ID: b.ID, Labels: labels})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wireBinding(res))
	return nil
}
