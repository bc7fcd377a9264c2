package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/state"
)

// messengerDriver is the memory driver plus a scripted relay.
type messengerDriver struct {
	*memory.Driver
	turn func(a state.Agent, session, message string, delta func(string)) (string, error)
}

func (d messengerDriver) SendMessage(_ context.Context, a state.Agent, session, message string, delta func(string)) (string, string, error) {
	reply, err := d.turn(a, session, message, delta)
	return reply, a.ActiveRevisionID, err
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

// POST …/messages relays one turn to the Agent's Gateway through the
// driver and streams the reply; a failed turn ends the stream with its
// closed code; refusals come before the stream, changing nothing.
func TestMessagesRelayATurn(t *testing.T) {
	e := newEnv(t)
	e.seed()
	path := "/v1/namespaces/team/agents/bot/messages"
	e.reject(409, "RESOURCE_CONFLICT", "POST", path, map[string]any{"message": "hi"})
	revID := activate(t, e, "bot")
	e.reject(404, "NOT_FOUND", "POST", path, map[string]any{"message": "hi"}) // the memory driver relays nothing
	var session, message string
	turn := func(a state.Agent, s, m string, delta func(string)) (string, error) {
		session, message = s, m
		delta("Hel")
		delta("lo")
		return "Hello", nil
	}
	e.b.SetDriver(messengerDriver{Driver: memory.New(memory.DefaultCapabilities()), turn: func(a state.Agent, s, m string, d func(string)) (string, error) {
		return turn(a, s, m, d)
	}})
	e.reject(400, "INVALID_REQUEST", "POST", path, map[string]any{"message": ""})
	e.reject(400, "INVALID_REQUEST", "POST", path, map[string]any{"message": "hi", "extra": 1})
	e.reject(404, "NOT_FOUND", "POST", "/v1/namespaces/team/agents/nobody/messages", map[string]any{"message": "hi"})

	r := e.do("POST", path, map[string]any{"message": "hi"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "application/x-ndjson", r.header.Get("Content-Type"))
	require.Equal(t, []wire.MessageEvent{{Delta: "Hel"}, {Delta: "lo"}, {Done: true, Reply: "Hello", RevisionID: revID}}, events(t, r.body))
	require.Equal(t, "main", session, "the default session")
	require.Equal(t, "hi", message)

	turn = func(state.Agent, string, string, func(string)) (string, error) {
		return "", fmt.Errorf("%w: not running", compute.ErrNoEndpoint)
	}
	e.reject(404, "NOT_FOUND", "POST", path, map[string]any{"message": "hi"})
	for _, tc := range []struct {
		delta bool
		err   error
		code  string
	}{
		{false, &compute.TurnError{Code: "TURN_FAILED", Message: "model said no"}, "TURN_FAILED"},
		{false, &compute.TurnError{Code: "UNAVAILABLE", Message: "starting"}, "UNAVAILABLE"},
		{false, errors.New("status call failed"), "UNAVAILABLE"},
		{true, errors.New("stream broke"), "DISCONNECTED"},
	} {
		turn = func(_ state.Agent, s, _ string, d func(string)) (string, error) {
			session = s
			if tc.delta {
				d("par")
			}
			return "", tc.err
		}
		r := e.do("POST", path, map[string]any{"message": "hi", "session": "s2"})
		require.Equal(t, http.StatusOK, r.status)
		evs := events(t, r.body)
		last := evs[len(evs)-1]
		require.NotNil(t, last.Error, "%+v", evs)
		require.EqualValues(t, tc.code, last.Error.Code)
		require.Equal(t, "s2", session)
	}
}
