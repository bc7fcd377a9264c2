package ocproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Errors of Chat.
var (
	// ErrChatFailed: the gateway ended the turn with an error or an abort.
	ErrChatFailed = errors.New("chat turn failed")
	// ErrUnreachable: the gateway did not accept an operator connection
	// (refused password, or still not listening when ctx ended).
	ErrUnreachable = errors.New("connect to the gateway")
)

// ChatRetryInterval paces the dial retries while a gateway starts.
const ChatRetryInterval = 500 * time.Millisecond

// ChatHandler receives a turn's progress; nil fields are skipped.
type ChatHandler struct {
	// Delta receives each piece of reply text as it streams.
	Delta func(text string)
	// Waiting is called once when the gateway does not accept
	// connections yet (it is still starting).
	Waiting func()
}

// chatEvent is the payload of the gateway's "chat" events (delta, final,
// aborted, error) as the pinned OpenClaw publishes them.
type chatEvent struct {
	RunID        string          `json:"runId"`
	SessionKey   string          `json:"sessionKey"`
	Seq          int64           `json:"seq"`
	State        string          `json:"state"`
	DeltaText    string          `json:"deltaText"`
	Replace      bool            `json:"replace"`
	Message      json.RawMessage `json:"message"`
	ErrorMessage string          `json:"errorMessage"`
}

// Chat sends message in session to the OpenClaw gateway oc names
// (operator protocol, password auth, chat.send) and returns the reply
// text, passing its progress to h. It keeps dialing while the gateway
// starts (a freshly activated gateway may not listen yet), until ctx ends;
// a refused password ends it at once.
func Chat(ctx context.Context, oc OperatorConfig, session, message string, h ChatHandler) (string, error) {
	q := &eventQueue{signal: make(chan struct{}, 1)}
	oc.OnEvent = q.push
	var op *Operator
	var err error
	for noted := false; ; {
		op, err = DialOperator(ctx, oc)
		if err == nil {
			break
		}
		if IsFatal(err) || errors.Is(err, ErrHandshake) && strings.Contains(err.Error(), "AUTH") {
			return "", fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		if !noted && h.Waiting != nil {
			h.Waiting()
			noted = true
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %w (last: %v)", ErrUnreachable, ctx.Err(), err)
		case <-time.After(ChatRetryInterval):
		}
	}
	defer op.Close()
	res, err := op.RequestRaw(ctx, "chat.send", map[string]any{"sessionKey": session, "message": message,
		"idempotencyKey": randomKey()})
	if err != nil {
		return "", fmt.Errorf("chat.send: %w", err)
	}
	var started struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(res, &started)
	delta := func(s string) {
		if h.Delta != nil && s != "" {
			h.Delta(s)
		}
	}
	var b strings.Builder
	for {
		for _, ev := range q.drain() {
			if ev.Event != "chat" {
				continue
			}
			var ce chatEvent
			if json.Unmarshal(ev.Payload, &ce) != nil {
				continue
			}
			if started.RunID != "" && ce.RunID != started.RunID {
				continue
			}
			switch ce.State {
			case "delta":
				if ce.Replace {
					b.Reset()
					b.WriteString(ce.DeltaText)
					continue
				}
				b.WriteString(ce.DeltaText)
				delta(ce.DeltaText)
			case "final":
				if b.Len() == 0 {
					text := MessageText(ce.Message)
					b.WriteString(text)
					delta(text)
				}
				return b.String(), nil
			case "error", "aborted":
				msg := ce.ErrorMessage
				if msg == "" {
					msg = ce.State
				}
				return b.String(), fmt.Errorf("%w: %s", ErrChatFailed, msg)
			}
		}
		select {
		case <-ctx.Done():
			return b.String(), fmt.Errorf("waiting for the reply: %w", ctx.Err())
		case <-op.Done():
			return b.String(), fmt.Errorf("gateway connection closed: %w", op.Err())
		case <-q.signal:
		}
	}
}

// MessageText collects the text parts of a chat message.
func MessageText(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var parts []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			if s, ok := t["text"].(string); ok {
				parts = append(parts, s)
				return
			}
			if s, ok := t["content"].(string); ok {
				parts = append(parts, s)
				return
			}
			for _, k := range []string{"content", "parts"} {
				if c, ok := t[k]; ok {
					walk(c)
				}
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return strings.Join(parts, "")
}

func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// eventQueue buffers gateway events without blocking the reader.
type eventQueue struct {
	mu     sync.Mutex
	items  []Event
	signal chan struct{}
}

func (q *eventQueue) push(e Event) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *eventQueue) drain() []Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
