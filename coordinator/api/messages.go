package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/ocproto"
)

// MessageTimeout bounds one relayed turn (a Codex turn with tools may take
// minutes; occ's own --timeout usually ends it first).
const MessageTimeout = 10 * time.Minute

// defaultSession is the gateway session of a request that names none.
const defaultSession = "main"

// chat runs one operator turn (a seam for the route's own tests; the
// shared loop is tested against a scripted gateway, the route end to end
// on real Pods).
var chat = ocproto.Chat

// messages relays one turn to the Agent's active Gateway as an operator
// and streams the reply back (application/x-ndjson, wire.MessageEvent):
// the compute driver names the Gateway and its password, which never
// leaves the coordinator. Any member serves it; nothing is replicated.
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
	gc, ok := s.b.Driver().(compute.GatewayConnector)
	if !ok {
		return notFound("the compute driver relays no messages (use the gateway endpoint it names)")
	}
	op, err := gc.GatewayOperator(r.Context(), a)
	if errors.Is(err, compute.ErrNoEndpoint) {
		return notFound("agent %q has no gateway endpoint: %v", a.Name, err)
	}
	if err != nil {
		return err
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	emit := func(ev wire.MessageEvent) {
		_ = enc.Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	emit(wire.MessageEvent{RevisionID: op.RevisionID})
	ctx, cancel := context.WithTimeout(r.Context(), MessageTimeout)
	defer cancel()
	reply, err := chat(ctx, ocproto.OperatorConfig{URL: op.URL, Password: op.Password}, req.Session, req.Message,
		ocproto.ChatHandler{Delta: func(d string) { emit(wire.MessageEvent{Delta: d}) }})
	if err != nil {
		code := wire.MessageDisconnected
		switch {
		case errors.Is(err, ocproto.ErrChatFailed):
			code = wire.MessageTurnFailed
		case errors.Is(err, ocproto.ErrUnreachable):
			code = wire.MessageUnavailable
		}
		s.log.Info("relayed turn failed", "agent", a.ID, "code", code, "error", err.Error())
		emit(wire.MessageEvent{Error: &wire.ErrorDetail{Code: code, Message: err.Error()}})
		return nil
	}
	emit(wire.MessageEvent{Done: true, Reply: reply})
	return nil
}
