package occ

import (
	"context"
	"errors"
	"fmt"
	"io"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// sendThroughCoordinator relays the turn through the coordinator (drivers
// whose Gateways are not reachable from this machine, e.g. Kubernetes) and
// streams the reply to out.
func sendThroughCoordinator(ctx context.Context, cl *client.Client, ns, agentID, session, message string, out, _ io.Writer) error {
	_, err := cl.SendMessage(ctx, ns, agentID, wire.MessageRequest{Session: session, Message: message},
		func(d string) { fmt.Fprint(out, d) })
	var te *client.TurnError
	if err == nil || errors.As(err, &te) {
		fmt.Fprintln(out)
	}
	if errors.As(err, &te) && te.Code == wire.MessageTurnFailed {
		return fmt.Errorf("%w: %s", ErrChatFailed, te.Message)
	}
	return err
}
