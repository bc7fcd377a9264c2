package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Token lifetimes.
const (
	// DefaultTokenTTL is a minted token's lifetime when the request names none.
	DefaultTokenTTL = 30 * 24 * time.Hour
	// MinTokenTTL bounds how short a token may live.
	MinTokenTTL = time.Minute
)

// identityRoutes registers the identity and authorization routes.
func (s *server) identityRoutes() {
	s.read("GET /v1/whoami", s.whoami)
	s.read("GET /v1/users", s.listUsers)
	s.write("POST /v1/users", s.createUser)
	s.write("DELETE /v1/users/{user}", s.deleteUser)
	s.read("GET /v1/namespaces/{ns}/serviceprincipals", s.listServicePrincipals)
	s.write("POST /v1/namespaces/{ns}/serviceprincipals", s.createServicePrincipal)
	s.write("DELETE /v1/namespaces/{ns}/serviceprincipals/{sp}", s.deleteServicePrincipal)
	s.read("GET /v1/tokens", s.listTokens)
	s.write("POST /v1/tokens", s.createToken)
	s.write("DELETE /v1/tokens/{id}", s.revokeToken)
	s.write("POST /v1/tokens/{id}/rotate", s.rotateToken)
	s.read("GET /v1/rolebindings", s.listRoleBindings)
	s.write("POST /v1/rolebindings", s.createRoleBinding)
	s.write("DELETE /v1/rolebindings/{id}", s.deleteRoleBinding)
	s.write("PUT /v1/rolebindings/{id}/labels", s.putRoleBindingLabels)
	s.read("GET /v1/restrictions", s.listRestrictions)
	s.write("PUT /v1/restrictions/{name}", s.putRestriction)
	s.write("DELETE /v1/restrictions/{name}", s.deleteRestriction)
}

// authConfig tells an unauthenticated client how to get a token.
func (s *server) authConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.AuthConfig{OIDC: s.cfg.OIDC})
}

func (s *server) whoami(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	if err := s.allow(r, iam.WhoAmI, iam.ClusterRes(), ""); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.WhoAmI{Actor: p.Actor(), Kind: p.Kind, Name: p.Name, Namespace: p.Namespace,
		Groups: p.Groups, External: p.External, TokenID: p.TokenID})
	return nil
}

func userRes(name string) iam.Resource { return iam.Resource{Type: iam.TypeUser, Name: name} }

func wireUser(u state.User) wire.User {
	return wire.User{ID: u.ID, Name: u.Name, Groups: u.Groups, CreatedAt: u.CreatedAt}
}

func (s *server) listUsers(w http.ResponseWriter, r *http.Request) error {
	var out []state.User
	for _, u := range s.b.Machine().Users() {
		if s.can(r, iam.ManageUsers, userRes(u.Name)) {
			out = append(out, u)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, wireUser))
	return nil
}

func (s *server) createUser(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateUser
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := validName("user", req.Name); err != nil {
		return err
	}
	if err := s.allow(r, iam.ManageUsers, userRes(req.Name), ""); err != nil {
		return err
	}
	if req.Name == iam.BootstrapActor || req.Name == iam.LegacyActor {
		return invalid("user name %q is reserved", req.Name)
	}
	for _, g := range req.Groups {
		if !state.ValidGroupName(g) || strings.HasPrefix(g, iam.ExternalPrefix) {
			return invalid("group %q is malformed (or uses the %q prefix of issuer groups)", g, iam.ExternalPrefix)
		}
	}
	res, err := propose(s, r, state.CmdCreateUser, state.CreateUser{ID: newID(), Name: req.Name, Groups: req.Groups})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, wireUser(res))
	return nil
}

func (s *server) deleteUser(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("user")
	if err := s.allow(r, iam.ManageUsers, userRes(name), ""); err != nil {
		return err
	}
	u, ok := s.b.Machine().UserByName(name)
	if !ok {
		return notFound("user %q not found", name)
	}
	res, err := propose(s, r, state.CmdDeleteUser, state.DeleteUser{UserID: u.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireUser(res))
	return nil
}

// wireSP converts a principal, naming its owning Agent.
func (s *server) wireSP(sp state.ServicePrincipal) wire.ServicePrincipal {
	out := wire.ServicePrincipal{ID: sp.ID, NamespaceID: sp.NamespaceID, Name: sp.Name, AgentID: sp.AgentID,
		CreatedAt: sp.CreatedAt}
	if sp.AgentID != "" {
		out.Agent = s.b.Machine().NamesOf("", sp.AgentID, "", "").Agent
	}
	return out
}

func (s *server) spRes(ns state.Namespace, sp state.ServicePrincipal) iam.Resource {
	agent := ""
	if a, ok := s.b.Machine().Agent(sp.AgentID); ok {
		agent = a.Name
	}
	return iam.ServicePrincipalResource(ns.Name, sp, agent)
}

func (s *server) listServicePrincipals(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	var out []state.ServicePrincipal
	for _, sp := range s.b.Machine().ServicePrincipals(ns.ID) {
		if s.can(r, iam.ViewServicePrincipal, s.spRes(ns, sp)) {
			out = append(out, sp)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, s.wireSP))
	return nil
}

func (s *server) createServicePrincipal(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateServicePrincipal
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	if err := validName("service principal", req.Name); err != nil {
		return err
	}
	if err := s.allow(r, iam.CreateSP, iam.ServicePrincipalResource(ns.Name, state.ServicePrincipal{Name: req.Name}, ""), ns.ID); err != nil {
		return err
	}
	res, err := propose(s, r, state.CmdCreateServicePrincipal, state.CreateServicePrincipal{ID: newID(),
		NamespaceID: ns.ID, Name: req.Name})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.wireSP(res))
	return nil
}

func (s *server) deleteServicePrincipal(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	sp, ok := s.b.Machine().ServicePrincipalByName(ns.ID, r.PathValue("sp"))
	if !ok {
		return notFound("service principal %q not found in namespace %q", r.PathValue("sp"), ns.Name)
	}
	if err := s.allow(r, iam.DeleteSP, s.spRes(ns, sp), ns.ID); err != nil {
		return err
	}
	res, err := propose(s, r, state.CmdDeleteServicePrincipal, state.DeleteServicePrincipal{ServicePrincipalID: sp.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wireSP(res))
	return nil
}

// tokenOwner is a token's principal as a resource, a wire name and its
// Namespace (service principals).
type tokenOwner struct {
	kind, id, name, nsID string
	res                  iam.Resource
}

// ownerOf resolves a token's principal.
func (s *server) ownerOf(kind, id string) (tokenOwner, bool) {
	m := s.b.Machine()
	switch kind {
	case state.PrincipalUser:
		u, ok := m.User(id)
		return tokenOwner{kind: kind, id: id, name: u.Name, res: userRes(u.Name)}, ok
	case state.PrincipalServicePrincipal:
		sp, ok := m.ServicePrincipal(id)
		ns, nsOK := m.Namespace(sp.NamespaceID)
		if !ok || !nsOK {
			return tokenOwner{}, false
		}
		return tokenOwner{kind: kind, id: id, name: ns.Name + "/" + sp.Name, nsID: ns.ID, res: s.spRes(ns, sp)}, true
	}
	return tokenOwner{}, false
}

// ownerNamed resolves a request's user or "<namespace>/<name>" service
// principal; neither means the caller.
func (s *server) ownerNamed(r *http.Request, user, sp string) (tokenOwner, error) {
	m := s.b.Machine()
	p := principal(r)
	switch {
	case user != "" && sp != "":
		return tokenOwner{}, invalid("name a user or a service principal, not both")
	case user != "":
		if err := validName("user", user); err != nil {
			return tokenOwner{}, err
		}
		u, ok := m.UserByName(user)
		if !ok {
			if err := s.allow(r, iam.ManageTokens, userRes(user), ""); err != nil {
				return tokenOwner{}, err
			}
			return tokenOwner{}, notFound("user %q not found", user)
		}
		o, _ := s.ownerOf(state.PrincipalUser, u.ID)
		return o, nil
	case sp != "":
		nsName, name, ok := strings.Cut(sp, "/")
		if !ok || nsName == "" || name == "" {
			return tokenOwner{}, invalid("servicePrincipal must be <namespace>/<name>")
		}
		if err := validName("namespace", nsName); err != nil {
			return tokenOwner{}, err
		}
		if err := validName("service principal", name); err != nil {
			return tokenOwner{}, err
		}
		ns, err := s.visible(r, nsName)
		if err != nil {
			return tokenOwner{}, err
		}
		v, ok := m.ServicePrincipalByName(ns.ID, name)
		if !ok {
			return tokenOwner{}, notFound("service principal %q not found in namespace %q", name, ns.Name)
		}
		o, _ := s.ownerOf(state.PrincipalServicePrincipal, v.ID)
		return o, nil
	case p.Kind == iam.KindUser && !p.External:
		return s.ownerOrGone(state.PrincipalUser, p.ID)
	case p.Kind == iam.KindServicePrincipal:
		return s.ownerOrGone(state.PrincipalServicePrincipal, p.ID)
	}
	return tokenOwner{}, invalid("the bootstrap identity and issuer-authenticated users hold no minted tokens: name a user or service principal")
}

func (s *server) ownerOrGone(kind, id string) (tokenOwner, error) {
	o, ok := s.ownerOf(kind, id)
	if !ok {
		return o, notFound("the caller's principal no longer exists")
	}
	return o, nil
}

func wireToken(t state.Token, owner string) wire.Token {
	return wire.Token{ID: t.ID, Name: t.Name, PrincipalKind: t.PrincipalKind, Principal: owner, CreatedAt: t.CreatedAt,
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, CreatedBy: t.CreatedBy}
}

func (s *server) listTokens(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "user" && k != "servicePrincipal" {
			return invalid("unknown query parameter %q", k)
		}
	}
	var list []state.Token
	if q.Get("user") != "" || q.Get("servicePrincipal") != "" {
		o, err := s.ownerNamed(r, q.Get("user"), q.Get("servicePrincipal"))
		if err != nil {
			return err
		}
		if err := s.allow(r, iam.ManageTokens, o.res, o.nsID); err != nil {
			return err
		}
		list = s.b.Machine().Tokens(o.kind, o.id)
	} else {
		list = s.b.Machine().Tokens("", "")
	}
	out := []wire.Token{}
	memo := map[string]bool{}
	for _, t := range list {
		o, ok := s.ownerOf(t.PrincipalKind, t.PrincipalID)
		if !ok {
			continue
		}
		key := t.PrincipalKind + ":" + t.PrincipalID
		if _, seen := memo[key]; !seen {
			memo[key] = s.can(r, iam.ManageTokens, o.res)
		}
		if memo[key] {
			out = append(out, wireToken(t, o.name))
		}
	}
	writeJSON(w, http.StatusOK, wire.List[wire.Token]{Items: out})
	return nil
}

func parseTTL(v string) (time.Duration, error) {
	if v == "" {
		return DefaultTokenTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinTokenTTL || d > state.MaxTokenLifetime {
		return 0, invalid("ttl must be a duration between %s and %s", MinTokenTTL, state.MaxTokenLifetime)
	}
	return d, nil
}

func (s *server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateToken
	if err := s.decodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	o, err := s.ownerNamed(r, req.User, req.ServicePrincipal)
	if err != nil {
		return err
	}
	if err := s.allow(r, iam.ManageTokens, o.res, o.nsID); err != nil {
		return err
	}
	ttl, err := parseTTL(req.TTL)
	if err != nil {
		return err
	}
	return s.mint(w, r, o, req.Name, ttl, "")
}

// mint makes a token for o, records its hash, and shows it this once. A
// principal at its bound of usable tokens is refused here, before the log
// (the state machine checks again: it decides).
func (s *server) mint(w http.ResponseWriter, r *http.Request, o tokenOwner, name string, ttl time.Duration, replaces string) error {
	if replaces == "" && s.b.Machine().UsableTokens(o.kind, o.id, time.Now()) >= state.MaxUsableTokens {
		return conflict("%s %q holds %d usable tokens, the most one principal may: revoke one first", o.kind, o.name, state.MaxUsableTokens)
	}
	tk, err := authn.Mint()
	if err != nil {
		return err
	}
	res, err := propose(s, r, state.CmdCreateToken, state.CreateToken{ID: tk.ID, Name: name, PrincipalKind: o.kind,
		PrincipalID: o.id, Hash: tk.Hash, ExpiresAt: time.Now().Add(ttl), Replaces: replaces})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, wire.MintedToken{Token: tk.Token, Record: wireToken(res, o.name)})
	return nil
}

// tokenFor resolves {id} for a caller who may manage its principal's
// tokens; a token the caller may not manage is not found.
func (s *server) tokenFor(r *http.Request) (state.Token, tokenOwner, error) {
	t, ok := s.b.Machine().Token(r.PathValue("id"))
	var o tokenOwner
	if ok {
		o, ok = s.ownerOf(t.PrincipalKind, t.PrincipalID)
	}
	if !ok || !s.can(r, iam.ManageTokens, o.res) {
		return t, o, notFound("token %q not found", r.PathValue("id"))
	}
	return t, o, nil
}

func (s *server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	t, o, err := s.tokenFor(r)
	if err != nil {
		return err
	}
	res, err := propose(s, r, state.CmdRevokeToken, state.RevokeToken{TokenID: t.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireToken(res, o.name))
	return nil
}

// rotateToken mints a successor for the same principal and revokes the old
// token in the same entry.
func (s *server) rotateToken(w http.ResponseWriter, r *http.Request) error {
	var req wire.RotateToken
	if err := s.decodeOptionalBody(w, r, &req); err != nil {
		return err
	}
	t, o, err := s.tokenFor(r)
	if err != nil {
		return err
	}
	ttl, err := parseTTL(req.TTL)
	if err != nil {
		return err
	}
	return s.mint(w, r, o, t.Name, ttl, t.ID)
}

func (s *server) wireBinding(b state.RoleBinding) wire.RoleBinding {
	m := s.b.Machine()
	out := wire.RoleBinding{ID: b.ID, Role: b.Role, Subject: wire.Subject{Kind: b.SubjectKind, Name: b.Subject},
		CreatedAt: b.CreatedAt, CreatedBy: b.CreatedBy, Labels: b.Labels}
	if ns, ok := m.Namespace(b.NamespaceID); ok {
		out.Namespace = ns.Name
	}
	if b.SubjectKind == state.PrincipalServicePrincipal {
		if o, ok := s.ownerOf(b.SubjectKind, b.Subject); ok {
			out.Subject.Name = o.name
		}
	}
	return out
}

// bindingScope is the resource a binding's management is authorized on.
func (s *server) bindingScope(b state.RoleBinding) iam.Resource {
	if b.NamespaceID == "" {
		return iam.ClusterRes()
	}
	ns, _ := s.b.Machine().Namespace(b.NamespaceID)
	return iam.NamespaceRes(ns.Name)
}

func (s *server) listRoleBindings(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorOf(r)
	if err != nil {
		return err
	}
	var out []state.RoleBinding
	memo := map[string]bool{}
	for _, b := range s.b.Machine().RoleBindings() {
		if !sel.Matches(b.Labels) {
			continue
		}
		if _, ok := memo[b.NamespaceID]; !ok {
			memo[b.NamespaceID] = s.can(r, iam.ViewRoleBindings, s.bindingScope(b))
		}
		if memo[b.NamespaceID] {
			out = append(out, b)
		}
	}
	writeJSON(w, http.StatusOK, listOf(out, s.wireBinding))
	return nil
}

func (s *server) createRoleBinding(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateRoleBinding
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	if err := validLabels(req.Labels); err != nil {
		return err
	}
	cmd := state.CreateRoleBinding{ID: newID(), Role: req.Role, SubjectKind: req.Subject.Kind, Subject: req.Subject.Name,
		Labels: req.Labels}
	scope := iam.ClusterRes()
	var ns state.Namespace
	if req.Namespace != "" {
		var err error
		if ns, err = s.visible(r, req.Namespace); err != nil {
			return err
		}
		cmd.NamespaceID, scope = ns.ID, iam.NamespaceRes(ns.Name)
	}
	if err := s.allow(r, iam.ManageRoleBindings, scope, ns.ID); err != nil {
		return err
	}
	if !state.ValidRole(req.Role) {
		return invalid("role %q is not one of viewer, deployer, admin, cluster-admin, metrics-reader", req.Role)
	}
	switch req.Subject.Kind {
	case state.PrincipalUser, state.SubjectGroup:
		if !state.ValidGroupName(req.Subject.Name) {
			return invalid("subject name %q is malformed", req.Subject.Name)
		}
	case state.PrincipalServicePrincipal:
		nsName, name, ok := strings.Cut(req.Subject.Name, "/")
		if !ok || nsName != ns.Name || ns.ID == "" {
			return invalid("a service principal subject is <namespace>/<name> of the binding's namespace")
		}
		sp, ok := s.b.Machine().ServicePrincipalByName(ns.ID, name)
		if !ok {
			return notFound("service principal %q not found in namespace %q", name, ns.Name)
		}
		cmd.Subject = sp.ID
	default:
		return invalid("subject kind %q is not one of user, group, servicePrincipal", req.Subject.Kind)
	}
	res, err := propose(s, r, state.CmdCreateRoleBinding, cmd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.wireBinding(res))
	return nil
}

func (s *server) deleteRoleBinding(w http.ResponseWriter, r *http.Request) error {
	b, ok := s.b.Machine().RoleBinding(r.PathValue("id"))
	if !ok || !s.can(r, iam.ViewRoleBindings, s.bindingScope(b)) {
		return notFound("role binding %q not found", r.PathValue("id"))
	}
	if err := s.allow(r, iam.ManageRoleBindings, s.bindingScope(b), b.NamespaceID); err != nil {
		return err
	}
	res, err := propose(s, r, state.CmdDeleteRoleBinding, state.DeleteRoleBinding{BindingID: b.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wireBinding(res))
	return nil
}

func wireRestriction(v state.Restriction) wire.Restriction {
	return wire.Restriction{ID: v.ID, Name: v.Name, Policy: v.Policy, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
		CreatedBy: v.CreatedBy}
}

func restrictionRes(name string) iam.Resource {
	return iam.Resource{Type: iam.TypeRestriction, Name: name}
}

func (s *server) listRestrictions(w http.ResponseWriter, r *http.Request) error {
	if err := s.allow(r, iam.ViewRestrictions, iam.ClusterRes(), ""); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listOf(s.b.Machine().Restrictions(), wireRestriction))
	return nil
}

func (s *server) restrictionByName(name string) (state.Restriction, bool) {
	for _, v := range s.b.Machine().Restrictions() {
		if v.Name == name {
			return v, true
		}
	}
	return state.Restriction{}, false
}

// putRestriction creates (201) or replaces (200) a Restriction after the
// IAM driver validated it; a bad policy is 400 naming the line.
func (s *server) putRestriction(w http.ResponseWriter, r *http.Request) error {
	var req wire.PutRestriction
	if err := s.decodeBody(w, r, &req); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := validName("restriction", name); err != nil {
		return err
	}
	if err := s.allow(r, iam.ManageRestrictions, restrictionRes(name), ""); err != nil {
		return err
	}
	if len(req.Policy) > state.MaxRestrictionText {
		return invalid("the policy is longer than %d bytes", state.MaxRestrictionText)
	}
	if err := s.iam.ValidateRestriction(req.Policy); err != nil {
		var pe *iam.PolicyError
		if errors.As(err, &pe) {
			return &Error{Status: http.StatusBadRequest, Code: codes.InvalidRequest,
				Message: "invalid policy: " + pe.Error(), Details: map[string]any{"reason": "INVALID_POLICY", "line": pe.Line}}
		}
		return err
	}
	id, status := newID(), http.StatusCreated
	if prev, ok := s.restrictionByName(name); ok {
		id, status = prev.ID, http.StatusOK
	}
	res, err := propose(s, r, state.CmdPutRestriction, state.PutRestriction{ID: id, Name: name, Policy: req.Policy})
	if err != nil {
		return err
	}
	writeJSON(w, status, wireRestriction(res))
	return nil
}

func (s *server) deleteRestriction(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := s.allow(r, iam.ManageRestrictions, restrictionRes(name), ""); err != nil {
		return err
	}
	v, ok := s.restrictionByName(name)
	if !ok {
		return notFound("restriction %q not found", name)
	}
	res, err := propose(s, r, state.CmdDeleteRestriction, state.DeleteRestriction{RestrictionID: v.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireRestriction(res))
	return nil
}
