package ocproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
)

// ClientVersion is the version oce's clients present to the gateway.
const ClientVersion = "2026.9.6"

// OperatorScopes are the scopes oce's operator clients request: pairing
// approval, setup codes (admin), node invocation (write) and listing (read).
var OperatorScopes = []string{ScopeAdmin, ScopePairing, ScopeWrite, ScopeRead}

// Operator is an operator-role connection (gatewayd, occ, tests).
type Operator struct{ *Conn }

// OperatorConfig names the gateway and the shared password.
type OperatorConfig struct {
	URL      string
	Password string
	// Identity is the operator's device identity; without one the gateway
	// clears unbound scopes, so a fresh one is generated when nil.
	Identity *Identity
	OnEvent  func(Event)
	Log      *slog.Logger
}

// DialOperator connects as an operator with the shared gateway password.
func DialOperator(ctx context.Context, oc OperatorConfig) (*Operator, error) {
	id := oc.Identity
	if id == nil {
		var err error
		if id, err = NewIdentity(); err != nil {
			return nil, err
		}
	}
	c, err := Dial(ctx, Config{URL: oc.URL, Role: RoleOperator,
		Client: ClientInfo{ID: ClientGatewayClient, Version: ClientVersion, Platform: "linux", Mode: ModeBackend},
		Scopes: OperatorScopes, Identity: id, Credentials: Credentials{Password: oc.Password},
		OnEvent: oc.OnEvent, Log: oc.Log})
	if err != nil {
		return nil, err
	}
	return &Operator{c}, nil
}

// SetupCodeResult is device.pair.setupCode's answer.
type SetupCodeResult struct {
	SetupID     string `json:"setupId"`
	SetupCode   string `json:"setupCode"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
	GatewayURL  string `json:"gatewayUrl"`
}

// SetupCode mints a one-use node setup code. publicURL, when set, is the
// gateway URL the node must dial (as seen from the node).
func (o *Operator) SetupCode(ctx context.Context, publicURL string) (SetupCodeResult, error) {
	params := map[string]any{"bootstrapProfile": "node", "includeQr": false}
	if publicURL != "" {
		params["publicUrl"] = publicURL
	}
	var r SetupCodeResult
	err := o.Request(ctx, "device.pair.setupCode", params, &r)
	return r, err
}

// PendingNode is one pending node command-surface request.
type PendingNode struct {
	RequestID   string   `json:"requestId"`
	NodeID      string   `json:"nodeId"`
	ClientID    string   `json:"clientId"`
	DisplayName string   `json:"displayName"`
	Commands    []string `json:"commands"`
	Caps        []string `json:"caps"`
}

// NodePairList is node.pair.list's answer.
type NodePairList struct {
	Pending []PendingNode     `json:"pending"`
	Paired  []json.RawMessage `json:"paired"`
}

// NodePairList lists pending and paired node surfaces.
func (o *Operator) NodePairList(ctx context.Context) (NodePairList, error) {
	var r NodePairList
	err := o.Request(ctx, "node.pair.list", map[string]any{}, &r)
	return r, err
}

// NodePairApprove approves a pending node surface.
func (o *Operator) NodePairApprove(ctx context.Context, requestID string) error {
	return o.Request(ctx, "node.pair.approve", map[string]any{"requestId": requestID}, nil)
}

// DevicePairApprove approves a pending device pairing.
func (o *Operator) DevicePairApprove(ctx context.Context, requestID string) error {
	return o.Request(ctx, "device.pair.approve", map[string]any{"requestId": requestID}, nil)
}

// NodeInfo is one entry of node.list.
type NodeInfo struct {
	NodeID      string   `json:"nodeId"`
	DisplayName string   `json:"displayName"`
	Connected   bool     `json:"connected"`
	Paired      bool     `json:"paired"`
	Commands    []string `json:"commands"`
}

// NodeList lists the nodes the gateway knows.
func (o *Operator) NodeList(ctx context.Context) ([]NodeInfo, error) {
	var r struct {
		Nodes []NodeInfo `json:"nodes"`
	}
	err := o.Request(ctx, "node.list", map[string]any{}, &r)
	return r.Nodes, err
}

// InvokeResult is node.invoke's answer.
type InvokeResult struct {
	OK          bool            `json:"ok"`
	NodeID      string          `json:"nodeId"`
	Command     string          `json:"command"`
	Payload     json.RawMessage `json:"payload"`
	PayloadJSON string          `json:"payloadJSON"`
}

// NodeInvoke runs command on a node through the gateway.
func (o *Operator) NodeInvoke(ctx context.Context, nodeID, command string, params any, timeoutMs int64) (InvokeResult, error) {
	var key [12]byte
	_, _ = rand.Read(key[:])
	p := map[string]any{"nodeId": nodeID, "command": command, "idempotencyKey": "oce-" + hex.EncodeToString(key[:])}
	if params != nil {
		p["params"] = params
	}
	if timeoutMs > 0 {
		p["timeoutMs"] = timeoutMs
	}
	var r InvokeResult
	err := o.Request(ctx, "node.invoke", p, &r)
	return r, err
}
