package iam

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"

	"oce.dev/oce/coordinator/state"
)

// rolePolicies are the built-in roles. A principal's role bindings become
// its parents (Role::"<namespace>/viewer" …, Role::"cluster-admin",
// Role::"metrics-reader"); admin implies deployer implies viewer, so an
// admin's parents hold all three. metrics-reader grants ViewMetrics only:
// a scrape token that can read no Namespace's resources.
const rolePolicies = `@id("role:viewer")
permit (principal, action in Action::"view", resource)
when { resource has namespace && principal in resource.namespace.viewers };

@id("role:deployer")
permit (principal, action in Action::"operate", resource)
when { resource has namespace && principal in resource.namespace.deployers };

@id("role:admin")
permit (principal, action in Action::"administer", resource)
when { resource has namespace && principal in resource.namespace.admins };

@id("role:cluster-admin")
permit (principal in Role::"cluster-admin", action, resource);

@id("role:metrics-reader")
permit (principal in Role::"metrics-reader", action == Action::"ViewMetrics", resource);

@id("authenticated")
permit (principal, action in Action::"authenticated", resource);

@id("own-tokens")
permit (principal, action == Action::"ManageTokens", resource)
when { principal == resource };
`

// Cedar entity types.
var (
	etAction = types.EntityType("Action")
	etRole   = types.EntityType("Role")
	etGroup  = types.EntityType("Group")
)

// clusterAdminRole is the role entity of cluster-admin.
var clusterAdminRole = types.NewEntityUID(etRole, "cluster-admin")

// roleUID is a bound role's entity: Role::"<name>" for the cluster-wide
// roles, Role::"<namespace>/<name>" for the others.
func roleUID(ns, role string) types.EntityUID {
	if state.ClusterRole(role) {
		return types.NewEntityUID(etRole, types.String(role))
	}
	return types.NewEntityUID(etRole, types.String(ns+"/"+role))
}

// implied lists the roles a bound role grants.
var implied = map[string][]string{
	state.RoleViewer:   {state.RoleViewer},
	state.RoleDeployer: {state.RoleDeployer, state.RoleViewer},
	state.RoleAdmin:    {state.RoleAdmin, state.RoleDeployer, state.RoleViewer},
}

// Cedar is the built-in IAMDriver: the roles above plus the Restrictions
// stored in the replicated state, compiled again whenever the state's
// identity data changes.
type Cedar struct {
	m       *state.Machine
	roles   []policyEntry
	actions types.EntityMap // the action hierarchy

	mu  sync.RWMutex
	gen uint64
	c   *compiled
}

type policyEntry struct {
	id string
	p  *cedar.Policy
}

// compiled is what the driver derives from one identity generation.
type compiled struct {
	// bindings maps a subject ("user:<name>", "group:<name>",
	// "servicePrincipal:<id>") to its role entities.
	bindings map[string][]types.EntityUID
	// byAction holds the Restrictions' policies that can apply to each
	// action (by their action scope).
	byAction map[Action][]policyEntry
	// broken names Restrictions that no longer validate (a schema change
	// since they were stored); they deny every action they may name.
	broken []string
	// Entities that depend only on this generation's data, built once:
	// principals (with their roles) and Namespaces, by key.
	principals, namespaces sync.Map
	cached                 atomic.Int64
}

// maxCached bounds the entities one generation caches.
const maxCached = 1 << 14

// cache stores v under key unless the cache is full.
func (cc *compiled) cache(m *sync.Map, key string, v types.Entity) {
	if cc.cached.Add(1) <= maxCached {
		m.Store(key, v)
	}
}

// NewCedar returns the built-in driver over the replicated state m.
func NewCedar(m *state.Machine) *Cedar {
	list, err := cedar.NewPolicyListFromBytes("roles", []byte(rolePolicies))
	if err != nil {
		panic("iam: role policies: " + err.Error())
	}
	c := &Cedar{m: m, actions: types.EntityMap{}}
	for _, p := range list {
		id, _ := p.Annotations()["id"]
		c.roles = append(c.roles, policyEntry{id: string(id), p: p})
	}
	for _, g := range []Action{GroupView, GroupOperate, GroupAdminister, GroupAuthenticated} {
		uid := types.NewEntityUID(etAction, types.String(g))
		c.actions[uid] = types.Entity{UID: uid}
	}
	for a, info := range actions {
		uid := types.NewEntityUID(etAction, types.String(a))
		e := types.Entity{UID: uid}
		if info.Group != "" {
			e.Parents = types.NewEntityUIDSet(types.NewEntityUID(etAction, types.String(info.Group)))
		}
		c.actions[uid] = e
	}
	return c
}

// RolesDecide reports whether only the built-in roles decide act — no
// Restriction can apply to it — so a decision on one resource holds for
// every resource of the same type in the same Namespace (roles read only
// the Namespace). Lists use it to decide once per Namespace.
func (c *Cedar) RolesDecide(act Action) bool {
	cc := c.current()
	return len(cc.byAction[act]) == 0 && len(cc.broken) == 0
}

// ValidateRestriction implements Driver.
func (c *Cedar) ValidateRestriction(policy string) error {
	_, err := ParseRestriction("restriction", policy)
	return err
}

// current returns the compiled state for the machine's identity generation.
func (c *Cedar) current() *compiled {
	gen := c.m.IdentityGeneration()
	c.mu.RLock()
	cc, ok := c.c, c.gen == gen && c.c != nil
	c.mu.RUnlock()
	if ok {
		return cc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil && c.gen == gen {
		return c.c
	}
	c.c, c.gen = c.compile(), gen
	return c.c
}

func (c *Cedar) compile() *compiled {
	cc := &compiled{bindings: map[string][]types.EntityUID{}, byAction: map[Action][]policyEntry{}}
	for _, b := range c.m.RoleBindings() {
		key := b.SubjectKind + ":" + b.Subject
		if state.ClusterRole(b.Role) {
			cc.bindings[key] = append(cc.bindings[key], roleUID("", b.Role))
			continue
		}
		ns, ok := c.m.Namespace(b.NamespaceID)
		if !ok {
			continue
		}
		for _, r := range implied[b.Role] {
			cc.bindings[key] = append(cc.bindings[key], roleUID(ns.Name, r))
		}
	}
	for _, r := range c.m.Restrictions() {
		list, err := ParseRestriction(r.Name, r.Policy)
		if err != nil {
			cc.broken = append(cc.broken, r.Name)
			continue
		}
		for i, p := range list {
			e := policyEntry{id: fmt.Sprintf("restriction:%s:%d", r.Name, i), p: p}
			for _, a := range scopeActions(p) {
				cc.byAction[a] = append(cc.byAction[a], e)
			}
		}
	}
	return cc
}

// scopeActions lists the actions a policy's action scope can match.
func scopeActions(p *cedar.Policy) []Action {
	var out []Action
	for a := range actions {
		if matchesScope(p, a) {
			out = append(out, a)
		}
	}
	return out
}

// matchesScope reports whether p's action scope can match action a: all
// actions, a itself, or a group a belongs to.
func matchesScope(p *cedar.Policy, a Action) bool {
	in := func(uid types.EntityUID) bool {
		if uid.Type != etAction {
			return false
		}
		return Action(uid.ID) == a || (actions[a].Group != "" && Action(uid.ID) == actions[a].Group)
	}
	switch sc := (*xast.Policy)(p.AST()).Action.(type) {
	case xast.ScopeTypeAll:
		return true
	case xast.ScopeTypeEq:
		return sc.Entity.Type == etAction && Action(sc.Entity.ID) == a
	case xast.ScopeTypeIn:
		return in(sc.Entity)
	case xast.ScopeTypeInSet:
		for _, e := range sc.Entities {
			if in(e) {
				return true
			}
		}
	}
	return false
}

// Authorize implements Driver.
func (c *Cedar) Authorize(_ context.Context, req Request) (Decision, error) {
	if _, ok := actions[req.Action]; !ok {
		return Decision{}, fmt.Errorf("iam: unknown action %q", req.Action)
	}
	cc := c.current()
	ents := requestEntities{base: c.actions, own: make(types.EntityMap, 4)}
	pUID := c.principalEntity(cc, req.Principal, ents.own)
	rUID := resourceEntity(cc, req.Resource, ents.own)
	ctxRec, err := toRecord(req.Context)
	if err != nil {
		return Decision{}, err
	}
	ps := policySet{roles: c.roles}
	if !req.RolesOnly {
		ps.restrictions = cc.byAction[req.Action]
		if len(cc.broken) > 0 {
			return Decision{Reasons: prefixed("broken-restriction:", cc.broken)}, nil
		}
	}
	dec, diag := cedar.Authorize(ps, ents, cedar.Request{Principal: pUID,
		Action: types.NewEntityUID(etAction, types.String(req.Action)), Resource: rUID, Context: ctxRec})
	out := Decision{Allowed: dec == cedar.Allow}
	for _, r := range diag.Reasons {
		out.Reasons = append(out.Reasons, string(r.PolicyID))
	}
	// A Restriction that fails to evaluate (an attribute the request does
	// not carry) denies: Restrictions fail closed.
	for _, e := range diag.Errors {
		if !isRole(string(e.PolicyID)) {
			out.Allowed = false
			out.Reasons = append(out.Reasons, string(e.PolicyID)+" (evaluation error: "+e.Message+")")
		}
	}
	if !out.Allowed && len(out.Reasons) == 0 {
		out.Reasons = []string{"no role grants " + string(req.Action)}
	}
	return out, nil
}

func isRole(id string) bool {
	return len(id) < len("restriction:") || id[:len("restriction:")] != "restriction:"
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// principalEntity adds the principal with its groups and roles to ents
// (cached per generation: the roles come from the generation's bindings).
func (c *Cedar) principalEntity(cc *compiled, p Principal, ents types.EntityMap) types.EntityUID {
	key := p.Kind + "\x00" + p.Name + "\x00" + p.ID + "\x00" + p.Namespace + "\x00" + strings.Join(p.Groups, "\x00")
	if p.External {
		key += "\x00ext"
	}
	if e, ok := cc.principals.Load(key); ok {
		ent := e.(types.Entity)
		ents[ent.UID] = ent
		return ent.UID
	}
	uid := c.buildPrincipal(cc, p, ents)
	cc.cache(&cc.principals, key, ents[uid])
	return uid
}

func (c *Cedar) buildPrincipal(cc *compiled, p Principal, ents types.EntityMap) types.EntityUID {
	var uid types.EntityUID
	var parents []types.EntityUID
	attrs := types.RecordMap{"name": types.String(p.Name)}
	switch p.Kind {
	case KindBootstrap:
		uid = types.NewEntityUID(TypeUser, BootstrapActor)
		parents = append(parents, clusterAdminRole)
		attrs["external"] = types.False
	case KindServicePrincipal:
		uid = types.NewEntityUID(TypeServicePrincipal, types.String(p.Namespace+"/"+p.Name))
		parents = append(parents, types.NewEntityUID(TypeNamespace, types.String(p.Namespace)))
		parents = append(parents, cc.bindings[state.PrincipalServicePrincipal+":"+p.ID]...)
		attrs["namespace"] = types.NewEntityUID(TypeNamespace, types.String(p.Namespace))
		attrs["agent"] = types.String("")
	default:
		uid = types.NewEntityUID(TypeUser, types.String(p.Name))
		parents = append(parents, cc.bindings[state.PrincipalUser+":"+p.Name]...)
		for _, g := range p.Groups {
			parents = append(parents, types.NewEntityUID(etGroup, types.String(g)))
			parents = append(parents, cc.bindings[state.SubjectGroup+":"+g]...)
		}
		attrs["external"] = types.Boolean(p.External)
	}
	ents[uid] = types.Entity{UID: uid, Parents: types.NewEntityUIDSet(parents...), Attributes: types.NewRecord(attrs)}
	return uid
}

// namespaceEntity is a Namespace's entity: its role groups as attributes.
func namespaceEntity(cc *compiled, name string) types.Entity {
	if e, ok := cc.namespaces.Load(name); ok {
		return e.(types.Entity)
	}
	nsUID := types.NewEntityUID(TypeNamespace, types.String(name))
	e := types.Entity{UID: nsUID, Parents: types.NewEntityUIDSet(types.NewEntityUID(TypeCluster, ClusterName)),
		Attributes: types.NewRecord(types.RecordMap{
			"name": types.String(name), "namespace": nsUID,
			"viewers":   roleUID(name, state.RoleViewer),
			"deployers": roleUID(name, state.RoleDeployer),
			"admins":    roleUID(name, state.RoleAdmin),
		})}
	cc.cache(&cc.namespaces, name, e)
	return e
}

// resourceEntity adds the resource (and its Namespace) to ents.
func resourceEntity(cc *compiled, r Resource, ents types.EntityMap) types.EntityUID {
	uid := types.NewEntityUID(types.EntityType(r.Type), types.String(r.ID()))
	attrs := types.RecordMap{"name": types.String(r.Name)}
	for k, v := range r.Attrs {
		if cv, err := toValue(v); err == nil {
			attrs[types.String(k)] = cv
		}
	}
	var parents []types.EntityUID
	cluster := types.NewEntityUID(TypeCluster, ClusterName)
	switch r.Type {
	case TypeCluster:
		// no parents
	case TypeNamespace:
		if len(r.Attrs) == 0 {
			ents[uid] = namespaceEntity(cc, r.Name)
			return uid
		}
		attrs["namespace"] = uid
		attrs["viewers"] = roleUID(r.Name, state.RoleViewer)
		attrs["deployers"] = roleUID(r.Name, state.RoleDeployer)
		attrs["admins"] = roleUID(r.Name, state.RoleAdmin)
		parents = append(parents, cluster)
	case TypeUser, TypeRestriction:
		parents = append(parents, cluster)
	default:
		ns := namespaceEntity(cc, r.Namespace)
		attrs["namespace"] = ns.UID
		parents = append(parents, ns.UID)
		if _, ok := ents[ns.UID]; !ok {
			ents[ns.UID] = ns
		}
	}
	if _, ok := ents[uid]; !ok { // a principal acting on itself keeps its roles
		ents[uid] = types.Entity{UID: uid, Parents: types.NewEntityUIDSet(parents...), Attributes: types.NewRecord(attrs)}
	}
	return uid
}

func toRecord(m map[string]any) (types.Record, error) {
	rm := make(types.RecordMap, len(m))
	for k, v := range m {
		cv, err := toValue(v)
		if err != nil {
			return types.Record{}, fmt.Errorf("iam: context %q: %w", k, err)
		}
		rm[types.String(k)] = cv
	}
	return types.NewRecord(rm), nil
}

func toValue(v any) (types.Value, error) {
	switch x := v.(type) {
	case string:
		return types.String(x), nil
	case bool:
		return types.Boolean(x), nil
	case int:
		return types.Long(x), nil
	case int64:
		return types.Long(x), nil
	case []string:
		vals := make([]types.Value, len(x))
		for i, s := range x {
			vals[i] = types.String(s)
		}
		return types.NewSet(vals...), nil
	case types.EntityUID:
		return x, nil
	}
	return nil, fmt.Errorf("unsupported value %T", v)
}

// requestEntities layers one request's entities over the static ones.
type requestEntities struct {
	base, own types.EntityMap
}

func (r requestEntities) Get(uid types.EntityUID) (types.Entity, bool) {
	if e, ok := r.own[uid]; ok {
		return e, true
	}
	e, ok := r.base[uid]
	return e, ok
}

// policySet iterates the roles, then the Restrictions of one action.
type policySet struct {
	roles, restrictions []policyEntry
}

func (s policySet) All() iter.Seq2[cedar.PolicyID, *cedar.Policy] {
	return func(yield func(cedar.PolicyID, *cedar.Policy) bool) {
		for _, list := range [][]policyEntry{s.roles, s.restrictions} {
			for _, e := range list {
				if !yield(cedar.PolicyID(e.id), e.p) {
					return
				}
			}
		}
	}
}

var _ Driver = (*Cedar)(nil)
