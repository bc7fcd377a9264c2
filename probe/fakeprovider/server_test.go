package fakeprovider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(t.Context(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func post(t *testing.T, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvents reads "event:"/"data:" pairs until EOF.
func sseEvents(t *testing.T, r io.Reader) (names []string, datas []string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			name = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			names = append(names, name)
			datas = append(datas, strings.TrimPrefix(l, "data: "))
			name = ""
		}
	}
	return names, datas
}

func responsesBody(prompt string, stream bool, extra ...string) string {
	in := []any{map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": prompt}}}}
	for _, e := range extra {
		if e == "tool_output" {
			in = append(in, map[string]any{"type": "function_call_output", "call_id": "c1", "output": "hi"})
		}
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-6-sol", "stream": stream, "input": in,
		"tools": []any{map[string]any{"type": "function", "name": "shell"},
			map[string]any{"type": "function", "name": "exec_command"}}})
	return string(b)
}

func TestResponsesStreamShapes(t *testing.T) {
	s := start(t, Options{})
	resp := post(t, s.URL()+"/v1/responses", responsesBody("Reply only READY.", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	names, datas := sseEvents(t, resp.Body)
	require.Equal(t, "response.created", names[0])
	require.Equal(t, "response.output_item.added", names[1])
	require.Equal(t, "response.output_item.done", names[len(names)-2])
	require.Equal(t, "response.completed", names[len(names)-1])
	var text strings.Builder
	for i, n := range names {
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(datas[i]), &d))
		require.Equal(t, n, d["type"], "data carries the event type")
		if n == "response.output_text.delta" {
			text.WriteString(d["delta"].(string))
		}
	}
	want := DefaultReply + " #" + Digest("Reply only READY.")
	require.Equal(t, want, text.String())
	require.Contains(t, datas[len(datas)-2], want)
	require.EqualValues(t, 1, s.Requests())
	require.EqualValues(t, 1, s.RequestsTo("/v1/responses"))
	lr := s.LastRequest()
	require.Equal(t, "gpt-6-sol", lr.Model)
	require.Equal(t, "Reply only READY.", lr.Prompt)
	require.True(t, lr.Stream)
}

func TestResponsesToolCallAndFollowUp(t *testing.T) {
	s := start(t, Options{})
	resp := post(t, s.URL()+"/v1/responses", responsesBody("please TRIGGER_TOOL", true))
	names, datas := sseEvents(t, resp.Body)
	require.Equal(t, []string{"response.created", "response.output_item.added", "response.output_item.done",
		"response.completed"}, names)
	var done struct {
		Item struct{ Type, Name, Arguments, CallID string } `json:"item"`
	}
	require.NoError(t, json.Unmarshal([]byte(datas[2]), &done))
	require.Equal(t, "function_call", done.Item.Type)
	require.Equal(t, "exec_command", done.Item.Name, "exec_command wins over the first tool")
	require.JSONEq(t, `{"cmd":"echo hello-from-tool && id -u"}`, done.Item.Arguments)

	resp = post(t, s.URL()+"/v1/responses", responsesBody("please TRIGGER_TOOL", true, "tool_output"))
	names, datas = sseEvents(t, resp.Body)
	require.Contains(t, names, "response.output_text.delta")
	require.Contains(t, datas[len(datas)-2], "Tool result received.")

	// TRIGGER_TOOL_FILE=NAME writes NAME where the tool runs; a name with
	// anything but [A-Za-z0-9._-] is cut there (no shell injection).
	resp = post(t, s.URL()+"/v1/responses", responsesBody("please TRIGGER_TOOL_FILE=proof-1.txt;rm -rf /", true))
	_, datas = sseEvents(t, resp.Body)
	require.NoError(t, json.Unmarshal([]byte(datas[2]), &done))
	require.JSONEq(t, `{"cmd":"echo hello-from-tool > proof-1.txt && id -u"}`, done.Item.Arguments)
}

func TestResponsesNonStream(t *testing.T) {
	s := start(t, Options{Reply: "pong"})
	resp := post(t, s.URL()+"/v1/responses", responsesBody("hi", false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Status     string `json:"status"`
		OutputText string `json:"output_text"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "completed", out.Status)
	require.Equal(t, "pong #"+Digest("hi"), out.OutputText)
}

func TestChatCompletions(t *testing.T) {
	s := start(t, Options{})
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"hello"}]}]}`
	resp := post(t, s.URL()+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, datas := sseEvents(t, resp.Body)
	require.Equal(t, "[DONE]", datas[len(datas)-1])
	var text strings.Builder
	for _, d := range datas[:len(datas)-1] {
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &c))
		text.WriteString(c.Choices[0].Delta.Content)
	}
	require.Equal(t, DefaultReply+" #"+Digest("hello"), text.String())

	resp = post(t, s.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
	var c struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
	require.Equal(t, DefaultReply+" #"+Digest("hello"), c.Choices[0].Message.Content)
	require.Equal(t, "stop", c.Choices[0].FinishReason)
	require.EqualValues(t, 2, s.RequestsTo("/v1/chat/completions"))
}

func TestAnthropicMessages(t *testing.T) {
	s := start(t, Options{ValidKeys: []string{"sk-ant-good"}})
	body := `{"model":"claude","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hey"}]}`
	resp := post(t, s.URL()+"/v1/messages", body, "x-api-key", "sk-ant-good", "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Request-Id"))
	names, datas := sseEvents(t, resp.Body)
	require.Equal(t, "message_start", names[0])
	require.Equal(t, "content_block_start", names[1])
	require.Equal(t, "message_stop", names[len(names)-1])
	var text strings.Builder
	for i, n := range names {
		if n == "content_block_delta" {
			var d struct {
				Delta struct{ Type, Text string } `json:"delta"`
			}
			require.NoError(t, json.Unmarshal([]byte(datas[i]), &d))
			require.Equal(t, "text_delta", d.Delta.Type)
			text.WriteString(d.Delta.Text)
		}
	}
	require.Equal(t, DefaultReply+" #"+Digest("hey"), text.String())
	lr := s.LastRequest()
	require.Equal(t, []string{"[redacted]"}, lr.Header["X-Api-Key"], "key values are never recorded")
	require.Equal(t, "2023-06-01", lr.Header.Get("Anthropic-Version"))

	resp = post(t, s.URL()+"/v1/messages", strings.Replace(body, `"stream":true`, `"stream":false`, 1),
		"x-api-key", "sk-ant-good")
	var m struct {
		Content    []struct{ Type, Text string } `json:"content"`
		StopReason string                        `json:"stop_reason"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	require.Equal(t, "end_turn", m.StopReason)
	require.Equal(t, DefaultReply+" #"+Digest("hey"), m.Content[0].Text)

	resp = post(t, s.URL()+"/v1/messages", body, "x-api-key", "sk-ant-bad")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestModels(t *testing.T) {
	s := start(t, Options{})
	resp, err := http.Get(s.URL() + "/v1/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var l struct{ Data []struct{ ID string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	require.NotEmpty(t, l.Data)
	require.EqualValues(t, 0, s.Requests(), "a model list is not a model request")
}

func TestUpfrontAndAuth(t *testing.T) {
	s := start(t, Options{ValidKeys: []string{"good"}})
	resp := post(t, s.URL()+"/v1/responses", `{}`, "Authorization", "Bearer good")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp = post(t, s.URL()+"/v1/responses", `{}`, "Authorization", "Bearer bad")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	var e struct{ Error struct{ Code, Type string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.Equal(t, "invalid_api_key", e.Error.Code)
	require.EqualValues(t, 2, s.UpfrontRequests())
	require.EqualValues(t, 0, s.Requests())
	require.True(t, s.LastRequest().Upfront)
	resp = post(t, s.URL()+"/v1/responses", responsesBody("x", true))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no key at all")
	require.EqualValues(t, 1, s.Requests())
}

func Test401BodyShapes(t *testing.T) {
	cases := []struct {
		fault Fault
		check func(t *testing.T, ct string, body []byte)
	}{
		{Fault401JSONErrorCode, func(t *testing.T, _ string, b []byte) {
			require.JSONEq(t, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key","param":null}}`, string(b))
		}},
		{Fault401JSONErrorNoCode, func(t *testing.T, _ string, b []byte) {
			require.JSONEq(t, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error"}}`, string(b))
		}},
		{Fault401JSONNoError, func(t *testing.T, _ string, b []byte) { require.JSONEq(t, `{"detail":"Unauthorized"}`, string(b)) }},
		{Fault401NonJSON, func(t *testing.T, ct string, b []byte) {
			require.False(t, json.Valid(b))
			require.Contains(t, ct, "text/html")
		}},
		{Fault401Empty, func(t *testing.T, _ string, b []byte) { require.Empty(t, b) }},
	}
	s := start(t, Options{})
	for _, c := range cases {
		t.Run(string(c.fault), func(t *testing.T) {
			s.SetFault(c.fault)
			for _, path := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
				resp := post(t, s.URL()+path, `{}`)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				c.check(t, resp.Header.Get("Content-Type"), b)
			}
		})
	}
}

func TestStatusFaultsAndTriggers(t *testing.T) {
	s := start(t, Options{})
	for _, c := range []struct {
		fault  Fault
		prompt string
		status int
	}{
		{Fault403, "x", http.StatusForbidden},
		{Fault429, "x", http.StatusTooManyRequests},
		{Fault500, "x", http.StatusInternalServerError},
		{FaultNone, "go TRIGGER_500", http.StatusInternalServerError},
		{FaultNone, "go TRIGGER_401", http.StatusUnauthorized},
		{FaultNone, "x", http.StatusOK},
	} {
		s.SetFault(c.fault)
		for _, path := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
			body := responsesBody(c.prompt, true)
			if path != "/v1/responses" {
				body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + c.prompt + `"}]}`
			}
			resp := post(t, s.URL()+path, body)
			require.Equal(t, c.status, resp.StatusCode, "%s %s %q", path, c.fault, c.prompt)
			_, _ = io.Copy(io.Discard, resp.Body)
		}
	}
}

func TestSetFaultOnce(t *testing.T) {
	s := start(t, Options{})
	s.SetFaultOnce(Fault500, 2)
	var got []int
	for range 3 {
		resp := post(t, s.URL()+"/v1/responses", responsesBody("x", true))
		_, _ = io.Copy(io.Discard, resp.Body)
		got = append(got, resp.StatusCode)
	}
	require.Equal(t, []int{500, 500, 200}, got)
	require.EqualValues(t, 3, s.Requests())
}

func TestResponseFailedAndDrop(t *testing.T) {
	s := start(t, Options{})
	resp := post(t, s.URL()+"/v1/responses", responsesBody("TRIGGER_FAILED", true))
	names, datas := sseEvents(t, resp.Body)
	require.Equal(t, []string{"response.created", "response.failed"}, names)
	require.Contains(t, datas[1], "fake failure")

	s.SetFault(FaultDrop)
	resp = post(t, s.URL()+"/v1/responses", responsesBody("x", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the stream is cut without its terminating chunk")
}

func TestSlowStreamsPaced(t *testing.T) {
	s := start(t, Options{SlowInterval: 20 * time.Millisecond, SlowDeltas: 5})
	resp := post(t, s.URL()+"/v1/responses", responsesBody("TRIGGER_SLOW", true))
	names, _ := sseEvents(t, resp.Body)
	deltas := 0
	for _, n := range names {
		if n == "response.output_text.delta" {
			deltas++
		}
	}
	require.Equal(t, 5+len(turn{text: DefaultReply + " #" + Digest("TRIGGER_SLOW")}.deltas()), deltas)

	// A client that gives up ends the slow stream server-side.
	s2 := start(t, Options{Fault: FaultSlow, SlowInterval: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s2.URL()+"/v1/responses",
		strings.NewReader(responsesBody("x", true)))
	resp2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp2.Body)
	require.Error(t, err)
	resp2.Body.Close()
}

func TestResponsesWebSocket(t *testing.T) {
	s := start(t, Options{ValidKeys: []string{"k"}})
	wsURL := "ws" + strings.TrimPrefix(s.URL(), "http") + "/v1/responses"
	_, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL, http.Header{"Authorization": {"Bearer nope"}})
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	c, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL, http.Header{"Authorization": {"Bearer k"}})
	require.NoError(t, err)
	defer c.Close()
	frame := strings.Replace(responsesBody("ws hello", true), "{", `{"type":"response.create",`, 1)
	require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(frame)))
	var types []string
	for {
		var ev map[string]any
		require.NoError(t, c.ReadJSON(&ev))
		types = append(types, ev["type"].(string))
		if ev["type"] == "response.completed" {
			break
		}
	}
	require.Equal(t, "response.created", types[0])
	require.Contains(t, types, "response.output_text.delta")
	require.EqualValues(t, 1, s.Requests())
	require.True(t, s.LastRequest().WebSocket)
}

func TestBadBodies(t *testing.T) {
	s := start(t, Options{})
	for _, b := range []string{``, `[]`, `null`, `{"model":1}`, `{"input":{}}`, `not json`} {
		resp := post(t, s.URL()+"/v1/responses", b)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
	}
	require.EqualValues(t, 0, s.Requests())
	require.EqualValues(t, 6, s.RequestsTo("/v1/responses"))
}

func TestStartRejects(t *testing.T) {
	_, err := Start(t.Context(), Options{Addr: "0.0.0.0:0"})
	require.ErrorIs(t, err, ErrBadOptions)
	_, err = Start(t.Context(), Options{Fault: "nope"})
	require.ErrorIs(t, err, ErrBadOptions)
}

// NonLoopback lets the fake serve as a test cluster's Service (every
// address of its Pod).
func TestStartNonLoopback(t *testing.T) {
	s, err := Start(t.Context(), Options{Addr: "0.0.0.0:0", NonLoopback: true})
	require.NoError(t, err)
	defer s.Close()
	resp := post(t, fmt.Sprintf("http://127.0.0.1:%d/v1/responses", s.Port()), `{"model":"m","input":"x"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestLoadKeyFileAndServe(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(p, []byte("a\n\nb\n"), 0o644))
	_, err := LoadKeyFile(p)
	require.ErrorIs(t, err, ErrKeyFileMode)
	require.NoError(t, os.Chmod(p, 0o600))
	keys, err := LoadKeyFile(p)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, keys)
	// A Secret volume entry: group-readable by this process's group.
	require.NoError(t, os.Chmod(p, 0o440))
	require.NoError(t, os.Chown(p, os.Getuid(), os.Getgid()))
	_, err = LoadKeyFile(p)
	require.NoError(t, err, "a Secret volume's group-readable file is accepted")
	require.NoError(t, os.Chmod(p, 0o620))
	_, err = LoadKeyFile(p)
	require.ErrorIs(t, err, ErrKeyFileMode, "group-writable is refused")
	require.NoError(t, os.Chmod(p, 0o600))

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, Options{ValidKeys: keys}, pw) }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	require.Regexp(t, `^PORT \d+\n$`, line)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	cancel()
	require.NoError(t, <-errc)
}

func TestDecodeRequest(t *testing.T) {
	r, err := DecodeRequest(pathResponses, []byte(`{"model":"m","input":"plain"}`))
	require.NoError(t, err)
	require.Equal(t, "plain", r.Prompt)
	r, err = DecodeRequest(pathMessages, []byte(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, "a", r.Prompt)
	require.True(t, r.ToolResult)
	r, err = DecodeRequest(pathChat, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, r.Empty)
	_, err = DecodeRequest("/v1/other", []byte(`{"a":1}`))
	require.ErrorIs(t, err, ErrBadRequest)
	_, err = DecodeRequest(pathChat, bytes.Repeat([]byte(" "), maxBody+1))
	require.ErrorIs(t, err, ErrBadRequest)
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(pathResponses, []byte(responsesBody("hi TRIGGER_TOOL", true, "tool_output")))
	f.Add(pathChat, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"function":{"name":"f"}}]}`))
	f.Add(pathMessages, []byte(`{"messages":[{"role":"user","content":"x"}],"stream":null}`))
	f.Add(pathResponses, []byte(`{}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		r, err := DecodeRequest(path, body)
		if err != nil {
			require.ErrorIs(t, err, ErrBadRequest)
			require.Equal(t, Request{}, r)
			return
		}
		require.True(t, json.Valid(body))
		if r.Empty {
			require.Equal(t, Request{Empty: true}, r)
		}
		require.Len(t, Digest(r.Prompt), 8)
	})
}

func TestPrewarmIsNotAModelRequest(t *testing.T) {
	s := start(t, Options{})
	s.SetFaultOnce(Fault500, 1)
	body := strings.Replace(responsesBody("hi", true), "{", `{"generate":false,`, 1)
	resp := post(t, s.URL()+"/v1/responses", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a warm-up takes no fault")
	names, _ := sseEvents(t, resp.Body)
	require.Equal(t, []string{"response.created", "response.completed"}, names)
	require.EqualValues(t, 1, s.PrewarmRequests())
	require.EqualValues(t, 0, s.Requests())
	resp = post(t, s.URL()+"/v1/responses", responsesBody("hi", true))
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the once-fault waited for the real request")

	// Over WebSocket: warm-up frame, then the real request (Codex 0.169.0's order).
	wsURL := "ws" + strings.TrimPrefix(s.URL(), "http") + "/v1/responses"
	c, _, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL, nil)
	require.NoError(t, err)
	defer c.Close()
	for i, frame := range []string{
		strings.Replace(responsesBody("ws", true), "{", `{"type":"response.create","generate":false,`, 1),
		strings.Replace(responsesBody("ws", true), "{", `{"type":"response.create","previous_response_id":"x",`, 1),
	} {
		require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(frame)))
		var types []string
		for {
			var ev map[string]any
			require.NoError(t, c.ReadJSON(&ev))
			types = append(types, ev["type"].(string))
			if ev["type"] == "response.completed" {
				break
			}
		}
		if i == 0 {
			require.Equal(t, []string{"response.created", "response.completed"}, types)
		} else {
			require.Contains(t, types, "response.output_text.delta")
		}
	}
	require.EqualValues(t, 2, s.PrewarmRequests())
	require.EqualValues(t, 2, s.Requests())
}

func TestChatAndMessagesToolsAndStreamFaults(t *testing.T) {
	s := start(t, Options{SlowInterval: time.Millisecond, SlowDeltas: 3})
	chat := func(prompt string, extra string) string {
		return `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"read"}}],"messages":[{"role":"user","content":"` +
			prompt + `"}` + extra + `]}`
	}
	msgs := func(prompt string, extra string) string {
		return `{"model":"c","stream":true,"max_tokens":9,"tools":[{"name":"read","input_schema":{}}],"messages":[{"role":"user","content":"` +
			prompt + `"}` + extra + `]}`
	}

	// Chat: a tool call, then the answer once the tool result is in.
	resp := post(t, s.URL()+"/v1/chat/completions", chat("TRIGGER_TOOL", ""))
	_, datas := sseEvents(t, resp.Body)
	require.Equal(t, "[DONE]", datas[len(datas)-1])
	joined := strings.Join(datas, "\n")
	require.Contains(t, joined, `"tool_calls":[{"function":{"arguments":"{\"command\":\"echo hello-from-tool\"}","name":"read"}`)
	require.Contains(t, joined, `"finish_reason":"tool_calls"`)
	resp = post(t, s.URL()+"/v1/chat/completions", chat("TRIGGER_TOOL", `,{"role":"assistant","content":null},{"role":"tool","tool_call_id":"c","content":"x"}`))
	_, datas = sseEvents(t, resp.Body)
	require.True(t, strings.HasPrefix(chatText(t, datas), "Tool result received."))

	// Messages: a tool_use block, then the answer after a tool_result.
	resp = post(t, s.URL()+"/v1/messages", msgs("TRIGGER_TOOL", ""))
	names, datas := sseEvents(t, resp.Body)
	require.Equal(t, "message_stop", names[len(names)-1])
	joined = strings.Join(datas, "\n")
	require.Contains(t, joined, `"type":"tool_use"`)
	require.Contains(t, joined, `"input_json_delta"`)
	require.Contains(t, joined, `"stop_reason":"tool_use"`)
	resp = post(t, s.URL()+"/v1/messages", msgs("TRIGGER_TOOL", `,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}`))
	names, datas = sseEvents(t, resp.Body)
	require.True(t, strings.HasPrefix(anthropicText(t, names, datas), "Tool result received."))

	// Stream faults on both APIs.
	resp = post(t, s.URL()+"/v1/chat/completions", chat("TRIGGER_FAILED", ""))
	_, datas = sseEvents(t, resp.Body)
	require.Contains(t, datas[len(datas)-1], `"error"`)
	resp = post(t, s.URL()+"/v1/messages", msgs("TRIGGER_FAILED", ""))
	names, _ = sseEvents(t, resp.Body)
	require.Equal(t, "error", names[len(names)-1])
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		body := chat("TRIGGER_SLOW", "")
		if path == "/v1/messages" {
			body = msgs("TRIGGER_SLOW", "")
		}
		resp = post(t, s.URL()+path, body)
		names, datas = sseEvents(t, resp.Body)
		text := chatText(t, datas)
		if path == "/v1/messages" {
			text = anthropicText(t, names, datas)
		}
		require.Equal(t, "..."+DefaultReply+" #"+Digest("TRIGGER_SLOW"), text, path)
		s.SetFault(FaultDrop)
		resp = post(t, s.URL()+path, strings.Replace(body, "TRIGGER_SLOW", "plain", 1))
		_, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, path)
		s.SetFault(FaultNone)
	}
}

// chatText joins the content deltas of a chat completion stream.
func chatText(t *testing.T, datas []string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range datas {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &c))
		if len(c.Choices) > 0 {
			b.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return b.String()
}

// anthropicText joins the text deltas of a Messages stream.
func anthropicText(t *testing.T, names, datas []string) string {
	t.Helper()
	var b strings.Builder
	for i, n := range names {
		if n != "content_block_delta" {
			continue
		}
		var d struct {
			Delta struct{ Text string } `json:"delta"`
		}
		require.NoError(t, json.Unmarshal([]byte(datas[i]), &d))
		b.WriteString(d.Delta.Text)
	}
	return b.String()
}

func TestEchoesMarkersOfTheInstructions(t *testing.T) {
	s := start(t, Options{Reply: "pong"})
	body := `{"model":"m","stream":false,"instructions":"# AGENTS.md\nSay OCE-ECHO-agents-v2 and OCE-ECHO-agents-v2.",` +
		`"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi OCE-ECHO-user"}]}]}`
	resp := post(t, s.URL()+"/v1/responses", body)
	var out struct {
		OutputText string `json:"output_text"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "pong #"+Digest("hi OCE-ECHO-user")+" [OCE-ECHO-agents-v2]", out.OutputText,
		"each instruction marker once; the prompt's own marker is not an echo")

	r, err := DecodeRequest(pathChat, []byte(`{"messages":[{"role":"system","content":"OCE-ECHO-sys"},{"role":"user","content":"q"}]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"OCE-ECHO-sys"}, r.Echo)
	r, err = DecodeRequest(pathMessages, []byte(`{"system":"no markers","messages":[{"role":"user","content":"q"}]}`))
	require.NoError(t, err)
	require.Empty(t, r.Echo)
}

// TestUpfrontOnlyKey: such a key passes the upfront check's empty request
// and is refused on every model request (HTTP and WebSocket paths alike go
// through authorized).
func TestUpfrontOnlyKey(t *testing.T) {
	s := start(t, Options{ValidKeys: []string{"good"}})
	k := UpfrontOnlyKeyPrefix + "1"
	resp := post(t, s.URL()+"/v1/responses", `{}`, "Authorization", "Bearer "+k)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the upfront check passes")
	resp = post(t, s.URL()+"/v1/responses", responsesBody("x", false), "Authorization", "Bearer "+k)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a model request is refused")
	resp = post(t, s.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "Authorization", "Bearer "+k)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	open := start(t, Options{})
	resp = post(t, open.URL()+"/v1/responses", responsesBody("x", false), "Authorization", "Bearer "+k)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "refused even when every key is accepted")
}
