package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
)

// send sends body (JSON of v, or a string verbatim) with extra headers.
func (e *env) send(method, path string, v any, hdr map[string]string) resp {
	e.t.Helper()
	var body io.Reader
	switch x := v.(type) {
	case nil:
	case string:
		body = strings.NewReader(x)
	default:
		b, err := json.Marshal(x)
		require.NoError(e.t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return resp{status: res.StatusCode, body: data, header: res.Header}
}

func key(k string) map[string]string { return map[string]string{api.IdempotencyKeyHeader: k} }

// TestEveryKeyedWriteReplaysItsAnswer: for every state write, a repeat of
// the same key and request answers the original status and body byte for
// byte, marked replayed, and changes nothing.
func TestEveryKeyedWriteReplaysItsAnswer(t *testing.T) {
	e := newEnv(t)
	doc := json.RawMessage(admission.ExampleEmbeddedAnthropic)
	auth := map[string]any{"method": "api_key", "credentialKind": "secret", "sourceRef": "secret://team/anthropic#key"}
	for i, w := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"POST", "/v1/namespaces", map[string]any{"name": "team"}, 201},
		{"POST", "/v1/namespaces/team/configurations", map[string]any{"name": "cfg", "document": doc}, 201},
		{"POST", "/v1/namespaces/team/credentials", map[string]any{"name": "anthropic", "values": map[string]string{"key": "v1"}}, 201},
		{"POST", "/v1/namespaces/team/credentials/anthropic/rotate", map[string]any{"values": map[string]string{"key": "v2"}}, 200},
		{"PUT", "/v1/namespaces/team/configurations/cfg", map[string]any{"document": doc}, 200},
		{"POST", "/v1/namespaces/team/agents", map[string]any{"name": "bot", "configuration": "cfg", "harnessAuth": auth}, 201},
		{"PATCH", "/v1/namespaces/team/agents/bot", map[string]any{"plugins": []string{"p1"}}, 200},
		{"POST", "/v1/namespaces/team/agents/bot/deploy", nil, 202},
		{"POST", "/v1/namespaces/team/agents/bot/stop", nil, 202},
		{"DELETE", "/v1/namespaces/team/agents/bot", nil, 202},
	} {
		k := key("key-" + string(rune('a'+i)))
		first := e.send(w.method, w.path, w.body, k)
		require.Equal(t, w.status, first.status, "%s %s: %s", w.method, w.path, first.body)
		require.Empty(t, first.header.Get(api.ReplayedHeader))
		require.NotEmpty(t, first.header.Get(api.IndexHeader))
		digest, proposals := e.b.M.Digest(), e.b.Proposals()
		again := e.send(w.method, w.path, w.body, k)
		require.Equal(t, w.status, again.status, "%s %s", w.method, w.path)
		require.Equal(t, string(first.body), string(again.body), "%s %s: the original answer", w.method, w.path)
		require.Equal(t, "true", again.header.Get(api.ReplayedHeader))
		require.Equal(t, digest, e.b.M.Digest(), "%s %s: a replay changes nothing", w.method, w.path)
		require.Equal(t, proposals, e.b.Proposals(), "answered from the record without a proposal")
	}
}

func TestKeyReusedForAnotherRequest(t *testing.T) {
	e := newEnv(t)
	e.send("POST", "/v1/namespaces", map[string]any{"name": "team"}, key("k1"))
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/namespaces", `{"name":"other"}`}, // another body
		{"POST", "/v1/namespaces", `{"name": "team"}`}, // the same JSON, other bytes
		{"POST", "/v1/namespaces/team/agents", `{}`},   // another path
		{"DELETE", "/v1/namespaces/team/agents/x", ``}, // another route altogether
	} {
		before := e.b.M.Digest()
		r := e.send(c.method, c.path, c.body, key("k1"))
		require.Equal(t, 422, r.status, "%s %s %s: %s", c.method, c.path, c.body, r.body)
		require.Equal(t, "IDEMPOTENCY_KEY_REUSED", r.errCode(t))
		require.Equal(t, before, e.b.M.Digest())
	}
	// Bad keys are refused before anything runs.
	for _, k := range []string{strings.Repeat("k", 256), "with space", "tab\tkey", "é"} {
		r := e.send("POST", "/v1/namespaces", map[string]any{"name": "x"}, key(k))
		require.Equal(t, 400, r.status, "%q", k)
		require.Equal(t, "INVALID_REQUEST", r.errCode(t))
	}
	require.Len(t, e.b.M.Namespaces(), 1)
	// A key on a read is ignored.
	r := e.send("GET", "/v1/namespaces", nil, key("k1"))
	require.Equal(t, 200, r.status)
}

// TestConcurrentRepeatTakesEffectOnce: the original is still on its way to
// the log when its repeat arrives (its answer was lost in flight): both pass
// the leader's lookup, both propose, and the state machine applies the
// first and answers the second from its record.
func TestConcurrentRepeatTakesEffectOnce(t *testing.T) {
	e := newEnv(t)
	e.seed()
	inFlight, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.b.ProposeHook = func(typ string) error {
		if typ == "AdmitRevision" {
			first := false
			once.Do(func() { first = true })
			if first {
				close(inFlight)
				<-released
			}
		}
		return nil
	}
	answers := make(chan resp, 1)
	go func() { answers <- e.send("POST", "/v1/namespaces/team/agents/bot/deploy", nil, key("dup")) }()
	<-inFlight
	second := e.send("POST", "/v1/namespaces/team/agents/bot/deploy", nil, key("dup"))
	close(released)
	first := <-answers
	require.Equal(t, 202, first.status, "%s", first.body)
	require.Equal(t, 202, second.status, "%s", second.body)
	require.Equal(t, string(second.body), string(first.body))
	require.Equal(t, "true", first.header.Get(api.ReplayedHeader), "the later entry found the record")
	require.Len(t, e.b.M.Revisions(e.b.M.Agents("")[0].ID), 1)
}

// TestForwardFailureAfterSendIsOutcomeUnknown: a follower whose forward
// reached the leader but lost the answer says OUTCOME_UNKNOWN, not
// NOT_LEADER; a leader it cannot reach at all is NOT_LEADER.
func TestForwardFailureAfterSendIsOutcomeUnknown(t *testing.T) {
	var got sync.WaitGroup
	got.Add(1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got.Done()
		panic(http.ErrAbortHandler) // the answer is lost
	}))
	t.Cleanup(leader.Close)
	b := apitest.New()
	b.SetFollower(leader.Listener.Addr().String())
	f := httptest.NewServer(api.New(api.Config{Token: testToken, ForwardWrites: true, Metrics: prometheus.NewRegistry()}, b))
	t.Cleanup(f.Close)
	e := &env{t: t, b: b, srv: f}
	r := e.send("POST", "/v1/namespaces", map[string]any{"name": "team"}, key("k"))
	got.Wait()
	require.Equal(t, 503, r.status)
	require.Equal(t, "OUTCOME_UNKNOWN", r.errCode(t))
	require.Equal(t, true, r.json(t)["error"].(map[string]any)["details"].(map[string]any)["outcomeUnknown"])

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := ln.Addr().String()
	require.NoError(t, ln.Close())
	b.SetFollower(gone)
	r = e.send("POST", "/v1/namespaces", map[string]any{"name": "team"}, key("k"))
	require.Equal(t, 503, r.status)
	require.Equal(t, "NOT_LEADER", r.errCode(t))
}
