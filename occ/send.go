package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
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
var ErrChatFailed = ocproto.ErrChatFailed

func (a *app) sendCmd() *cobra.Command {
	var session string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "send AGENT MESSAGE",
		Short: "Send a message through the Agent's Gateway and stream the reply",
		Long: `Sends MESSAGE to the Agent's active Gateway with the OpenClaw operator protocol (chat.send)
and streams the reply. The coordinator names the Gateway's endpoint (GET …/agents/{agent}/endpoints):
with the local compute driver (` + "`occ dev up`" + `) a Unix socket on this machine forwarded to the
active revision's gateway, and the Agent's managed gateway password file. Where the driver offers no
socket here (Kubernetes), the coordinator talks to the Gateway itself and streams the reply back
(POST …/agents/{agent}/messages): the gateway password never leaves the coordinator.`,
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
			if ep.Socket == "" {
				return sendThroughCoordinator(ctx, cl, a.settings.Namespace, ag.ID, session, args[1], cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			_, err = SendAndCollect(ctx, ep, session, args[1], cmd.OutOrStdout(), cmd.ErrOrStderr())
			return err
		},
	}
	c.Flags().StringVar(&session, "session", DefaultSessionKey, "gateway session key")
	c.Flags().DurationVar(&timeout, "timeout", DefaultSendTimeout, "how long to wait for the reply")
	return c
}

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
	h := ocproto.ChatHandler{Delta: func(s string) { fmt.Fprint(out, s) }}
	if status != nil {
		h.Waiting = func() { fmt.Fprintln(status, "waiting for the gateway to accept connections…") }
	}
	text, err := ocproto.Chat(ctx, ocproto.OperatorConfig{URL: url, Password: password}, session, message, h)
	if err == nil || errors.Is(err, ocproto.ErrChatFailed) {
		fmt.Fprintln(out)
	}
	return text, err
}
