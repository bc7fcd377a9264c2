package appserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// StartThread runs thread/start and returns the new thread.
func (c *Client) StartThread(ctx context.Context, o ThreadOptions) (Thread, error) {
	var r struct {
		Thread Thread `json:"thread"`
	}
	if err := c.Call(ctx, MethodThreadStart, o, &r); err != nil {
		return Thread{}, err
	}
	if r.Thread.ID == "" {
		return Thread{}, fmt.Errorf("%w: thread/start without thread id", ErrProtocol)
	}
	return r.Thread, nil
}

func turnParams(threadID, text string) map[string]any {
	return map[string]any{
		"threadId": threadID,
		"input":    []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}},
	}
}

// StartTurn runs turn/start and returns the turn as the server accepted it
// (status inProgress). Use RunTurn to follow it to the end.
func (c *Client) StartTurn(ctx context.Context, threadID, text string) (Turn, error) {
	var r struct {
		Turn Turn `json:"turn"`
	}
	if err := c.Call(ctx, MethodTurnStart, turnParams(threadID, text), &r); err != nil {
		return Turn{}, err
	}
	return r.Turn, nil
}

// Interrupt runs turn/interrupt; the turn then ends with turn/completed
// status interrupted.
func (c *Client) Interrupt(ctx context.Context, threadID, turnID string) error {
	return c.Call(ctx, MethodTurnInterrupt, map[string]string{"threadId": threadID, "turnId": turnID}, nil)
}

// turnState follows one turn's notifications.
type turnState struct {
	res    TurnResult
	deltas strings.Builder
	delta  func(string)
	done   bool
}

func (t *turnState) apply(n Notification) {
	switch n.Method {
	case MethodAgentDelta:
		var p struct {
			Delta string `json:"delta"`
		}
		if json.Unmarshal(n.Params, &p) == nil {
			t.deltas.WriteString(p.Delta)
			if t.delta != nil {
				t.delta(p.Delta)
			}
		}
	case MethodItemCompleted:
		var p struct {
			Item json.RawMessage `json:"item"`
		}
		if json.Unmarshal(n.Params, &p) == nil {
			var it Item
			if json.Unmarshal(p.Item, &it) == nil {
				it.Raw = p.Item
				t.res.Items = append(t.res.Items, it)
				if it.Type == "agentMessage" {
					t.res.Text = it.Text
				}
			}
		}
	case MethodTurnCompleted:
		var p struct {
			Turn Turn `json:"turn"`
		}
		if json.Unmarshal(n.Params, &p) == nil {
			t.res.Status = p.Turn.Status
			t.res.Error = p.Turn.Error
			t.done = true
		}
	}
}

func (t *turnState) finish() TurnResult {
	if t.res.Text == "" {
		t.res.Text = t.deltas.String()
	}
	return t.res
}

// RunTurn starts a turn on threadID with text and follows it to its
// turn/completed, streaming agent message deltas to onDelta (nil ignores
// them; it runs on the caller's goroutine). Notifications are matched to the
// turn by threadId and turnId, whichever of the turn/start answer and
// turn/started arrives first.
//
// A connection that closes before turn/completed returns status interrupted
// with Disconnected set and a nil error: the app-server stopped (SIGTERM
// sends no turn/completed) and the turn did not complete. When ctx ends the
// turn is interrupted (turn/interrupt, then up to InterruptGrace for its
// turn/completed) and ctx's error is returned with the result.
func (c *Client) RunTurn(ctx context.Context, threadID, text string, onDelta func(string)) (TurnResult, error) {
	sub := c.subscribe(threadID)
	defer c.unsubscribe(sub)
	key, respCh, err := c.send(ctx, MethodTurnStart, turnParams(threadID, text))
	if err != nil {
		return TurnResult{}, err
	}
	defer c.forget(key)
	t := &turnState{res: TurnResult{ThreadID: threadID}, delta: onDelta}
	var backlog []Notification // notifications of a turn before ours is known

	route := func(ns []Notification) {
		for _, n := range ns {
			_, turn := scopeOf(n.Params)
			if t.res.TurnID == "" {
				if n.Method == MethodTurnStarted && turn != "" {
					t.res.TurnID = turn
					ns := backlog
					backlog = nil
					for _, b := range ns {
						if _, bt := scopeOf(b.Params); bt == turn {
							t.apply(b)
						}
					}
				} else {
					if turn != "" {
						backlog = append(backlog, n)
					}
					continue
				}
			}
			if turn != t.res.TurnID || t.done {
				continue
			}
			t.apply(n)
		}
	}
	for !t.done {
		select {
		case m := <-respCh:
			respCh = nil
			if m.Error != nil {
				return TurnResult{}, m.Error
			}
			var r struct {
				Turn Turn `json:"turn"`
			}
			if err := json.Unmarshal(m.Result, &r); err != nil || r.Turn.ID == "" {
				return TurnResult{}, fmt.Errorf("%w: turn/start without turn id", ErrProtocol)
			}
			if t.res.TurnID == "" {
				t.res.TurnID = r.Turn.ID
				ns := backlog
				backlog = nil
				route(ns)
			}
		case <-sub.signal:
			route(sub.drain())
		case <-c.closed:
			route(sub.drain())
			if t.done {
				break
			}
			t.res.Status = StatusInterrupted
			t.res.Disconnected = true
			return t.finish(), nil
		case <-ctx.Done():
			return c.abandon(sub, t, route, ctx.Err())
		}
	}
	return t.finish(), nil
}

// abandon interrupts a turn whose caller gave up and waits briefly for its
// turn/completed; the result is interrupted whatever happens.
func (c *Client) abandon(sub *subscription, t *turnState, route func([]Notification), cause error) (TurnResult, error) {
	t.res.Status = StatusInterrupted
	if t.res.TurnID == "" {
		return t.finish(), cause
	}
	ictx, cancel := context.WithTimeout(context.Background(), InterruptGrace)
	defer cancel()
	if err := c.Interrupt(ictx, t.res.ThreadID, t.res.TurnID); err != nil {
		return t.finish(), cause
	}
	for !t.done {
		select {
		case <-sub.signal:
			route(sub.drain())
		case <-c.closed:
			route(sub.drain())
			if !t.done {
				t.res.Disconnected = true
			}
			return t.finish(), cause
		case <-ictx.Done():
			// No turn/completed within the grace: still interrupted.
			return t.finish(), cause
		}
	}
	// turn/completed arrived: its status (normally interrupted) stands.
	return t.finish(), cause
}
