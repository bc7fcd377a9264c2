package compute

import (
	"context"
	"errors"

	"oce.dev/oce/coordinator/state"
)

// GatewayCaller is optionally implemented by a driver that can reach the
// coordinator routes (shared/contract Route…) of the status server of the
// Gateway running a revision, with the Agent's status bearer: the workspace
// documents (docs/design/seed-003.md) travel this way, coordinator → Gateway → workspace.
type GatewayCaller interface {
	// CallGateway sends one request (body may be nil) to rev's running
	// Gateway and returns the answer's status and body (at most
	// MaxGatewayAnswer bytes). A revision whose Gateway is not running or
	// cannot be reached is an error wrapping ErrGatewayUnavailable; the
	// Gateway's own refusals are answers, not errors.
	CallGateway(ctx context.Context, rev state.Revision, method, route string, body []byte) (int, []byte, error)
}

// MaxGatewayAnswer bounds an answer CallGateway reads: above the largest
// workspace document, JSON-escaped.
const MaxGatewayAnswer = 8 << 20

// ErrGatewayUnavailable: the revision's Gateway is not running or does not
// answer.
var ErrGatewayUnavailable = errors.New("compute: the gateway is unavailable")
