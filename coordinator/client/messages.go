package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/shared/codes"
)

// TurnError is a relayed turn that ended with an error event (its Code is
// one of wire's Message* codes).
type TurnError struct {
	Code    codes.Code
	Message string
}

func (e *TurnError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// SendMessage relays one turn to the Agent's active Gateway through the
// coordinator (POST …/agents/{agent}/messages), calling delta (may be nil)
// with the reply text as it streams; it returns the whole reply, or a
// *TurnError when the turn failed after the stream started.
func (c *Client) SendMessage(ctx context.Context, ns, agent string, req wire.MessageRequest, delta func(string)) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	resp, err := c.send(ctx, http.MethodPost, agentPath(ns, agent)+"/messages", nil,
		func() io.Reader { return bytes.NewReader(body) }, "application/json")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var b strings.Builder
	for {
		var ev wire.MessageEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return b.String(), fmt.Errorf("client: waiting for the reply: %w", ctx.Err())
			}
			return b.String(), fmt.Errorf("client: the reply stream ended early: %w", err)
		}
		switch {
		case ev.Error != nil:
			return b.String(), &TurnError{Code: ev.Error.Code, Message: ev.Error.Message}
		case ev.Done:
			return ev.Reply, nil
		case ev.Delta != "":
			b.WriteString(ev.Delta)
			if delta != nil {
				delta(ev.Delta)
			}
		}
	}
}
