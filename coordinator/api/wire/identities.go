package wire

import "time"

// Principal kinds of tokens and role binding subjects.
const (
	PrincipalUser             = "user"
	PrincipalServicePrincipal = "servicePrincipal"
	SubjectGroup              = "group"
)

// Built-in roles. cluster-admin and metrics-reader are granted cluster-wide
// (a binding without a namespace); metrics-reader reads /metrics only.
const (
	RoleViewer        = "viewer"
	RoleDeployer      = "deployer"
	RoleAdmin         = "admin"
	RoleClusterAdmin  = "cluster-admin"
	RoleMetricsReader = "metrics-reader"
)

// Audit outcomes.
const (
	OutcomeSuccess = "success"
	OutcomeDenied  = "denied"
	OutcomeFailure = "failure"
)

// OIDCConfig is what GET /v1/auth announces when an issuer is configured:
// where occ login gets a token (the device grant) and the audience the
// coordinator expects.
type OIDCConfig struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
}

// AuthConfig is the answer of GET /v1/auth (no authentication needed).
type AuthConfig struct {
	OIDC *OIDCConfig `json:"oidc,omitempty"`
}

// WhoAmI is the answer of GET /v1/whoami: the authenticated caller.
type WhoAmI struct {
	Actor     string   `json:"actor"`
	Kind      string   `json:"kind"` // bootstrap | user | serviceprincipal
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Groups    []string `json:"groups,omitempty"`
	External  bool     `json:"external,omitempty"`
	TokenID   string   `json:"tokenId,omitempty"`
}

// User is a local user.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Groups    []string  `json:"groups,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// CreateUser is the body of POST /v1/users.
type CreateUser struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
}

// ServicePrincipal is a non-human identity of a Namespace.
type ServicePrincipal struct {
	ID          string    `json:"id"`
	NamespaceID string    `json:"namespaceId"`
	Name        string    `json:"name"`
	AgentID     string    `json:"agentId,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	// Agent names the Agent that owns the principal (AgentID's name).
	Agent string `json:"agent,omitempty"`
}

// CreateServicePrincipal is the body of POST /v1/namespaces/{ns}/serviceprincipals.
type CreateServicePrincipal struct {
	Name string `json:"name"`
}

// Token is an API token's record; the token itself is never shown again.
type Token struct {
	ID            string    `json:"id"`
	Name          string    `json:"name,omitempty"`
	PrincipalKind string    `json:"principalKind"`
	Principal     string    `json:"principal"` // user name, or <namespace>/<name> of a service principal
	CreatedAt     time.Time `json:"createdAt"`
	ExpiresAt     time.Time `json:"expiresAt"`
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
	CreatedBy     string    `json:"createdBy,omitempty"`
}

// CreateToken is the body of POST /v1/tokens. With neither User nor
// ServicePrincipal the token is the caller's own.
type CreateToken struct {
	Name             string `json:"name,omitempty"`
	User             string `json:"user,omitempty"`
	ServicePrincipal string `json:"servicePrincipal,omitempty"` // <namespace>/<name>
	// TTL is a Go duration ("720h"); default 30 days, at most 366 days.
	TTL string `json:"ttl,omitempty"`
}

// RotateToken is the optional body of POST /v1/tokens/{id}/rotate.
type RotateToken struct {
	TTL string `json:"ttl,omitempty"`
}

// MintedToken is the answer of a token creation or rotation: the token,
// shown this once, and its record.
type MintedToken struct {
	Token  string `json:"token"`
	Record Token  `json:"record"`
}

// Subject is who a role binding grants a role to.
type Subject struct {
	Kind string `json:"kind"` // user | group | servicePrincipal
	Name string `json:"name"` // user or group name, or <namespace>/<name> of a service principal
}

// RoleBinding grants a built-in role.
type RoleBinding struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Namespace string    `json:"namespace,omitempty"` // empty exactly for cluster-admin and metrics-reader
	Subject   Subject   `json:"subject"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
	// Labels are the binding's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// CreateRoleBinding is the body of POST /v1/rolebindings.
type CreateRoleBinding struct {
	Role      string  `json:"role"`
	Namespace string  `json:"namespace,omitempty"`
	Subject   Subject `json:"subject"`
	// Labels are the new binding's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// Restriction is an operator's Cedar forbid policies.
type Restriction struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Policy    string    `json:"policy"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
}

// PutRestriction is the body of PUT /v1/restrictions/{name}.
type PutRestriction struct {
	Policy string `json:"policy"`
}
