package ocproto

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

func TestMessageText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"role":"assistant","content":[{"type":"text","text":"Hello"},{"type":"text","text":" world"}]}`, "Hello world"},
		{`{"role":"assistant","content":"plain"}`, "plain"},
		{`{"text":"t"}`, "t"},
		{`null`, ""},
		{`not json`, ""},
		{`[{"parts":[{"text":"a"}]}]`, "a"},
	} {
		require.Equal(t, tc.want, MessageText(json.RawMessage(tc.in)), tc.in)
	}
}

func FuzzMessageText(f *testing.F) {
	f.Add(`{"content":[{"text":"x"}]}`)
	f.Add(`[[[[{"parts":[]}]]]]`)
	f.Fuzz(func(t *testing.T, s string) {
		_ = MessageText(json.RawMessage(s))
	})
}

// chatGateway answers chat.send with a run id and then publishes the
// scripted chat event states for it (with one event of another run first).
func chatGateway(t *testing.T, states ...map[string]any) *scriptedGateway {
	return newScripted(t, &scriptedGateway{afterHello: func(ws *websocket.Conn) {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			f, err := DecodeFrame(b)
			if err != nil || f.Req == nil || f.Req.Method != "chat.send" {
				continue
			}
			var p map[string]any
			require.NoError(t, json.Unmarshal(f.Req.Params, &p))
			require.Equal(t, "s1", p["sessionKey"])
			require.Equal(t, "hi", p["message"])
			require.NotEmpty(t, p["idempotencyKey"])
			_ = ws.WriteJSON(map[string]any{"type": "res", "id": f.Req.ID, "ok": true, "payload": map[string]any{"runId": "run-1"}})
			_ = ws.WriteJSON(map[string]any{"type": "event", "event": "chat", "payload": map[string]any{"runId": "other", "state": "delta", "deltaText": "NOT MINE"}})
			for _, st := range states {
				st["runId"] = "run-1"
				_ = ws.WriteJSON(map[string]any{"type": "event", "event": "chat", "payload": st})
			}
		}
	}})
}

// Chat streams the deltas of its own run and returns the reply; a turn the
// gateway ends with an error is ErrChatFailed; a refused password ends the
// dialing at once with ErrUnreachable.
func TestChat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sg := chatGateway(t, map[string]any{"state": "delta", "deltaText": "Hel"}, map[string]any{"state": "delta", "deltaText": "lo"},
		map[string]any{"state": "final"})
	var deltas []string
	text, err := Chat(ctx, OperatorConfig{URL: sg.url(), Password: "pw"}, "s1", "hi", ChatHandler{Delta: func(d string) { deltas = append(deltas, d) }})
	require.NoError(t, err)
	require.Equal(t, "Hello", text)
	require.Equal(t, []string{"Hel", "lo"}, deltas)

	sg = chatGateway(t, map[string]any{"state": "final", "message": map[string]any{"content": []any{map[string]any{"text": "whole"}}}})
	text, err = Chat(ctx, OperatorConfig{URL: sg.url(), Password: "pw"}, "s1", "hi", ChatHandler{})
	require.NoError(t, err)
	require.Equal(t, "whole", text, "a final without deltas carries the message")

	sg = chatGateway(t, map[string]any{"state": "error", "errorMessage": "model said no"})
	_, err = Chat(ctx, OperatorConfig{URL: sg.url(), Password: "pw"}, "s1", "hi", ChatHandler{})
	require.ErrorIs(t, err, ErrChatFailed)
	require.ErrorContains(t, err, "model said no")

	refused := newScripted(t, &scriptedGateway{onConnect: func(ConnectParams) *Response {
		return &Response{Type: TypeRes, OK: false, Error: &ErrorShape{Code: "UNAUTHORIZED", Message: "no",
			Details: json.RawMessage(`{"code":"AUTH_PASSWORD_MISMATCH"}`)}}
	}})
	_, err = Chat(ctx, OperatorConfig{URL: refused.url(), Password: "wrong"}, "s1", "hi", ChatHandler{})
	require.ErrorIs(t, err, ErrUnreachable)
	require.NoError(t, ctx.Err(), "a refused password is not retried")
}
