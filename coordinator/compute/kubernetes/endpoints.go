package kubernetes

import (
	"context"
	"fmt"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// Endpoints implements compute.Endpointer: an active Agent's stable Gateway
// Service, by its cluster DNS name (reachable inside the cluster).
func (d *Driver) Endpoints(_ context.Context, agent state.Agent) (compute.Endpoints, error) {
	if agent.ActiveRevisionID == "" {
		return compute.Endpoints{}, fmt.Errorf("%w: agent %s is not active", compute.ErrNoEndpoint, agent.Name)
	}
	ns := DataPlaneNamespace(agent.NamespaceID)
	if agent.ExecutionMode == state.ModeDedicated {
		ns = GatewayNamespace(agent.NamespaceID)
	}
	n := namesFor(agent.ID, "")
	return compute.Endpoints{RevisionID: agent.ActiveRevisionID,
		Gateway: fmt.Sprintf("ws://%s.%s.svc:%d", n.gateway, ns, contract.GatewayPort)}, nil
}
