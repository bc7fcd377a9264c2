package kubernetes

import (
	"context"
	"errors"
	"fmt"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

var _ compute.Messenger = (*Driver)(nil)

// SendMessage implements compute.Messenger: the active revision's ready
// Gateway Pod runs the turn through its supervisor (gatewayd's
// contract.RouteChat, with the Agent's status bearer), which is the
// gateway's loopback operator — a remote operator would need device
// pairing — and holds the gateway password itself.
func (d *Driver) SendMessage(ctx context.Context, agent state.Agent, session, message string, delta func(string)) (string, string, error) {
	if agent.ActiveRevisionID == "" {
		return "", "", fmt.Errorf("%w: agent %s is not active", compute.ErrNoEndpoint, agent.Name)
	}
	chat, ok := d.status.(GatewayChatter)
	if !ok {
		return "", "", fmt.Errorf("%w: the driver's gateway status client runs no turns", compute.ErrNoEndpoint)
	}
	rev := state.Revision{ID: agent.ActiveRevisionID, AgentID: agent.ID, NamespaceID: agent.NamespaceID, Mode: agent.ExecutionMode,
		Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw}}
	if agent.ExecutionMode == state.ModeDedicated {
		rev.Harness.ID = state.HarnessCodex
	}
	p, err := d.planFor(rev)
	if err != nil {
		return "", "", err
	}
	ep, r, err := d.servingGateway(ctx, p)
	if err != nil {
		return "", "", err
	}
	if !r.Ready {
		return "", "", fmt.Errorf("%w: agent %s has no ready Gateway (%s)", compute.ErrNoEndpoint, agent.Name, r.Reason)
	}
	reply, err := chat.Chat(ctx, ep, contract.ChatRequest{Session: session, Message: message}, delta)
	var te *compute.TurnError
	if err != nil && !errors.As(err, &te) {
		err = statusErr("chat", err)
	}
	if err != nil {
		return "", ep.RevisionID, err
	}
	return reply, ep.RevisionID, nil
}
