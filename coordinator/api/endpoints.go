package api

import (
	"errors"
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
)

// endpoints answers where the Agent's Gateway is reached, as the compute
// driver reports it; 404 when the Agent has none.
func (s *server) endpoints(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	ep, ok := s.b.Driver().(compute.Endpointer)
	if !ok {
		return notFound("the compute driver reports no endpoints")
	}
	e, err := ep.Endpoints(r.Context(), a)
	if errors.Is(err, compute.ErrNoEndpoint) {
		return notFound("agent %q has no gateway endpoint: %v", a.Name, err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Endpoints{AgentID: a.ID, RevisionID: e.RevisionID, Gateway: e.Gateway,
		Socket: e.Socket, PasswordFile: e.PasswordFile})
	return nil
}
