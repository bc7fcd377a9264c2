package kubernetes

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

var _ compute.GatewayConnector = (*Driver)(nil)

// GatewayOperator implements compute.GatewayConnector: the Agent's stable
// Gateway Service (the coordinator runs in the cluster and resolves it) and
// the managed password from the Agent-owned password Secret.
func (d *Driver) GatewayOperator(ctx context.Context, agent state.Agent) (compute.GatewayOperator, error) {
	ep, err := d.Endpoints(ctx, agent)
	if err != nil {
		return compute.GatewayOperator{}, err
	}
	ns := DataPlaneNamespace(agent.NamespaceID)
	if agent.ExecutionMode == state.ModeDedicated {
		ns = GatewayNamespace(agent.NamespaceID)
	}
	n := namesFor(agent.ID, "")
	s, err := d.c.CoreV1().Secrets(ns).Get(ctx, n.password, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return compute.GatewayOperator{}, fmt.Errorf("%w: agent %s has no gateway password yet", compute.ErrNoEndpoint, agent.Name)
	}
	if err != nil {
		return compute.GatewayOperator{}, transient(fmt.Errorf("kubernetes: read the gateway password: %w", err))
	}
	if !(owner{NamespaceID: agent.NamespaceID, AgentID: agent.ID}).owns(s.Labels, s.Annotations, false) {
		return compute.GatewayOperator{}, foreign(ns, n.password)
	}
	pw := strings.TrimSpace(string(s.Data[contract.SecretGatewayPassword]))
	if pw == "" {
		return compute.GatewayOperator{}, fmt.Errorf("%w: agent %s: the gateway password Secret is empty", compute.ErrNoEndpoint, agent.Name)
	}
	return compute.GatewayOperator{RevisionID: ep.RevisionID, URL: ep.Gateway, Password: pw}, nil
}
