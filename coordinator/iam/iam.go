// Package iam is the coordinator's authorization: the IAMDriver interface
// the API and the activation engine ask (docs/design/seed-002.md: "OCC authorizes
// deployment of the exact Agent and enforces applicable Restrictions through
// the authoritative IAMDriver"), its built-in Cedar driver (cedar.go) with
// the built-in roles as Cedar policies and operator Restrictions as forbid
// policies validated against a schema (schema.go), and the resources and
// principals of state entities (entities.go). What a principal may do with
// the exact resources of a deploy is decided over this package by
// coordinator/policy.
package iam

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Principal kinds.
const (
	KindUser             = "user"
	KindServicePrincipal = "serviceprincipal"
	KindBootstrap        = "bootstrap"
)

// BootstrapActor is the actor of the shared bootstrap token, a
// cluster-admin identity (docs/API.md). LegacyActor is what audit records
// and work of earlier releases carry for the same token.
const (
	BootstrapActor = "bootstrap"
	LegacyActor    = "admin"
	// SystemActor is the (empty) actor of work the activation engine
	// requests itself: rollbacks and owed finalizations. The API always
	// names its caller, so no request can pass for it.
	SystemActor = ""
)

// ExternalPrefix prefixes the names of users and groups an OIDC issuer
// asserts, so they never collide with local users.
const ExternalPrefix = "oidc:"

// Principal is an authenticated caller.
type Principal struct {
	Kind string
	// Name is the user name (external users carry ExternalPrefix), or the
	// service principal's name within Namespace.
	Name string
	// ID is the local user's or service principal's ID ("" for external
	// users and the bootstrap identity).
	ID string
	// Namespace is a service principal's Namespace name.
	Namespace string
	// Groups are the user's groups: a local user's from the state, an
	// external user's as the issuer asserted them (with ExternalPrefix).
	Groups []string
	// External marks a user asserted by an OIDC issuer.
	External bool
	// TokenID is the API token that authenticated the request, if any.
	TokenID string
}

// Actor is the principal as audit records and work name it:
// "bootstrap", "user:<name>" or "serviceprincipal:<namespace>/<name>".
func (p Principal) Actor() string {
	switch p.Kind {
	case KindBootstrap:
		return BootstrapActor
	case KindServicePrincipal:
		return KindServicePrincipal + ":" + p.Namespace + "/" + p.Name
	}
	return KindUser + ":" + p.Name
}

// ExternalGroups returns the groups to freeze with work the principal
// requests: an external user's asserted groups (a local principal's come
// from the state when the work is reauthorized).
func (p Principal) ExternalGroups() []string {
	if !p.External {
		return nil
	}
	return p.Groups
}

// ParseActor splits an actor string into its kind and name (for a service
// principal: Namespace and name).
func ParseActor(actor string) (kind, ns, name string, err error) {
	switch {
	case actor == BootstrapActor || actor == LegacyActor:
		return KindBootstrap, "", BootstrapActor, nil
	case strings.HasPrefix(actor, KindUser+":"):
		name = strings.TrimPrefix(actor, KindUser+":")
		if name != "" {
			return KindUser, "", name, nil
		}
	case strings.HasPrefix(actor, KindServicePrincipal+":"):
		ns, name, ok := strings.Cut(strings.TrimPrefix(actor, KindServicePrincipal+":"), "/")
		if ok && ns != "" && name != "" {
			return KindServicePrincipal, ns, name, nil
		}
	}
	return "", "", "", fmt.Errorf("%w: actor %q", ErrUnknownActor, actor)
}

// Resource types.
const (
	TypeCluster          = "Cluster"
	TypeNamespace        = "Namespace"
	TypeConfiguration    = "Configuration"
	TypeAgent            = "Agent"
	TypeCredentialSource = "CredentialSource"
	TypeServicePrincipal = "ServicePrincipal"
	TypeUser             = "User"
	TypeRestriction      = "Restriction"
)

// ClusterName is the name of the one Cluster resource.
const ClusterName = "oce"

// Resource is the exact resource a request touches, named by names (the
// Namespace's for scoped types).
type Resource struct {
	Type      string
	Namespace string // the Namespace name of scoped types; the name itself for a Namespace
	Name      string
	// Attrs are attributes policies may read (strings, bools, string sets).
	Attrs map[string]any
}

// ClusterRes is the Cluster resource.
func ClusterRes() Resource { return Resource{Type: TypeCluster, Name: ClusterName} }

// NamespaceRes is a Namespace resource.
func NamespaceRes(name string) Resource {
	return Resource{Type: TypeNamespace, Namespace: name, Name: name}
}

// Scoped returns a resource of a Namespace.
func Scoped(typ, ns, name string, attrs map[string]any) Resource {
	return Resource{Type: typ, Namespace: ns, Name: name, Attrs: attrs}
}

// ID is the entity id of the resource: "<namespace>/<name>" for scoped
// types, the name otherwise.
func (r Resource) ID() string {
	switch r.Type {
	case TypeCluster, TypeNamespace, TypeUser, TypeRestriction:
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// String is the resource as a Cedar entity UID: Agent::"team/bot".
func (r Resource) String() string { return r.Type + `::"` + r.ID() + `"` }

// Request is one authorization question.
type Request struct {
	Principal Principal
	Action    Action
	Resource  Resource
	// Context holds the request's facts policies may read (for a deploy:
	// the admitted harness, mode, compute and credentials).
	Context map[string]any
	// RolesOnly evaluates the built-in roles without Restrictions: the
	// permission check a route makes before it has the facts a
	// Restriction may read (deploy checks permission before admission,
	// then everything once admission has run).
	RolesOnly bool
}

// Decision is an authorization answer.
type Decision struct {
	Allowed bool
	// Reasons name the policies that decided (the forbidding Restrictions
	// of a denial).
	Reasons []string
}

// Driver is the IAMDriver: it decides whether a principal may act on a
// resource, and validates operator Restrictions.
type Driver interface {
	Authorize(ctx context.Context, req Request) (Decision, error)
	// ValidateRestriction checks a Restriction's policy text: it must
	// parse, contain only forbid policies and validate against the
	// schema. A refusal is a *PolicyError.
	ValidateRestriction(policy string) error
}

// RolesDecider is optionally implemented by a Driver whose decisions on an
// action depend only on the resource's Namespace while no Restriction
// applies to the action (Cedar.RolesDecide).
type RolesDecider interface {
	RolesDecide(act Action) bool
}

// Errors.
var (
	// ErrUnknownActor: an actor string names no principal kind.
	ErrUnknownActor = errors.New("iam: unknown actor")
	// ErrPolicy: a Restriction's policy is invalid (*PolicyError).
	ErrPolicy = errors.New("iam: invalid policy")
)

// PolicyError is an invalid Restriction: the line (1-based) of the problem
// in the policy text, and what is wrong.
type PolicyError struct {
	Line    int
	Message string
}

func (e *PolicyError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Message) }

// Unwrap makes a *PolicyError match ErrPolicy.
func (e *PolicyError) Unwrap() error { return ErrPolicy }
