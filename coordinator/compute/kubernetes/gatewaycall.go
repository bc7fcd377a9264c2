package kubernetes

import (
	"context"
	"fmt"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// gatewayCaller is the part of GatewayStatus that sends arbitrary
// coordinator-route requests (HTTPGatewayStatus implements it).
type gatewayCaller interface {
	Call(ctx context.Context, gw Endpoint, method, path string, body []byte) (int, []byte, error)
}

var _ compute.GatewayCaller = (*Driver)(nil)

// CallGateway implements compute.GatewayCaller: the ready Gateway Pod of
// the revision (dialled by Pod IP, as for enrollment) with the Agent's
// status bearer. A revision without a ready Gateway Pod is unavailable.
func (d *Driver) CallGateway(ctx context.Context, rev state.Revision, method, route string, body []byte) (int, []byte, error) {
	c, ok := d.status.(gatewayCaller)
	if !ok {
		return 0, nil, fmt.Errorf("%w: the driver's gateway status client cannot call routes", compute.ErrGatewayUnavailable)
	}
	p, err := d.planFor(rev)
	if err != nil {
		return 0, nil, err
	}
	ep, r, err := d.servingGateway(ctx, p)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", compute.ErrGatewayUnavailable, err)
	}
	if !r.Ready || ep.RevisionID != rev.ID {
		return 0, nil, fmt.Errorf("%w: revision %s has no ready gateway pod", compute.ErrGatewayUnavailable, rev.ID)
	}
	code, b, err := c.Call(ctx, ep, method, route, body)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", compute.ErrGatewayUnavailable, err)
	}
	return code, b, nil
}
