package gatewayd

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/status"
)

type routeError struct {
	Code codes.Code `json:"code"`
}

func (g *Gatewayd) registerRoutes(st *status.Server) error {
	if err := st.HandleFunc("POST "+contract.RouteSetupCode, g.bearer(g.handleSetupCode), status.AuthNone); err != nil {
		return err
	}
	if err := st.HandleFunc("GET "+contract.RouteNodes, g.bearer(g.handleNodes), status.AuthNone); err != nil {
		return err
	}
	if err := st.HandleFunc("POST "+contract.RouteChat, g.bearer(g.handleChat), status.AuthNone); err != nil {
		return err
	}
	return g.registerWorkspaceRoutes(st)
}

// bearer admits only the coordinator's status token; without a configured
// token the routes refuse everyone.
func (g *Gatewayd) bearer(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || g.cfg.StatusToken == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(g.cfg.StatusToken)) != 1 {
			writeJSON(w, http.StatusUnauthorized, routeError{Code: codes.NotConfigured})
			return
		}
		h(w, r)
	}
}

func (g *Gatewayd) operator(ctx context.Context) (*ocproto.Operator, error) {
	return ocproto.DialOperator(ctx, ocproto.OperatorConfig{URL: g.cfg.LocalURL(), Password: g.cfg.Password,
		Identity: g.identity})
}

func (g *Gatewayd) handleSetupCode(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), SetupRouteTimeout)
	defer cancel()
	op, err := g.operator(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, routeError{Code: codes.Unavailable})
		return
	}
	defer op.Close()
	public := g.cfg.PublicURL
	if public == "" {
		public = g.cfg.LocalURL()
	}
	res, err := op.SetupCode(ctx, public)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, routeError{Code: codes.Unavailable})
		return
	}
	writeJSON(w, http.StatusOK, contract.SetupCodeResponse{SetupCode: res.SetupCode, ExpiresAtMs: res.ExpiresAtMs})
}

func (g *Gatewayd) handleNodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), SetupRouteTimeout)
	defer cancel()
	op, err := g.operator(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, routeError{Code: codes.Unavailable})
		return
	}
	defer op.Close()
	list, err := op.NodeList(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, routeError{Code: codes.Unavailable})
		return
	}
	out := contract.NodesResponse{Nodes: []contract.Node{}}
	for _, n := range list {
		cmds := n.Commands
		if cmds == nil {
			cmds = []string{}
		}
		out.Nodes = append(out.Nodes, contract.Node{NodeID: n.NodeID, Connected: n.Connected, Commands: cmds})
	}
	writeJSON(w, http.StatusOK, out)
}

// maxChatBody bounds a RouteChat request.
const maxChatBody = 1 << 20

// handleChat runs one turn through the gateway as the loopback operator
// and streams its events (contract.ChatEvent, NDJSON) to the caller — the
// coordinator relaying `occ agent send`. The turn may outlast the status
// server's write timeout, so the route extends its own deadline.
func (g *Gatewayd) handleChat(w http.ResponseWriter, r *http.Request) {
	var req contract.ChatRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxChatBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Message == "" || req.Session == "" {
		writeJSON(w, http.StatusBadRequest, routeError{Code: codes.NotConfigured})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ChatRouteTimeout)
	defer cancel()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(ChatRouteTimeout + 5*time.Second))
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	emit := func(ev contract.ChatEvent) {
		_ = enc.Encode(ev)
		_ = rc.Flush()
	}
	reply, err := ocproto.Chat(ctx, ocproto.OperatorConfig{URL: g.cfg.LocalURL(), Password: g.cfg.Password, Identity: g.identity},
		req.Session, req.Message, ocproto.ChatHandler{Delta: func(d string) { emit(contract.ChatEvent{Delta: d}) }})
	if err != nil {
		code := contract.ChatDisconnected
		switch {
		case errors.Is(err, ocproto.ErrChatFailed):
			code = contract.ChatTurnFailed
		case errors.Is(err, ocproto.ErrUnreachable):
			code = contract.ChatUnavailable
		}
		g.log.Info("relayed turn failed", "code", code)
		emit(contract.ChatEvent{Code: code, Message: err.Error()})
		return
	}
	emit(contract.ChatEvent{Done: true, Reply: reply})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
