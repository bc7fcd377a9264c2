package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// GatewayCallTimeout bounds one call to a Gateway's coordinator routes; the
// workspace routes allow themselves 30 s (gatewayd WorkspaceRequestTimeout).
const GatewayCallTimeout = 35 * time.Second

var _ compute.GatewayCaller = (*Driver)(nil)

// CallGateway implements compute.GatewayCaller: the revision's gatewayd
// status server on its loopback port, with the revision's status token.
func (d *Driver) CallGateway(ctx context.Context, rev state.Revision, method, route string, body []byte) (int, []byte, error) {
	if err := checkIDs(rev.NamespaceID, rev.AgentID, rev.ID); err != nil {
		return 0, nil, err
	}
	d.mu.Lock()
	r := d.lookup(rev)
	var snap revRuntime
	if r != nil {
		snap = *r
	}
	d.mu.Unlock()
	if r == nil || snap.Stopped || snap.Staged || !snap.Gateway.Alive() {
		return 0, nil, fmt.Errorf("%w: revision %s has no running gateway", compute.ErrGatewayUnavailable, rev.ID)
	}
	token, err := d.statusToken(r)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: status token: %v", compute.ErrGatewayUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, GatewayCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", snap.Ports.GatewayStatus, route),
		bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", compute.ErrGatewayUnavailable, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, compute.MaxGatewayAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", compute.ErrGatewayUnavailable, err)
	}
	return res.StatusCode, b, nil
}
