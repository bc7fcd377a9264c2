package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Authorization at the API edge: every route names its action (routeActions;
// a route without one cannot be registered), resolves its Namespace only
// when the caller may see it — a Namespace the caller cannot see answers
// 403 whether it exists or not — and authorizes the exact resources it
// touches. A denial answers 403 FORBIDDEN with the action and resource; a
// denied write appends one audit record.

// routeActions is the action each route authorizes first (handlers add the
// further resources they touch). GET /livez, /readyz and /v1/auth are
// served to anyone.
var routeActions = map[string]iam.Action{
	"GET /metrics": iam.ViewMetrics,

	"GET /v1/namespaces":      iam.ViewNamespace,
	"POST /v1/namespaces":     iam.CreateNamespace,
	"GET /v1/namespaces/{ns}": iam.ViewNamespace,
	// Removing a tenant boundary is a cluster administrator's act.
	"DELETE /v1/namespaces/{ns}": iam.AdministerCluster,
	// So is bounding what a tenant may hold.
	"PUT /v1/namespaces/{ns}/quota": iam.AdministerCluster,
	// Labelling a Namespace is its creator's act.
	"PUT /v1/namespaces/{ns}/labels": iam.CreateNamespace,

	"GET /v1/namespaces/{ns}/configurations":       iam.ViewConfiguration,
	"POST /v1/namespaces/{ns}/configurations":      iam.CreateConfiguration,
	"GET /v1/namespaces/{ns}/configurations/{cfg}": iam.ViewConfiguration,
	"PUT /v1/namespaces/{ns}/configurations/{cfg}": iam.UpdateConfiguration,
	// Deleting a Configuration is its administrators' update of it.
	"DELETE /v1/namespaces/{ns}/configurations/{cfg}":     iam.UpdateConfiguration,
	"PUT /v1/namespaces/{ns}/configurations/{cfg}/labels": iam.UpdateConfiguration,

	"GET /v1/namespaces/{ns}/agents":                         iam.ViewAgent,
	"POST /v1/namespaces/{ns}/agents":                        iam.CreateAgent,
	"GET /v1/namespaces/{ns}/agents/{agent}":                 iam.ViewAgent,
	"PATCH /v1/namespaces/{ns}/agents/{agent}":               iam.UpdateAgent,
	"DELETE /v1/namespaces/{ns}/agents/{agent}":              iam.DeleteAgent,
	"PUT /v1/namespaces/{ns}/agents/{agent}/labels":          iam.UpdateAgent,
	"POST /v1/namespaces/{ns}/agents/{agent}/deploy":         iam.DeployAgent,
	"POST /v1/namespaces/{ns}/agents/{agent}/stop":           iam.StopAgent,
	"GET /v1/namespaces/{ns}/agents/{agent}/revisions":       iam.ViewAgent,
	"GET /v1/namespaces/{ns}/agents/{agent}/revisions/{rev}": iam.ViewAgent,
	"GET /v1/namespaces/{ns}/agents/{agent}/work":            iam.ViewAgent,
	"GET /v1/namespaces/{ns}/agents/{agent}/endpoints":       iam.ViewAgent,
	"POST /v1/namespaces/{ns}/agents/{agent}/messages":       iam.MessageAgent,
	"GET /v1/namespaces/{ns}/agents/{agent}/logs":            iam.ViewAgent,
	"GET /v1/namespaces/{ns}/serviceprincipals":              iam.ViewServicePrincipal,
	"POST /v1/namespaces/{ns}/serviceprincipals":             iam.CreateSP,
	"DELETE /v1/namespaces/{ns}/serviceprincipals/{sp}":      iam.DeleteSP,
	"GET /v1/work":                     iam.ViewAgent,
	"GET /v1/work/{id}":                iam.ViewAgent,
	"GET /v1/audit":                    iam.ViewAudit,
	"GET /v1/installation":             iam.ViewInstallation,
	"GET /v1/version":                  iam.ViewInstallation,
	"GET /v1/status":                   iam.ViewAgent,
	"GET /v1/index":                    iam.ViewInstallation,
	"GET /v1/whoami":                   iam.WhoAmI,
	"GET /v1/users":                    iam.ManageUsers,
	"POST /v1/users":                   iam.ManageUsers,
	"DELETE /v1/users/{user}":          iam.ManageUsers,
	"GET /v1/tokens":                   iam.ManageTokens,
	"POST /v1/tokens":                  iam.ManageTokens,
	"DELETE /v1/tokens/{id}":           iam.ManageTokens,
	"POST /v1/tokens/{id}/rotate":      iam.ManageTokens,
	"GET /v1/rolebindings":             iam.ViewRoleBindings,
	"POST /v1/rolebindings":            iam.ManageRoleBindings,
	"DELETE /v1/rolebindings/{id}":     iam.ManageRoleBindings,
	"PUT /v1/rolebindings/{id}/labels": iam.ManageRoleBindings,
	"GET /v1/restrictions":             iam.ViewRestrictions,
	"PUT /v1/restrictions/{name}":      iam.ManageRestrictions,
	"DELETE /v1/restrictions/{name}":   iam.ManageRestrictions,
	"GET /v1/cluster":                  iam.ViewCluster,
	"POST /v1/cluster/join":            iam.AdministerCluster,
	"POST /v1/cluster/remove":          iam.AdministerCluster,
	"POST /v1/cluster/transfer":        iam.AdministerCluster,
	"GET /v1/cluster/snapshot":         iam.AdministerCluster,
	"POST /v1/cluster/restore":         iam.AdministerCluster,

	// Credential sources (credentials.go); a registration (from) is also
	// RegisterCredentialSource, a cluster admin's.
	"GET /v1/namespaces/{ns}/credentials":                iam.ViewCredentialSource,
	"POST /v1/namespaces/{ns}/credentials":               iam.CreateCredentialSource,
	"GET /v1/namespaces/{ns}/credentials/{cred}":         iam.ViewCredentialSource,
	"POST /v1/namespaces/{ns}/credentials/{cred}/rotate": iam.RotateCredentialSource,
	"DELETE /v1/namespaces/{ns}/credentials/{cred}":      iam.WithdrawCredentialSource,
}

// Route is one API route and the action it authorizes.
type Route struct {
	Pattern string
	Action  iam.Action
}

// Routes lists every authenticated route the handler serves, from the same
// registration that serves them (the authorization matrix test walks it).
func Routes() []Route {
	s := &server{mux: http.NewServeMux(), registered: &[]Route{}}
	s.registerRoutes()
	return *s.registered
}

type routeKey struct{}

// routeOf returns the pattern of the route serving r.
func routeOf(r *http.Request) string {
	p, _ := r.Context().Value(routeKey{}).(string)
	return p
}

// principal returns the authenticated caller.
func principal(r *http.Request) iam.Principal {
	p, _ := authn.PrincipalFrom(r.Context())
	return p
}

// forbidden is the 403 of a denied action on a resource.
func forbidden(act iam.Action, res iam.Resource, reasons []string) *Error {
	e := &Error{Status: http.StatusForbidden, Code: codes.Forbidden,
		Message: fmt.Sprintf("%s is not allowed on %s", act, res),
		Details: map[string]any{"action": string(act), "resource": res.String()}}
	if len(reasons) > 0 {
		e.Details["policies"] = strings.Join(reasons, ", ")
	}
	return e
}

// decide asks the IAM driver.
func (s *server) decide(ctx context.Context, p iam.Principal, act iam.Action, res iam.Resource, c map[string]any, rolesOnly bool) (iam.Decision, error) {
	return s.iam.Authorize(ctx, iam.Request{Principal: p, Action: act, Resource: res, Context: c, RolesOnly: rolesOnly})
}

// can reports whether the caller may act on res (lists filter with it).
func (s *server) can(r *http.Request, act iam.Action, res iam.Resource) bool {
	d, err := s.decide(r.Context(), principal(r), act, res, nil, false)
	return err == nil && d.Allowed
}

// auditAt is where the audit record of a request belongs: its Namespace's
// id and, for an action on an Agent, the Agent's (whose audit trail in the
// console shows the record). A route whose writes are recorded under their
// own audit action (a workspace document write authorizes UpdateAgent) names
// it in as, with details every record of it carries.
type auditAt struct {
	ns, agent string
	as        string
	details   map[string]string
}

// onAgent is where the records of an action on Agent a in ns belong.
func onAgent(ns state.Namespace, a state.Agent) auditAt { return auditAt{ns: ns.ID, agent: a.ID} }

// allow authorizes act on res for the caller, or returns the 403 (and, for
// a write, appends the denial's audit record). nsID names the Namespace the
// resource is in, when it exists, for the audit record.
func (s *server) allow(r *http.Request, act iam.Action, res iam.Resource, nsID string) error {
	return s.authorize(r, act, res, auditAt{ns: nsID}, nil, false)
}

// authorize is allow with the audit record's place, the request's context
// facts and, with rolesOnly, the built-in roles alone.
func (s *server) authorize(r *http.Request, act iam.Action, res iam.Resource, at auditAt, c map[string]any, rolesOnly bool) error {
	return s.refused(r, at, s.decider().Allow(r.Context(), iam.Request{Principal: principal(r), Action: act,
		Resource: res, Context: c, RolesOnly: rolesOnly}))
}

// decider decides the caller's uses of exact resources over the current
// state (coordinator/policy: the deploy decision the engine's
// reauthorization makes too).
func (s *server) decider() policy.Decider {
	return policy.Decider{IAM: s.iam, State: s.b.Machine()}
}

// refused turns a policy decision into the request's answer: a denial
// answers 403 FORBIDDEN with the action and resource (a denied write
// appends its audit record at at), a decision the driver failed to make is
// the driver's error, and anything else passes unchanged.
func (s *server) refused(r *http.Request, at auditAt, err error) error {
	var d *policy.Denied
	if errors.As(err, &d) {
		s.auditDenial(r, d.Action, d.Resource, at, d.Reasons)
		return forbidden(d.Action, d.Resource, d.Reasons)
	}
	var u *policy.Undecided
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

// auditDenial appends the record of a denied write: compact (the action,
// the resource as validated path segments and names spell it, the code;
// the state bounds every string) and paced per actor (bounds.go:
// denialAudit folds a flood into counts).
func (s *server) auditDenial(r *http.Request, act iam.Action, res iam.Resource, at auditAt, reasons []string) {
	var details map[string]string
	if len(reasons) > 0 {
		details = map[string]string{"policies": truncate(strings.Join(reasons, ", "), 512)}
	}
	s.auditRefusal(r, act, res, at, codes.Forbidden, details)
}

// auditRefusal appends the record of a write refused with code — a
// permission denied (FORBIDDEN), or a closed reason such as a credential
// reference into another Namespace — with its actor; reads are not audited.
func (s *server) auditRefusal(r *http.Request, act iam.Action, res iam.Resource, at auditAt, code codes.Code, more map[string]string) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	own, folded := s.denials.admit(principal(r).Actor())
	if !own {
		s.denials.unrecorded.Inc()
		return
	}
	info, _ := iam.Info(act)
	action := info.Audit
	if action == "" {
		action = "oce." + string(act)
	}
	details := map[string]string{"action": string(act), "code": string(code)}
	maps.Copy(details, more)
	if at.as != "" {
		action = at.as
		maps.Copy(details, at.details)
	}
	if folded > 0 {
		details["suppressed"] = strconv.Itoa(folded)
	}
	if _, err := propose(s, r, state.CmdRecordAudit, state.RecordAudit{Action: action, Resource: res.String(),
		NamespaceID: at.ns, AgentID: at.agent, Outcome: state.OutcomeDenied, Details: details}); err != nil {
		s.log.Warn("denial audit failed", "action", string(act), "error", err.Error())
	}
}

// auditSuccess appends the record of a change outside the state machine's
// own commands (cluster membership, restore).
func (s *server) auditSuccess(r *http.Request, action string, res iam.Resource, details map[string]string) {
	if _, err := propose(s, r, state.CmdRecordAudit, state.RecordAudit{Action: action, Resource: res.String(),
		Outcome: state.OutcomeSuccess, Details: details}); err != nil {
		s.log.Warn("audit failed", "action", action, "error", err.Error())
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// pathResource names the resource a route's path refers to, as the caller
// spelled it (never resolved: a 403 must not tell ids from names).
func pathResource(r *http.Request) iam.Resource {
	ns := r.PathValue("ns")
	switch {
	case r.PathValue("agent") != "":
		return iam.Scoped(iam.TypeAgent, ns, r.PathValue("agent"), nil)
	case r.PathValue("cfg") != "":
		return iam.Scoped(iam.TypeConfiguration, ns, r.PathValue("cfg"), nil)
	case r.PathValue("sp") != "":
		return iam.Scoped(iam.TypeServicePrincipal, ns, r.PathValue("sp"), nil)
	case r.PathValue("cred") != "":
		return iam.Scoped(iam.TypeCredentialSource, ns, r.PathValue("cred"), nil)
	}
	return iam.NamespaceRes(ns)
}

// visible resolves the {ns} of the request for a caller who may view it;
// otherwise, and for a Namespace that does not exist unless the caller
// could view it if it did, the answer is 403 with the route's action.
func (s *server) visible(r *http.Request, ref string) (state.Namespace, error) {
	ns, err := s.namespaceIn(r.Context(), ref)
	name := ref
	if err == nil {
		name = ns.Name
	}
	if !s.can(r, iam.ViewNamespace, iam.NamespaceRes(name)) {
		act := routeActions[routeOf(r)]
		res := pathResource(r)
		if r.PathValue("ns") == "" {
			// The Namespace came from the body or the query (a service
			// principal's tokens): name it, never Namespace::"".
			res = iam.NamespaceRes(ref)
		}
		// Recorded cluster-wide, never in the Namespace's own log: a
		// caller who may not see a Namespace cannot write into its audit
		// trail, and the record does not tell whether it exists.
		s.auditDenial(r, act, res, auditAt{}, nil)
		return state.Namespace{}, forbidden(act, res, nil)
	}
	return ns, err
}

// Resources of state entities.

func (s *server) agentRes(ns state.Namespace, a state.Agent) iam.Resource {
	return policy.AgentResource(s.b.Machine(), ns, a)
}

func cfgRes(ns state.Namespace, name string) iam.Resource {
	return iam.Scoped(iam.TypeConfiguration, ns.Name, name, nil)
}
