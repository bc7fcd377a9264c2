package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/ocproto"
)

// connectorDriver is the memory driver plus a Gateway the coordinator can
// reach as an operator.
type connectorDriver struct {
	*memory.Driver
	url, password string
}

func (d connectorDriver) GatewayOperator(_ context.Context, a state.Agent) (compute.GatewayOperator, error) {
	if a.ActiveRevisionID == "" {
		return compute.GatewayOperator{}, compute.ErrNoEndpoint
	}
	return compute.GatewayOperator{RevisionID: a.ActiveRevisionID, URL: d.url, Password: d.password}, nil
}

// activate makes the Agent's first revision active (as the engine would).
func activate(t *testing.T, e *env, agent string) string {
	t.Helper()
	dep := e.expect(202, "POST", "/v1/namespaces/team/agents/"+agent+"/deploy", nil)
	ref := state.ClaimRef{WorkID: dep["workId"].(string), Owner: "test"}
	_, err := e.b.Apply(state.CmdClaimWork, state.ClaimWork{WorkID: ref.WorkID, Owner: ref.Owner, LeaseExpiry: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = e.b.Apply(state.CmdActivateRevision, state.ActivateRevision{ClaimRef: ref})
	require.NoError(t, err)
	return dep["id"].(string)
}

// events reads the NDJSON answer.
func events(t *testing.T, body []byte) []wire.MessageEvent {
	t.Helper()
	var out []wire.MessageEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var ev wire.MessageEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		out = append(out, ev)
	}
	return out
}

// POST …/messages relays one turn to the Agent's Gateway with the password
// the driver holds and streams the reply; a failed turn ends the stream
// with its closed code; refusals come before the stream, changing nothing.
func TestMessagesRelayATurn(t *testing.T) {
	e := newEnv(t)
	e.seed()
	path := "/v1/namespaces/team/agents/bot/messages"
	e.reject(409, "RESOURCE_CONFLICT", "POST", path, map[string]any{"message": "hi"})
	revID := activate(t, e, "bot")
	e.reject(404, "NOT_FOUND", "POST", path, map[string]any{"message": "hi"}) // the memory driver relays nothing
	e.b.SetDriver(connectorDriver{Driver: memory.New(memory.DefaultCapabilities()), url: "ws://gw.test:18789", password: "pw-1"})
	e.reject(400, "INVALID_REQUEST", "POST", path, map[string]any{"message": ""})
	e.reject(400, "INVALID_REQUEST", "POST", path, map[string]any{"message": "hi", "extra": 1})
	e.reject(404, "NOT_FOUND", "POST", "/v1/namespaces/team/agents/nobody/messages", map[string]any{"message": "hi"})

	var got ocproto.OperatorConfig
	var session, message string
	defer api.SetChat(func(_ context.Context, oc ocproto.OperatorConfig, s, m string, h ocproto.ChatHandler) (string, error) {
		got, session, message = oc, s, m
		h.Delta("Hel")
		h.Delta("lo")
		return "Hello", nil
	})()
	r := e.do("POST", path, map[string]any{"message": "hi"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "application/x-ndjson", r.header.Get("Content-Type"))
	require.Equal(t, []wire.MessageEvent{{RevisionID: revID}, {Delta: "Hel"}, {Delta: "lo"}, {Done: true, Reply: "Hello"}}, events(t, r.body))
	require.Equal(t, ocproto.OperatorConfig{URL: "ws://gw.test:18789", Password: "pw-1"}, got)
	require.Equal(t, "main", session, "the default session")
	require.Equal(t, "hi", message)
	require.NotContains(t, string(r.body), "pw-1", "the password never leaves the coordinator")

	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("%w: model said no", ocproto.ErrChatFailed), "TURN_FAILED"},
		{fmt.Errorf("%w: context deadline exceeded", ocproto.ErrUnreachable), "UNAVAILABLE"},
		{fmt.Errorf("gateway connection closed: %w", ocproto.ErrClosed), "DISCONNECTED"},
	} {
		restore := api.SetChat(func(context.Context, ocproto.OperatorConfig, string, string, ocproto.ChatHandler) (string, error) {
			return "", tc.err
		})
		r := e.do("POST", path, map[string]any{"message": "hi", "session": "s2"})
		restore()
		require.Equal(t, http.StatusOK, r.status)
		evs := events(t, r.body)
		require.Len(t, evs, 2)
		require.NotNil(t, evs[1].Error)
		require.EqualValues(t, tc.code, evs[1].Error.Code)
	}
}
