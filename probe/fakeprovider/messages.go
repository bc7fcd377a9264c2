package fakeprovider

import (
	"fmt"
	"net/http"
)

// serveMessages answers Anthropic POST /v1/messages (SSE message_start …
// message_stop, or one JSON message).
func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request, t turn) int {
	id := fmt.Sprintf("msg_fake%d", t.n)
	stop := "end_turn"
	var block map[string]any
	if t.tool != "" {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", t.n), "name": t.tool}
	}
	if !t.stream {
		if t.fault == FaultDrop {
			drop()
		}
		if t.fault == FaultResponseFailed {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"type": "error",
				"error": map[string]any{"type": "api_error", "message": "fake failure"}})
			return http.StatusInternalServerError
		}
		if t.fault == FaultSlow && !t.pace(r.Context()) {
			return http.StatusOK
		}
		content := []any{map[string]any{"type": "text", "text": t.text}}
		if block != nil {
			block["input"] = rawJSON(t.args)
			content = []any{block}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant",
			"model": t.model, "content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}})
		return http.StatusOK
	}
	e := startSSE(w)
	send := func(typ string, kv ...any) bool {
		d := map[string]any{"type": typ}
		for i := 0; i+1 < len(kv); i += 2 {
			d[kv[i].(string)] = kv[i+1]
		}
		return e.event(typ, d) == nil
	}
	if !send("message_start", "message", map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": t.model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}) {
		return http.StatusOK
	}
	switch t.fault {
	case FaultDrop:
		drop()
	case FaultResponseFailed:
		send("error", "error", map[string]any{"type": "overloaded_error", "message": "fake failure"})
		return http.StatusOK
	}
	if block != nil {
		block["input"] = map[string]any{}
		if !send("content_block_start", "index", 0, "content_block", block) ||
			!send("content_block_delta", "index", 0, "delta", map[string]any{"type": "input_json_delta", "partial_json": t.args}) {
			return http.StatusOK
		}
	} else {
		if !send("content_block_start", "index", 0, "content_block", map[string]any{"type": "text", "text": ""}) {
			return http.StatusOK
		}
		if t.fault == FaultSlow {
			for i := 0; i < t.slowN; i++ {
				if !t.pace(r.Context()) || !send("content_block_delta", "index", 0,
					"delta", map[string]any{"type": "text_delta", "text": "."}) {
					return http.StatusOK
				}
			}
		}
		for _, d := range t.deltas() {
			if !send("content_block_delta", "index", 0, "delta", map[string]any{"type": "text_delta", "text": d}) {
				return http.StatusOK
			}
		}
	}
	if send("content_block_stop", "index", 0) &&
		send("message_delta", "delta", map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage", map[string]any{"output_tokens": 5}) {
		send("message_stop")
	}
	return http.StatusOK
}
