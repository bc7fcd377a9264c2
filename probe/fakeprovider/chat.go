package fakeprovider

import (
	"fmt"
	"net/http"
)

// serveChat answers POST /v1/chat/completions (SSE "data:" chunks ending in
// [DONE], or one JSON completion).
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, t turn) int {
	id := fmt.Sprintf("chatcmpl-fake%d", t.n)
	finish := "stop"
	var toolCalls []any
	if t.tool != "" {
		finish = "tool_calls"
		toolCalls = []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_fake%d", t.n), "type": "function",
			"function": map[string]any{"name": t.tool, "arguments": t.args}}}
	}
	use := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !t.stream {
		if t.fault == FaultDrop {
			drop()
		}
		if t.fault == FaultResponseFailed {
			writeStatusFault(w, Fault500)
			return http.StatusInternalServerError
		}
		if t.fault == FaultSlow && !t.pace(r.Context()) {
			return http.StatusOK
		}
		msg := map[string]any{"role": "assistant", "content": t.text}
		if toolCalls != nil {
			msg["content"] = nil
			msg["tool_calls"] = toolCalls
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": 0,
			"model": t.model, "usage": use,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
		return http.StatusOK
	}
	e := startSSE(w)
	chunk := func(delta map[string]any, fin any, extra ...any) error {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
		for i := 0; i+1 < len(extra); i += 2 {
			c[extra[i].(string)] = extra[i+1]
		}
		return e.event("", c)
	}
	if chunk(map[string]any{"role": "assistant", "content": ""}, nil) != nil {
		return http.StatusOK
	}
	switch t.fault {
	case FaultDrop:
		drop()
	case FaultResponseFailed:
		_ = e.event("", map[string]any{"error": map[string]any{"message": "fake failure", "type": "server_error"}})
		return http.StatusOK
	case FaultSlow:
		for i := 0; i < t.slowN; i++ {
			if !t.pace(r.Context()) || chunk(map[string]any{"content": "."}, nil) != nil {
				return http.StatusOK
			}
		}
	}
	if toolCalls != nil {
		if chunk(map[string]any{"tool_calls": toolCalls}, nil) != nil {
			return http.StatusOK
		}
	}
	for _, d := range t.deltas() {
		if chunk(map[string]any{"content": d}, nil) != nil {
			return http.StatusOK
		}
	}
	if chunk(map[string]any{}, finish, "usage", use) != nil {
		return http.StatusOK
	}
	_ = e.event("", "[DONE]")
	return http.StatusOK
}
