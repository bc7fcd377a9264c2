package fakeprovider

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// respEvent is one Responses streaming event; its data carries "type".
type respEvent struct {
	name string
	data map[string]any
}

func usage() map[string]any {
	return map[string]any{"input_tokens": 10, "input_tokens_details": nil, "output_tokens": 5,
		"output_tokens_details": nil, "total_tokens": 15}
}

// streamResponses produces the Responses events of t (docs/design/codex.md#s4), calling
// emit for each; it stops early when emit fails or ctx ends. A false
// return with a nil error means the fault asks to drop the connection.
func streamResponses(ctx context.Context, t turn, emit func(respEvent) error) (bool, error) {
	rid, mid := fmt.Sprintf("resp_fake%d", t.n), fmt.Sprintf("msg_fake%d", t.n)
	ev := func(typ string, kv ...any) respEvent {
		d := map[string]any{"type": typ}
		for i := 0; i+1 < len(kv); i += 2 {
			d[kv[i].(string)] = kv[i+1]
		}
		return respEvent{name: typ, data: d}
	}
	if err := emit(ev("response.created", "response", map[string]any{"id": rid})); err != nil {
		return true, err
	}
	if t.prewarm {
		return true, emit(ev("response.completed", "response", map[string]any{"id": rid, "usage": usage()}))
	}
	if t.fault == FaultDrop {
		return false, nil
	}
	if t.fault == FaultResponseFailed {
		return true, emit(ev("response.failed", "response", map[string]any{"id": rid,
			"error": map[string]any{"code": "server_error", "message": "fake failure"}}))
	}
	if t.tool != "" {
		cid := fmt.Sprintf("call_fake%d", t.n)
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%d", t.n), "call_id": cid,
			"name": t.tool, "arguments": ""}
		if err := emit(ev("response.output_item.added", "output_index", 0, "item", item)); err != nil {
			return true, err
		}
		done := map[string]any{"type": "function_call", "id": item["id"], "call_id": cid, "name": t.tool,
			"arguments": t.args, "status": "completed"}
		if err := emit(ev("response.output_item.done", "output_index", 0, "item", done)); err != nil {
			return true, err
		}
		return true, emit(ev("response.completed", "response", map[string]any{"id": rid, "usage": usage()}))
	}
	if err := emit(ev("response.output_item.added", "output_index", 0, "item", map[string]any{
		"type": "message", "role": "assistant", "id": mid, "content": []any{}})); err != nil {
		return true, err
	}
	delta := func(s string) error {
		return emit(ev("response.output_text.delta", "item_id", mid, "output_index", 0, "content_index", 0, "delta", s))
	}
	if t.fault == FaultSlow {
		for i := 0; i < t.slowN; i++ {
			if !t.pace(ctx) {
				return true, ctx.Err()
			}
			if err := delta("."); err != nil {
				return true, err
			}
		}
	}
	for _, d := range t.deltas() {
		if err := delta(d); err != nil {
			return true, err
		}
	}
	if err := emit(ev("response.output_item.done", "output_index", 0, "item", map[string]any{
		"type": "message", "role": "assistant", "id": mid, "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": t.fullText(), "annotations": []any{}}}})); err != nil {
		return true, err
	}
	return true, emit(ev("response.completed", "response", map[string]any{"id": rid, "usage": usage()}))
}

// fullText is the whole reply, including slow mode's padding.
func (t turn) fullText() string {
	if t.fault == FaultSlow {
		return strings.Repeat(".", t.slowN) + t.text
	}
	return t.text
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, t turn) int {
	if !t.stream {
		return s.responsesJSON(w, r, t)
	}
	e := startSSE(w)
	ok, _ := streamResponses(r.Context(), t, func(ev respEvent) error { return e.event(ev.name, ev.data) })
	if !ok {
		drop()
	}
	return http.StatusOK
}

func (s *Server) responsesJSON(w http.ResponseWriter, r *http.Request, t turn) int {
	if t.fault == FaultDrop {
		drop()
	}
	if t.fault == FaultSlow && !t.pace(r.Context()) {
		return http.StatusOK
	}
	rid := fmt.Sprintf("resp_fake%d", t.n)
	resp := map[string]any{"id": rid, "object": "response", "created_at": 0, "model": t.model,
		"status": "completed", "usage": usage(), "error": nil}
	switch {
	case t.prewarm:
		resp["output"] = []any{}
	case t.fault == FaultResponseFailed:
		resp["status"] = "failed"
		resp["output"] = []any{}
		resp["error"] = map[string]any{"code": "server_error", "message": "fake failure"}
	case t.tool != "":
		resp["output"] = []any{map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%d", t.n),
			"call_id": fmt.Sprintf("call_fake%d", t.n), "name": t.tool, "arguments": t.args, "status": "completed"}}
	default:
		resp["output"] = []any{map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%d", t.n),
			"status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": t.text, "annotations": []any{}}}}}
		resp["output_text"] = t.text
	}
	writeJSON(w, http.StatusOK, resp)
	return http.StatusOK
}

var upgrader = websocket.Upgrader{
	// The fake serves only loopback test clients; Codex sends no Origin.
	CheckOrigin: func(*http.Request) bool { return true },
}

// responsesWS serves Responses over WebSocket: each response.create text
// frame is answered with the streaming events as JSON text frames.
func (s *Server) responsesWS(w http.ResponseWriter, r *http.Request) {
	setCommonHeaders(w, pathResponses, s.seq.Add(1))
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, http.StatusBadRequest, "expected a WebSocket upgrade")
		s.record(r, Request{}, 0, http.StatusBadRequest, false)
		return
	}
	// The handshake sees only the persistent fault; SetFaultOnce slots are
	// left for the response.create frames.
	s.mu.Lock()
	f := s.fault
	s.mu.Unlock()
	if !s.authorized(r) || f.Is401() {
		write401(w, f)
		s.record(r, Request{}, 0, http.StatusUnauthorized, true)
		return
	}
	if f == Fault403 || f == Fault429 || f == Fault500 {
		writeStatusFault(w, f)
		s.record(r, Request{}, 0, statusOf(f), true)
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	ctx := r.Context()
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		req, err := DecodeRequest(pathResponses, msg)
		if err != nil {
			_ = c.WriteJSON(map[string]any{"type": "error", "error": map[string]any{"message": "invalid frame"}})
			continue
		}
		ff := FaultNone
		if req.Prewarm {
			s.prewarm.Add(1)
		} else {
			s.requests.Add(1)
			ff = s.takeFault()
			if tf := triggerFault(req.Prompt); tf != FaultNone {
				ff = tf
			}
		}
		s.record(r, req, len(msg), http.StatusSwitchingProtocols, true)
		if ff.Is401() || ff == Fault403 || ff == Fault429 || ff == Fault500 {
			_ = c.WriteJSON(map[string]any{"type": "error", "status": statusOf(ff),
				"error": map[string]any{"type": "server_error", "message": "fake " + string(ff)}})
			continue
		}
		t := s.turn(req, ff)
		t.n = s.seq.Add(1)
		t.prewarm = req.Prewarm
		ok, err := streamResponses(ctx, t, func(ev respEvent) error {
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			return c.WriteJSON(ev.data)
		})
		if !ok || err != nil {
			return // drop: close the socket mid-response
		}
	}
}

func statusOf(f Fault) int {
	switch {
	case f.Is401():
		return http.StatusUnauthorized
	case f == Fault403:
		return http.StatusForbidden
	case f == Fault429:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}
