package appserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gws "github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// scripted is a gorilla/websocket stand-in for the app-server: it checks the
// bearer, answers initialize like the real server, and hands every other
// frame to script.
type scripted struct {
	t      *testing.T
	token  string
	script func(p *peer, m map[string]any)
	srv    *httptest.Server
}

// peer is the server side of one connection.
type peer struct {
	t    *testing.T
	conn *gws.Conn
	mu   sync.Mutex
	got  chan map[string]any // frames the script did not consume
}

func (p *peer) send(v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := json.Marshal(v)
	require.NoError(p.t, err)
	_ = p.conn.WriteMessage(gws.TextMessage, b)
}

func newScripted(t *testing.T, token string, script func(p *peer, m map[string]any)) *scripted {
	s := &scripted{t: t, token: token, script: script}
	up := gws.Upgrader{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+s.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		p := &peer{t: t, conn: conn, got: make(chan map[string]any, 64)}
		defer conn.Close()
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			_, hasJSONRPC := m["jsonrpc"]
			require.False(t, hasJSONRPC, "the app-server protocol has no jsonrpc field")
			switch m["method"] {
			case MethodInitialize:
				p.send(map[string]any{"id": m["id"], "result": map[string]any{"userAgent": "scripted/0.169.0", "codexHome": "/x", "platformFamily": "unix", "platformOs": "linux"}})
			case MethodInitialized:
			default:
				if s.script != nil {
					s.script(p, m)
				}
				p.got <- m
			}
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) url() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func note(method string, params map[string]any) map[string]any {
	return map[string]any{"method": method, "params": params}
}

func TestDialRefusesWithoutToken(t *testing.T) {
	s := newScripted(t, "tok-1234", nil)
	_, err := Dial(ctxT(t), s.url(), "")
	require.ErrorIs(t, err, ErrUnauthorized)
	_, err = Dial(ctxT(t), s.url(), "wrong")
	require.ErrorIs(t, err, ErrUnauthorized)
	require.ErrorIs(t, Probe(ctxT(t), s.url(), "wrong"), ErrUnauthorized)
	require.NoError(t, Probe(ctxT(t), s.url(), "tok-1234"))
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	require.Equal(t, "scripted/0.169.0", c.Initialized().UserAgent)
	require.NoError(t, c.Close())
}

// Responses are matched by id even when they arrive in the other order.
func TestCallsRoutedByID(t *testing.T) {
	var mu sync.Mutex
	var held []map[string]any
	s := newScripted(t, "t0k3n", func(p *peer, m map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, m)
		if len(held) == 2 { // answer the second first, and as a string id
			p.send(map[string]any{"id": fmt.Sprint(held[1]["id"]), "result": map[string]any{"echo": held[1]["method"]}})
			p.send(map[string]any{"id": held[0]["id"], "result": map[string]any{"echo": held[0]["method"]}})
		}
	})
	c, err := Dial(ctxT(t), s.url(), "t0k3n")
	require.NoError(t, err)
	defer c.Close()
	var wg sync.WaitGroup
	got := map[string]string{}
	var gmu sync.Mutex
	for _, m := range []string{"a/one", "b/two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r struct{ Echo string }
			require.NoError(t, c.Call(ctxT(t), m, map[string]any{}, &r))
			gmu.Lock()
			got[m] = r.Echo
			gmu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]string{"a/one": "a/one", "b/two": "b/two"}, got)
}

func TestRPCError(t *testing.T) {
	s := newScripted(t, "tok-1234", func(p *peer, m map[string]any) {
		p.send(map[string]any{"id": m["id"], "error": map[string]any{"code": -32600, "message": "Invalid request: unknown variant `nope`"}})
	})
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	defer c.Close()
	err = c.Call(ctxT(t), "nope", nil, nil)
	require.ErrorIs(t, err, ErrRPC)
	var re *RPCError
	require.True(t, errors.As(err, &re))
	require.Equal(t, -32600, re.Code)
}

// turnScript plays one turn the way the real server orders it: turn/started
// and items before the turn/start result, notifications of another thread
// and another turn interleaved.
func turnScript(final string) func(p *peer, m map[string]any) {
	return func(p *peer, m map[string]any) {
		switch m["method"] {
		case MethodThreadStart:
			p.send(map[string]any{"id": m["id"], "result": map[string]any{"thread": map[string]any{"id": "th1", "modelProvider": "fake", "model": "m"}}})
		case MethodTurnStart:
			params := m["params"].(map[string]any)
			th := params["threadId"].(string)
			p.send(note("turn/started", map[string]any{"threadId": th, "turn": map[string]any{"id": "tu1", "status": "inProgress"}}))
			p.send(note(MethodAgentDelta, map[string]any{"threadId": "other", "turnId": "x", "itemId": "m0", "delta": "NOPE"}))
			p.send(note(MethodAgentDelta, map[string]any{"threadId": th, "turnId": "tu0", "itemId": "m0", "delta": "OLD"}))
			p.send(note(MethodAgentDelta, map[string]any{"threadId": th, "turnId": "tu1", "itemId": "m1", "delta": "Hello "}))
			p.send(map[string]any{"id": m["id"], "result": map[string]any{"turn": map[string]any{"id": "tu1", "status": "inProgress", "items": []any{}, "error": nil}}})
			p.send(note(MethodAgentDelta, map[string]any{"threadId": th, "turnId": "tu1", "itemId": "m1", "delta": "world"}))
			p.send(note(MethodItemCompleted, map[string]any{"threadId": th, "turnId": "tu1", "item": map[string]any{"type": "agentMessage", "id": "m1", "text": "Hello world"}}))
			switch final {
			case "close":
				p.conn.Close()
			case "failed":
				p.send(note(MethodTurnCompleted, map[string]any{"threadId": th, "turn": map[string]any{"id": "tu1", "status": "failed",
					"error": map[string]any{"message": "unexpected status 401", "codexErrorInfo": map[string]any{"httpConnectionFailed": map[string]any{"httpStatusCode": 401}}}}}))
			case "hang":
			default:
				p.send(note(MethodTurnCompleted, map[string]any{"threadId": th, "turn": map[string]any{"id": "tu1", "status": "completed", "error": nil}}))
			}
		case MethodTurnInterrupt:
			p.send(map[string]any{"id": m["id"], "result": map[string]any{}})
			p.send(note(MethodTurnCompleted, map[string]any{"threadId": "th1", "turn": map[string]any{"id": "tu1", "status": "interrupted", "error": nil}}))
		}
	}
}

func TestRunTurnOutOfOrder(t *testing.T) {
	s := newScripted(t, "tok-1234", turnScript("completed"))
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	defer c.Close()
	th, err := c.StartThread(ctxT(t), ThreadOptions{Cwd: "/w", ApprovalPolicy: ApprovalNever, Sandbox: SandboxReadOnly, Ephemeral: true})
	require.NoError(t, err)
	require.Equal(t, "th1", th.ID)
	var deltas []string
	res, err := c.RunTurn(ctxT(t), th.ID, "hi", func(d string) { deltas = append(deltas, d) })
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, res.Status)
	require.Equal(t, "tu1", res.TurnID)
	require.Equal(t, []string{"Hello ", "world"}, deltas)
	require.Equal(t, "Hello world", res.Text)
	require.Len(t, res.Items, 1)
	require.False(t, res.Disconnected)
}

// A turn/completed that arrives before the turn/start answer, with no
// turn/started at all, is still this turn's end.
func TestRunTurnCompletedBeforeAnswer(t *testing.T) {
	s := newScripted(t, "tok-1234", func(p *peer, m map[string]any) {
		if m["method"] == MethodTurnStart {
			p.send(note(MethodAgentDelta, map[string]any{"threadId": "th9", "turnId": "tu9", "itemId": "a", "delta": "early"}))
			p.send(note(MethodTurnCompleted, map[string]any{"threadId": "th9", "turn": map[string]any{"id": "tu9", "status": "completed"}}))
			p.send(map[string]any{"id": m["id"], "result": map[string]any{"turn": map[string]any{"id": "tu9", "status": "inProgress"}}})
		}
	})
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	defer c.Close()
	res, err := c.RunTurn(ctxT(t), "th9", "hi", nil)
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, res.Status)
	require.Equal(t, "early", res.Text)
}

func TestRunTurnFailed(t *testing.T) {
	s := newScripted(t, "tok-1234", turnScript("failed"))
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	defer c.Close()
	res, err := c.RunTurn(ctxT(t), "th1", "hi", nil)
	require.NoError(t, err)
	require.Equal(t, StatusFailed, res.Status)
	require.Equal(t, "httpConnectionFailed", res.Error.Kind())
	require.Equal(t, 401, res.Error.HTTPStatus())
}

// A connection that closes mid-turn reports interrupted, never completed.
func TestRunTurnDisconnectedIsInterrupted(t *testing.T) {
	s := newScripted(t, "tok-1234", turnScript("close"))
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	res, err := c.RunTurn(ctxT(t), "th1", "hi", nil)
	require.NoError(t, err)
	require.Equal(t, StatusInterrupted, res.Status)
	require.True(t, res.Disconnected)
	require.Equal(t, "Hello world", res.Text)
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrClosed)
	require.ErrorIs(t, c.Call(ctxT(t), "x", nil, nil), ErrClosed)
}

func TestRunTurnContextInterrupts(t *testing.T) {
	s := newScripted(t, "tok-1234", turnScript("hang"))
	c, err := Dial(ctxT(t), s.url(), "tok-1234")
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithCancel(ctxT(t))
	res, err := c.RunTurn(ctx, "th1", "hi", func(d string) {
		if d == "world" {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, StatusInterrupted, res.Status)
	require.False(t, res.Disconnected)
}

// Server requests have their own id sequence (starting at 0, like ours):
// they are answered by method through the policy, never confused with
// responses.
func TestApprovalRequests(t *testing.T) {
	answers := make(chan map[string]any, 8)
	var sentID any
	s := newScripted(t, "tok-1234", func(p *peer, m map[string]any) {
		if m["method"] == "go" {
			sentID = m["id"]
			p.send(map[string]any{"id": 0, "method": MethodCommandApproval, "params": map[string]any{"threadId": "th1", "turnId": "tu1", "itemId": "call_1", "command": "rm -rf /"}})
			p.send(map[string]any{"id": 1, "method": MethodCommandApproval, "params": map[string]any{"threadId": "th1", "turnId": "tu1", "itemId": "call_2", "command": "echo ok"}})
			p.send(map[string]any{"id": 2, "method": MethodLegacyExecApproval, "params": map[string]any{"conversationId": "th1", "callId": "c3", "command": []string{"echo", "ok"}}})
			p.send(map[string]any{"id": 3, "method": "item/tool/requestUserInput", "params": map[string]any{}})
			return
		}
		if _, isReq := m["method"]; !isReq {
			answers <- m
		}
	})
	var seen []ApprovalRequest
	var mu sync.Mutex
	policy := func(_ context.Context, r ApprovalRequest) Decision {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		if strings.HasPrefix(r.Command, "echo") {
			return Accept
		}
		return Decline
	}
	c, err := Dial(ctxT(t), s.url(), "tok-1234", WithApprovalPolicy(policy))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Notify(ctxT(t), "go-note", nil))
	go func() { _ = c.Call(context.Background(), "go", nil, nil) }()
	got := map[float64]map[string]any{}
	for len(got) < 4 {
		select {
		case a := <-answers:
			got[a["id"].(float64)] = a
		case <-time.After(5 * time.Second):
			t.Fatalf("answers: %v", got)
		}
	}
	require.NotNil(t, sentID)
	require.Equal(t, "decline", got[0]["result"].(map[string]any)["decision"])
	require.Equal(t, "accept", got[1]["result"].(map[string]any)["decision"])
	require.Equal(t, "approved", got[2]["result"].(map[string]any)["decision"])
	require.EqualValues(t, CodeMethodNotFound, got[3]["error"].(map[string]any)["code"])
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	for _, r := range seen {
		require.Equal(t, "th1", r.ThreadID)
	}
}

func TestDefaultPolicyDeclines(t *testing.T) {
	require.Equal(t, "decline", wireDecision(MethodFileChangeApproval, DeclineAll(context.Background(), ApprovalRequest{})))
	require.Equal(t, "denied", wireDecision(MethodLegacyPatchApproval, Decline))
	require.Equal(t, "abort", wireDecision(MethodLegacyPatchApproval, Cancel))
	require.Equal(t, "cancel", wireDecision(MethodCommandApproval, Cancel))
	require.Equal(t, "decline", wireDecision(MethodCommandApproval, Decision("weird")))
}

func TestMessageKinds(t *testing.T) {
	for _, tc := range []struct {
		frame string
		want  kind
	}{
		{`{"id":0,"result":{}}`, kindResponse},
		{`{"id":"0","error":{"code":1,"message":"x"}}`, kindResponse},
		{`{"id":0,"method":"item/commandExecution/requestApproval","params":{}}`, kindRequest},
		{`{"method":"turn/started","params":{}}`, kindNotification},
		{`{"id":null,"method":"x"}`, kindNotification},
		{`{"id":3}`, kindInvalid},
		{`{}`, kindInvalid},
	} {
		var m message
		require.NoError(t, json.Unmarshal([]byte(tc.frame), &m))
		require.Equal(t, tc.want, m.kind(), tc.frame)
	}
	require.Equal(t, idKey(json.RawMessage(`7`)), idKey(json.RawMessage(`"7"`)))
	th, tu := scopeOf(json.RawMessage(`{"threadId":"a","turn":{"id":"b"}}`))
	require.Equal(t, [2]string{"a", "b"}, [2]string{th, tu})
}

func FuzzRouteFrame(f *testing.F) {
	for _, s := range []string{`{"id":0,"result":{}}`, `{"method":"turn/completed","params":{"threadId":"a","turn":{"id":"b","status":"completed","error":{"message":"m","codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":401}}}}}}`, `{"id":"x","method":"y"}`, `[]`, `{"id":{"a":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m message
		if json.Unmarshal(b, &m) != nil {
			return
		}
		k := m.kind()
		if k == kindResponse {
			_ = idKey(m.ID)
		}
		scopeOf(m.Params)
		st := &turnState{}
		st.apply(Notification{Method: m.Method, Params: m.Params})
		if st.res.Error != nil {
			_ = st.res.Error.Kind()
			_ = st.res.Error.HTTPStatus()
		}
	})
}
