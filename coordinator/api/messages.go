package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/codes"
)

// defaultSession is the gateway session of a request that names none.
const defaultSession = "main"

// messages relays one turn to the Agent's active Gateway through the
// compute driver (compute.Messenger: the Gateway's own supervisor runs it
// as the gateway's loopback operator) and streams the reply back
// (application/x-ndjson, wire.MessageEvent). Any member serves it; nothing
// is replicated.
func (s *server) messages(w http.ResponseWriter, r *http.Request) error {
	_, a, err := s.agentFor(r, iam.MessageAgent)
	if err != nil {
		return err
	}
	var req wire.MessageRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Message == "" {
		return invalid("message is required")
	}
	if req.Session == "" {
		req.Session = defaultSession
	}
	if a.ActiveRevisionID == "" {
		return conflict("agent %q has no active revision: deploy it first", a.Name)
	}
	m, ok := s.b.Driver().(compute.Messenger)
	if !ok {
		return notFound("the compute driver relays no messages (use the gateway endpoint it names)")
	}
	// The stream starts with the first event, so a refusal before any
	// delta (no serving Gateway) is still an API error.
	started := false
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	emit := func(ev wire.MessageEvent) {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		_ = enc.Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	reply, revID, err := m.SendMessage(r.Context(), a, req.Session, req.Message, func(d string) { emit(wire.MessageEvent{Delta: d}) })
	var te *compute.TurnError
	switch {
	case err == nil:
		emit(wire.MessageEvent{Done: true, Reply: reply, RevisionID: revID})
	case errors.Is(err, compute.ErrNoEndpoint) && !started:
		return notFound("agent %q has no serving gateway: %v", a.Name, err)
	case errors.As(err, &te):
		s.log.Info("relayed turn failed", "agent", a.ID, "code", te.Code)
		emit(wire.MessageEvent{RevisionID: revID, Error: &wire.ErrorDetail{Code: codes.Code(te.Code), Message: te.Message}})
	default:
		// the Gateway's supervisor was not reached (or the stream broke)
		code := wire.MessageUnavailable
		if started {
			code = wire.MessageDisconnected
		}
		s.log.Info("relayed turn failed", "agent", a.ID, "code", code, "error", err.Error())
		emit(wire.MessageEvent{RevisionID: revID, Error: &wire.ErrorDetail{Code: code, Message: err.Error()}})
	}
	return nil
}
