package ocproto

import "encoding/json"

// Roles and client identities oce uses.
const (
	RoleNode     = "node"
	RoleOperator = "operator"

	ClientNodeHost      = "node-host"
	ClientGatewayClient = "gateway-client"
	ClientCLI           = "cli"

	ModeNode    = "node"
	ModeBackend = "backend"
	ModeCLI     = "cli"
)

// Operator scopes.
const (
	ScopeAdmin    = "operator.admin"
	ScopePairing  = "operator.pairing"
	ScopeWrite    = "operator.write"
	ScopeRead     = "operator.read"
	ScopeApproval = "operator.approvals"
)

// ClientInfo is connect.params.client (closed; id and mode come from closed
// sets on the gateway).
type ClientInfo struct {
	ID              string `json:"id"`
	DisplayName     string `json:"displayName,omitempty"`
	Version         string `json:"version"`
	BuildID         string `json:"buildId,omitempty"`
	Platform        string `json:"platform"`
	DeviceFamily    string `json:"deviceFamily,omitempty"`
	ModelIdentifier string `json:"modelIdentifier,omitempty"`
	Mode            string `json:"mode"`
	InstanceID      string `json:"instanceId,omitempty"`
}

// NodeHostClient is the client identity a Go node host presents; with any
// other platform or family the gateway's default allow-list drops
// system.run and system.which.
func NodeHostClient(displayName, version, instanceID string) ClientInfo {
	return ClientInfo{ID: ClientNodeHost, DisplayName: displayName, Version: version, Platform: "linux",
		DeviceFamily: "Linux", Mode: ModeNode, InstanceID: instanceID}
}

// DeviceProof is connect.params.device.
type DeviceProof struct {
	ID        string `json:"id"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
	SignedAt  int64  `json:"signedAt"`
	Nonce     string `json:"nonce"`
}

// ConnectParams are the params of the connect request (closed).
type ConnectParams struct {
	MinProtocol int             `json:"minProtocol"`
	MaxProtocol int             `json:"maxProtocol"`
	Client      ClientInfo      `json:"client"`
	Caps        []string        `json:"caps,omitempty"`
	Commands    []string        `json:"commands,omitempty"`
	Permissions map[string]bool `json:"permissions,omitempty"`
	PathEnv     string          `json:"pathEnv,omitempty"`
	Role        string          `json:"role,omitempty"`
	Scopes      []string        `json:"scopes"`
	Device      *DeviceProof    `json:"device,omitempty"`
	Auth        *ConnectAuth    `json:"auth,omitempty"`
	Locale      string          `json:"locale,omitempty"`
	UserAgent   string          `json:"userAgent,omitempty"`
}

// Challenge is the connect.challenge event payload.
type Challenge struct {
	Nonce        string   `json:"nonce"`
	TS           int64    `json:"ts"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// HelloOK is the connect response payload (read leniently: the gateway adds
// fields over time; only these are used).
type HelloOK struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Server   struct {
		Version string `json:"version"`
		ConnID  string `json:"connId"`
	} `json:"server"`
	Auth struct {
		Method      string   `json:"method"`
		Role        string   `json:"role"`
		Scopes      []string `json:"scopes"`
		DeviceToken string   `json:"deviceToken"`
		IssuedAtMs  int64    `json:"issuedAtMs"`
	} `json:"auth"`
	Policy struct {
		MaxPayload       int64 `json:"maxPayload"`
		MaxBufferedBytes int64 `json:"maxBufferedBytes"`
		TickIntervalMs   int64 `json:"tickIntervalMs"`
	} `json:"policy"`
	Features struct {
		Methods []string `json:"methods"`
		Events  []string `json:"events"`
	} `json:"features"`
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
}
