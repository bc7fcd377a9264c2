package contract

import "fmt"

// Status-server routes the drivers and the peer supervisor call.
const (
	RouteReadyz = "/readyz"
	// RouteStartupz (no credential) answers 200 once startup ended or a
	// failure is held: the Kubernetes driver's startup probe.
	RouteStartupz      = "/startupz"
	RouteRuntimeStatus = "/openclaw/runtime/status"               // carries the held runtimeFailure
	RouteRemoteStatus  = "/openclaw/plugin-runtime/remote-status" // the Harness, for its Gateway peer
	// RouteSetupCode (POST, bearer SecretStatusToken) mints a one-use setup
	// code on a Gateway: SetupCodeResponse.
	RouteSetupCode = "/oce/v1/setup-code"
	// RouteNodes (GET, bearer SecretStatusToken) lists the nodes a Gateway
	// knows: NodesResponse.
	RouteNodes = "/oce/v1/nodes"
	// RouteChat (POST ChatRequest, bearer SecretStatusToken) runs one turn
	// through the Gateway as a loopback operator (the gateway pairs loopback
	// operators silently; a remote one would need pairing approval) and
	// streams ChatEvents as NDJSON: the coordinator relays `occ agent send`
	// with it, and the gateway password never leaves the Pod.
	RouteChat = "/oce/v1/chat"
)

// ChatRequest is the body of RouteChat.
type ChatRequest struct {
	Session string `json:"session"`
	Message string `json:"message"`
}

// ChatEvent is one NDJSON line of RouteChat's answer: reply text as it
// streams, then exactly one of Done (with the whole Reply) or Code.
type ChatEvent struct {
	Delta string `json:"delta,omitempty"`
	Done  bool   `json:"done,omitempty"`
	Reply string `json:"reply,omitempty"`
	// Code ends a failed turn: ChatUnavailable, ChatDisconnected or
	// ChatTurnFailed; Message says more.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Codes of a failed RouteChat turn.
const (
	ChatUnavailable  = "UNAVAILABLE"  // the gateway did not accept the operator in time
	ChatDisconnected = "DISCONNECTED" // the connection ended before the turn
	ChatTurnFailed   = "TURN_FAILED"  // the gateway ended the turn with an error
)

// SetupCodeResponse is the answer of RouteSetupCode.
type SetupCodeResponse struct {
	SetupCode   string `json:"setupCode"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
}

// Node is one entry of RouteNodes.
type Node struct {
	NodeID    string   `json:"nodeId"`
	Connected bool     `json:"connected"`
	Commands  []string `json:"commands"`
}

// NodesResponse is the answer of RouteNodes.
type NodesResponse struct {
	Nodes []Node `json:"nodes"`
}

// PeerStatusURL is EnvPeerStatusURL for a Harness status server at host:port.
func PeerStatusURL(host string, port int) string {
	return fmt.Sprintf("http://%s:%d%s", host, port, RouteRemoteStatus)
}

// AppServerURL is EnvAppServerURL for an app-server at host:port.
func AppServerURL(host string, port int) string { return fmt.Sprintf("ws://%s:%d", host, port) }
