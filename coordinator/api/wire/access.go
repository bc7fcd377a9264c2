package wire

// Actions GET …/access decides, named as the API authorizes them (the
// Cedar actions of docs/API.md). A workspace document write authorizes
// ActionUpdateAgent.
const (
	ActionCreateAgent         = "CreateAgent"
	ActionCreateConfiguration = "CreateConfiguration"
	ActionUpdateAgent         = "UpdateAgent"
	ActionDeleteAgent         = "DeleteAgent"
	ActionDeployAgent         = "DeployAgent"
	ActionStopAgent           = "StopAgent"

	// The credential sources of the Namespace (GET /v1/namespaces/{ns}/access).
	ActionCreateCredentialSource   = "CreateCredentialSource"
	ActionRotateCredentialSource   = "RotateCredentialSource"
	ActionWithdrawCredentialSource = "WithdrawCredentialSource"
)

// Access is what the caller may do on one resource (GET
// /v1/namespaces/{ns}/access and GET …/agents/{agent}/access), decided as
// the API decides the requests themselves: a client shows the actions the
// caller may take, and the API still decides every request.
type Access struct {
	// Resource is the resource decided on, e.g. Agent::"team/bot".
	Resource string `json:"resource"`
	// Actions holds one decision per action.
	Actions map[string]AccessDecision `json:"actions"`
}

// AccessDecision is one action's decision.
type AccessDecision struct {
	Allowed bool `json:"allowed"`
	// Reasons name the policies of a denial (a forbidding Restriction, or
	// "no role grants …").
	Reasons []string `json:"reasons,omitempty"`
}

// Allowed reports whether the caller may take action.
func (a Access) Allowed(action string) bool { return a.Actions[action].Allowed }
