package occ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/relay"
)

// DefaultSendTimeout bounds one `occ agent send` turn.
const DefaultSendTimeout = 5 * time.Minute

// DefaultSessionKey is the gateway session `occ agent send` talks in.
const DefaultSessionKey = "main"

// ErrChatFailed: the gateway ended the turn with an error or an abort.
var ErrChatFailed = errors.New("chat turn failed")

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

func (a *app) sendCmd() *cobra.Command {
	var session string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "send AGENT MESSAGE",
		Short: "Send a message through the Agent's Gateway and stream the reply",
		Long: `Sends MESSAGE to the Agent's active Gateway with the OpenClaw operator protocol (chat.send)
and streams the reply. The coordinator names the Gateway's endpoint (GET …/agents/{agent}/endpoints):
with the local compute driver (` + "`occ dev up`" + `) a Unix socket on this machine forwarded to the
active revision's gateway, and the Agent's managed gateway password file.`,
		Example: `  occ agent send hello "Hello!"
  occ agent send coder "Write a haiku" --session review --timeout 10m`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cl := a.client()
			ag, err := cl.Agent(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			if ag.ActiveRevisionID == "" {
				return fmt.Errorf("agent %s has no active revision: deploy it first", args[0])
			}
			ep, err := cl.Endpoints(ctx, a.settings.Namespace, ag.ID)
			if err != nil {
				return err
			}
			_, err = SendAndCollect(ctx, ep, session, args[1], cmd.OutOrStdout(), cmd.ErrOrStderr())
			return err
		},
	}
	c.Flags().StringVar(&session, "session", DefaultSessionKey, "gateway session key")
	c.Flags().DurationVar(&timeout, "timeout", DefaultSendTimeout, "how long to wait for the reply")
	return c
}

// sendRetryInterval paces the dial retries while a gateway starts.
const sendRetryInterval = 500 * time.Millisecond

// SendAndCollect sends message in session to the Agent's gateway at ep (a
// Unix socket on this machine and the password file beside it), streams
// the reply to out and returns its text; status (may be nil) receives
// progress notes.
func SendAndCollect(ctx context.Context, ep wire.Endpoints, session, message string, out, status io.Writer) (string, error) {
	if ep.Socket == "" || ep.PasswordFile == "" {
		return "", fmt.Errorf("agent %s: the compute driver offers no gateway socket on this machine (gateway %s)", ep.AgentID, dash(ep.Gateway))
	}
	pw, err := os.ReadFile(ep.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("gateway password: %w", err)
	}
	// The gateway listens on loopback inside the runtimes' namespace; the
	// route socket reaches it from anywhere. Bridge it to a loopback port
	// here for the WebSocket client.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	go func() { _ = relay.Serve(ln, func() (net.Conn, error) { return net.Dial("unix", ep.Socket) }) }()
	return Chat(ctx, "ws://"+ln.Addr().String(), strings.TrimSpace(string(pw)), session, message, out, status)
}

// Chat sends message to the OpenClaw gateway at url (operator protocol,
// password auth, chat.send) and returns the reply text, echoing it to out;
// status (may be nil) receives progress notes. It keeps dialing while the
// gateway starts, until ctx ends.
func Chat(ctx context.Context, url, password, session, message string, out, status io.Writer) (string, error) {
	q := &eventQueue{signal: make(chan struct{}, 1)}
	// A freshly activated gateway may still be starting (an embedded
	// replacement starts at activation, after deploy --wait returned): keep
	// dialing until it answers or ctx ends.
	var op *ocproto.Operator
	var err error
	for noted := false; ; {
		op, err = ocproto.DialOperator(ctx, ocproto.OperatorConfig{URL: url, Password: password, OnEvent: q.push})
		if err == nil {
			break
		}
		if ocproto.IsFatal(err) || errors.Is(err, ocproto.ErrHandshake) && strings.Contains(err.Error(), "AUTH") {
			return "", fmt.Errorf("connect to the gateway: %w", err)
		}
		if !noted && status != nil {
			fmt.Fprintln(status, "waiting for the gateway to accept connections…")
			noted = true
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("connect to the gateway: %w (last: %v)", ctx.Err(), err)
		case <-time.After(sendRetryInterval):
		}
	}
	defer op.Close()
	res, err := op.RequestRaw(ctx, "chat.send", map[string]any{"sessionKey": session, "message": message,
		"idempotencyKey": randomToken()})
	if err != nil {
		return "", fmt.Errorf("chat.send: %w", err)
	}
	var started struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(res, &started)
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
				fmt.Fprint(out, ce.DeltaText)
			case "final":
				if b.Len() == 0 {
					text := messageText(ce.Message)
					b.WriteString(text)
					fmt.Fprint(out, text)
				}
				fmt.Fprintln(out)
				return b.String(), nil
			case "error", "aborted":
				fmt.Fprintln(out)
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

// messageText collects the text parts of a chat message.
func messageText(raw json.RawMessage) string {
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

// eventQueue buffers gateway events without blocking the reader.
type eventQueue struct {
	mu     sync.Mutex
	items  []ocproto.Event
	signal chan struct{}
}

func (q *eventQueue) push(e ocproto.Event) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *eventQueue) drain() []ocproto.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
