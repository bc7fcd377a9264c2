package state

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Identities and authorization data (issue 17): users, service principals,
// API tokens (stored only as a SHA-256 hash), role bindings and operator
// Restrictions (Cedar forbid policies). They replicate like every other
// resource; the snapshot carries them in their own section.

// Principal kinds a token or role binding names.
const (
	PrincipalUser             = "user"
	PrincipalServicePrincipal = "servicePrincipal"
	// SubjectGroup is a role binding subject that is a group of users.
	SubjectGroup = "group"
)

// Built-in roles. Viewer, deployer and admin are granted per Namespace;
// cluster-admin and metrics-reader are cluster-wide. A metrics-reader may
// read /metrics and nothing else: the identity a Prometheus scrape uses.
const (
	RoleViewer        = "viewer"
	RoleDeployer      = "deployer"
	RoleAdmin         = "admin"
	RoleClusterAdmin  = "cluster-admin"
	RoleMetricsReader = "metrics-reader"
)

// User is a local user; its tokens are minted by the coordinator. Users
// authenticated by an OIDC issuer need no record.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Groups    []string  `json:"groups,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// ServicePrincipal is a non-human identity of a Namespace: the stable
// identity an Agent's revisions freeze (AgentID names the Agent that owns
// it), or an automation account holding tokens.
type ServicePrincipal struct {
	ID          string    `json:"id"`
	NamespaceID string    `json:"namespaceId"`
	Name        string    `json:"name"`
	AgentID     string    `json:"agentId,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Token is an API token's record. Hash is the hex SHA-256 of the whole
// token; the token itself is shown once, when minted, and never stored.
type Token struct {
	ID            string    `json:"id"`
	Name          string    `json:"name,omitempty"`
	PrincipalKind string    `json:"principalKind"`
	PrincipalID   string    `json:"principalId"`
	Hash          string    `json:"hash"`
	CreatedAt     time.Time `json:"createdAt"`
	ExpiresAt     time.Time `json:"expiresAt"`
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
	CreatedBy     string    `json:"createdBy,omitempty"`
}

// Usable reports whether the token authenticates at time now.
func (t Token) Usable(now time.Time) bool {
	return t.RevokedAt.IsZero() && now.Before(t.ExpiresAt)
}

// RoleBinding grants Role to a subject: a user (by name), a group (by
// name) or a service principal (by ID). NamespaceID is empty exactly for
// cluster-admin.
type RoleBinding struct {
	ID          string    `json:"id"`
	Role        string    `json:"role"`
	NamespaceID string    `json:"namespaceId,omitempty"`
	SubjectKind string    `json:"subjectKind"`
	Subject     string    `json:"subject"`
	CreatedAt   time.Time `json:"createdAt"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	// Labels are the binding's labels (labels.go).
	Labels map[string]string `json:"labels,omitempty"`
}

// Restriction is an operator's Cedar policy text of forbid policies; the API
// validates it against the schema before it is proposed.
type Restriction struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Policy    string    `json:"policy"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
}

// CreateUser creates a local user.
type CreateUser struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
}

// DeleteUser removes a user with its tokens and the role bindings naming it.
type DeleteUser struct {
	UserID string `json:"userId"`
}

// CreateServicePrincipal creates a standalone service principal.
type CreateServicePrincipal struct {
	ID          string `json:"id"`
	NamespaceID string `json:"namespaceId"`
	Name        string `json:"name"`
}

// DeleteServicePrincipal removes a service principal no Agent uses, with its
// tokens and role bindings.
type DeleteServicePrincipal struct {
	ServicePrincipalID string `json:"servicePrincipalId"`
}

// CreateToken records a minted token. Replaces, when set, names a token of
// the same principal that is revoked in the same entry (rotation).
type CreateToken struct {
	ID            string    `json:"id"`
	Name          string    `json:"name,omitempty"`
	PrincipalKind string    `json:"principalKind"`
	PrincipalID   string    `json:"principalId"`
	Hash          string    `json:"hash"`
	ExpiresAt     time.Time `json:"expiresAt"`
	Replaces      string    `json:"replaces,omitempty"`
}

// RevokeToken revokes a token; revoking a revoked token is ErrConflict.
type RevokeToken struct {
	TokenID string `json:"tokenId"`
}

// CreateRoleBinding grants a role.
type CreateRoleBinding struct {
	ID          string `json:"id"`
	Role        string `json:"role"`
	NamespaceID string `json:"namespaceId,omitempty"`
	SubjectKind string `json:"subjectKind"`
	Subject     string `json:"subject"`
	// Labels are the new binding's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// DeleteRoleBinding removes a role binding.
type DeleteRoleBinding struct {
	BindingID string `json:"bindingId"`
}

// PutRestriction creates (ID new) or replaces (ID existing) a Restriction.
type PutRestriction struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Policy string `json:"policy"`
}

// DeleteRestriction removes a Restriction.
type DeleteRestriction struct {
	RestrictionID string `json:"restrictionId"`
}

// RecordAudit appends one audit record for something that changes no other
// replicated state: a denied mutation, a cluster membership change.
type RecordAudit struct {
	Action      string            `json:"action"`
	Resource    string            `json:"resource"`
	NamespaceID string            `json:"namespaceId,omitempty"`
	AgentID     string            `json:"agentId,omitempty"`
	Outcome     string            `json:"outcome"`
	Details     map[string]string `json:"details,omitempty"`
}

// Audit outcomes.
const (
	OutcomeSuccess = "success"
	OutcomeDenied  = "denied"
	OutcomeFailure = "failure"
)

// Bounds of identity data.
const (
	MaxGroups          = 64
	MaxRestrictionText = 64 << 10
	// MaxTokenLifetime bounds a token's expiry (one year).
	MaxTokenLifetime = 366 * 24 * time.Hour
	// MaxUsableTokens bounds the tokens one principal holds that still
	// authenticate; a mint beyond it is ErrConflict (revoke one first).
	MaxUsableTokens = 50
	// MaxTokenRecords bounds the token records one principal keeps: a mint
	// at the bound forgets the principal's oldest revoked or expired
	// records first, so minting and revoking in a loop stays bounded.
	MaxTokenRecords = 2 * MaxUsableTokens
	// MaxTokenName bounds a token's name.
	MaxTokenName = 128
)

var (
	identName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	groupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9@._:/-]{0,254}$`)
	hexHash   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	roles     = map[string]bool{RoleViewer: true, RoleDeployer: true, RoleAdmin: true, RoleClusterAdmin: true,
		RoleMetricsReader: true}
	clusterRoles = map[string]bool{RoleClusterAdmin: true, RoleMetricsReader: true}
)

// changesIdentities lists the commands after which IdentityGeneration moves
// (the credential sources' too: the deploy decisions read them).
var changesIdentities = nameSet(CmdCreateUser, CmdDeleteUser, CmdCreateServicePrincipal,
	CmdDeleteServicePrincipal, CmdCreateToken, CmdRevokeToken, CmdCreateRoleBinding,
	CmdDeleteRoleBinding, CmdPutRestriction, CmdDeleteRestriction, CmdCreateAgent,
	CmdCompleteDeletion, CmdCreateNamespace, CmdCreateCredentialSource, CmdRotateCredentialSource,
	CmdWithdrawCredentialSource)

// ValidRole reports whether r is a built-in role.
func ValidRole(r string) bool { return roles[r] }

// ClusterRole reports whether r is granted cluster-wide (a binding names
// no Namespace) rather than within one Namespace.
func ClusterRole(r string) bool { return clusterRoles[r] }

// ValidGroupName reports whether g is a usable group (or external user) name.
func ValidGroupName(g string) bool { return groupName.MatchString(g) }

// ids is the identity part of data.
type ids struct {
	users        map[string]User
	userByName   map[string]string
	sps          map[string]ServicePrincipal
	spByName     map[nameKey]string
	tokens       map[string]Token
	bindings     map[string]RoleBinding
	restrictions map[string]Restriction

	// Token indexes (derived; rebuilt on restore), so minting checks a
	// hash and counts a principal's tokens without a scan of every token.
	tokenByHash map[string]string                    // hash → token ID
	tokensOf    map[principalKey]map[string]struct{} // principal → its token IDs
}

// principalKey names a token's principal.
type principalKey struct{ kind, id string }

func newIDs() ids {
	return ids{users: map[string]User{}, userByName: map[string]string{}, sps: map[string]ServicePrincipal{},
		spByName: map[nameKey]string{}, tokens: map[string]Token{}, bindings: map[string]RoleBinding{},
		restrictions: map[string]Restriction{}, tokenByHash: map[string]string{},
		tokensOf: map[principalKey]map[string]struct{}{}}
}

// putToken stores a token and indexes it.
func (x *ids) putToken(t Token) {
	x.tokens[t.ID] = t
	x.tokenByHash[t.Hash] = t.ID
	k := principalKey{t.PrincipalKind, t.PrincipalID}
	set := x.tokensOf[k]
	if set == nil {
		set = map[string]struct{}{}
		x.tokensOf[k] = set
	}
	set[t.ID] = struct{}{}
}

// dropToken forgets a token and its index entries.
func (x *ids) dropToken(t Token) {
	delete(x.tokens, t.ID)
	delete(x.tokenByHash, t.Hash)
	k := principalKey{t.PrincipalKind, t.PrincipalID}
	if set := x.tokensOf[k]; set != nil {
		delete(set, t.ID)
		if len(set) == 0 {
			delete(x.tokensOf, k)
		}
	}
}

// tokensOfPrincipal returns a principal's tokens by creation (then ID).
func (x *ids) tokensOfPrincipal(kind, id string) []Token {
	set := x.tokensOf[principalKey{kind, id}]
	out := make([]Token, 0, len(set))
	for tid := range set {
		out = append(out, x.tokens[tid])
	}
	slices.SortFunc(out, func(a, b Token) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// makeRoomForToken enforces the per-principal bounds before a mint at now
// that replaces (revokes) replaces: it refuses a mint beyond
// MaxUsableTokens and, at MaxTokenRecords, forgets the principal's oldest
// unusable records.
func (x *ids) makeRoomForToken(kind, id, replaces string, now time.Time) error {
	held := x.tokensOfPrincipal(kind, id)
	usable := 0
	for _, t := range held {
		if t.Usable(now) && t.ID != replaces {
			usable++
		}
	}
	if usable >= MaxUsableTokens {
		return fmt.Errorf("%w: %s %q holds %d usable tokens, the most one principal may: revoke one first", ErrConflict, kind, id, usable)
	}
	for _, t := range held {
		if len(x.tokensOf[principalKey{kind, id}]) < MaxTokenRecords {
			break
		}
		if !t.Usable(now) {
			x.dropToken(t)
		}
	}
	return nil
}

func validGroups(gs []string) error {
	if len(gs) > MaxGroups {
		return fmt.Errorf("%w: at most %d groups", ErrInvalid, MaxGroups)
	}
	seen := map[string]bool{}
	for _, g := range gs {
		if !groupName.MatchString(g) || seen[g] {
			return fmt.Errorf("%w: group %q is malformed or repeated", ErrInvalid, g)
		}
		seen[g] = true
	}
	return nil
}

func applyCreateUser(d *data, c Command, p CreateUser) (User, error) {
	if p.ID == "" || !identName.MatchString(p.Name) {
		return User{}, fmt.Errorf("%w: id and a DNS-label name are required", ErrInvalid)
	}
	if err := validGroups(p.Groups); err != nil {
		return User{}, err
	}
	if _, ok := d.ids.users[p.ID]; ok {
		return User{}, fmt.Errorf("%w: user %q exists", ErrConflict, p.ID)
	}
	if _, ok := d.ids.userByName[p.Name]; ok {
		return User{}, fmt.Errorf("%w: user name %q is taken", ErrConflict, p.Name)
	}
	u := User{ID: p.ID, Name: p.Name, Groups: cloneStrings(p.Groups), CreatedAt: c.Time}
	d.ids.putUser(u)
	d.audit3(c, "oce.users.create", UserResource(u.Name), "", "", nil)
	return cloneUser(u), nil
}

func (x *ids) putUser(u User) {
	x.users[u.ID] = u
	x.userByName[u.Name] = u.ID
}

func applyDeleteUser(d *data, c Command, p DeleteUser) (User, error) {
	u, ok := d.ids.users[p.UserID]
	if !ok {
		return User{}, fmt.Errorf("%w: user %q", ErrNotFound, p.UserID)
	}
	delete(d.ids.users, u.ID)
	delete(d.ids.userByName, u.Name)
	d.ids.dropPrincipal(PrincipalUser, u.ID, u.Name)
	d.audit3(c, "oce.users.delete", UserResource(u.Name), "", "", nil)
	return cloneUser(u), nil
}

// dropPrincipal deletes a principal's tokens and the role bindings naming it.
func (x *ids) dropPrincipal(kind, id, name string) {
	for _, t := range x.tokensOfPrincipal(kind, id) {
		x.dropToken(t)
	}
	subject := id
	if kind == PrincipalUser {
		subject = name
	}
	for bid, b := range x.bindings {
		if b.SubjectKind == kind && b.Subject == subject {
			delete(x.bindings, bid)
		}
	}
}

func applyCreateServicePrincipal(d *data, c Command, p CreateServicePrincipal) (ServicePrincipal, error) {
	sp, err := d.newServicePrincipal(c, p.ID, p.NamespaceID, p.Name, "")
	if err != nil {
		return ServicePrincipal{}, err
	}
	d.audit3(c, "oce.serviceprincipals.create", d.spResource(sp), sp.NamespaceID, "", nil)
	return sp, nil
}

// newServicePrincipal validates and stores a service principal.
func (d *data) newServicePrincipal(c Command, id, nsID, name, agentID string) (ServicePrincipal, error) {
	if id == "" || nsID == "" || !identName.MatchString(name) {
		return ServicePrincipal{}, fmt.Errorf("%w: service principal id, namespaceId and a DNS-label name are required", ErrInvalid)
	}
	if _, ok := d.namespaces[nsID]; !ok {
		return ServicePrincipal{}, fmt.Errorf("%w: namespace %q", ErrNotFound, nsID)
	}
	if _, ok := d.ids.sps[id]; ok {
		return ServicePrincipal{}, fmt.Errorf("%w: service principal %q exists", ErrConflict, id)
	}
	if _, ok := d.ids.spByName[nameKey{nsID, name}]; ok {
		return ServicePrincipal{}, fmt.Errorf("%w: service principal name %q is taken", ErrConflict, name)
	}
	sp := ServicePrincipal{ID: id, NamespaceID: nsID, Name: name, AgentID: agentID, CreatedAt: c.Time}
	d.ids.putSP(sp)
	return sp, nil
}

func (x *ids) putSP(sp ServicePrincipal) {
	x.sps[sp.ID] = sp
	x.spByName[nameKey{sp.NamespaceID, sp.Name}] = sp.ID
}

func (x *ids) removeSP(sp ServicePrincipal) {
	delete(x.sps, sp.ID)
	delete(x.spByName, nameKey{sp.NamespaceID, sp.Name})
	x.dropPrincipal(PrincipalServicePrincipal, sp.ID, sp.Name)
}

func applyDeleteServicePrincipal(d *data, c Command, p DeleteServicePrincipal) (ServicePrincipal, error) {
	sp, ok := d.ids.sps[p.ServicePrincipalID]
	if !ok {
		return ServicePrincipal{}, fmt.Errorf("%w: service principal %q", ErrNotFound, p.ServicePrincipalID)
	}
	for id := range d.nsAgents[sp.NamespaceID] {
		if d.agents[id].ServicePrincipalID == sp.ID {
			return ServicePrincipal{}, fmt.Errorf("%w: agent %q uses service principal %q", ErrConflict, d.agents[id].Name, sp.Name)
		}
	}
	d.ids.removeSP(sp)
	d.audit3(c, "oce.serviceprincipals.delete", d.spResource(sp), sp.NamespaceID, "", nil)
	return sp, nil
}

// principalExists reports whether kind/id names a user or service principal.
func (d *data) principalResource(kind, id string) (string, string, bool) {
	switch kind {
	case PrincipalUser:
		u, ok := d.ids.users[id]
		return UserResource(u.Name), "", ok
	case PrincipalServicePrincipal:
		sp, ok := d.ids.sps[id]
		return d.spResource(sp), sp.NamespaceID, ok
	}
	return "", "", false
}

func applyCreateToken(d *data, c Command, p CreateToken) (Token, error) {
	if p.ID == "" || !hexHash.MatchString(p.Hash) {
		return Token{}, fmt.Errorf("%w: token id and a hex SHA-256 hash are required", ErrInvalid)
	}
	if len(p.Name) > MaxTokenName || strings.ContainsAny(p.Name, "\r\n\t") {
		return Token{}, fmt.Errorf("%w: token name is too long or has control characters", ErrInvalid)
	}
	exp := utc(p.ExpiresAt)
	if !exp.After(c.Time) || exp.Sub(c.Time) > MaxTokenLifetime {
		return Token{}, fmt.Errorf("%w: token expiry must be after now and within %s", ErrInvalid, MaxTokenLifetime)
	}
	res, nsID, ok := d.principalResource(p.PrincipalKind, p.PrincipalID)
	if !ok {
		return Token{}, fmt.Errorf("%w: %s %q", ErrNotFound, p.PrincipalKind, p.PrincipalID)
	}
	if _, ok := d.ids.tokens[p.ID]; ok {
		return Token{}, fmt.Errorf("%w: token %q exists", ErrConflict, p.ID)
	}
	if _, ok := d.ids.tokenByHash[p.Hash]; ok {
		return Token{}, fmt.Errorf("%w: token hash is already recorded", ErrConflict)
	}
	var old Token
	if p.Replaces != "" {
		var ok bool
		old, ok = d.ids.tokens[p.Replaces]
		if !ok {
			return Token{}, fmt.Errorf("%w: token %q", ErrNotFound, p.Replaces)
		}
		if old.PrincipalKind != p.PrincipalKind || old.PrincipalID != p.PrincipalID || !old.RevokedAt.IsZero() {
			return Token{}, fmt.Errorf("%w: token %q is revoked or belongs to another principal", ErrConflict, p.Replaces)
		}
	}
	if err := d.ids.makeRoomForToken(p.PrincipalKind, p.PrincipalID, old.ID, c.Time); err != nil {
		return Token{}, err
	}
	t := Token{ID: p.ID, Name: p.Name, PrincipalKind: p.PrincipalKind, PrincipalID: p.PrincipalID, Hash: p.Hash,
		CreatedAt: c.Time, ExpiresAt: exp, CreatedBy: c.Actor}
	d.ids.putToken(t)
	details := map[string]string{"tokenId": t.ID}
	if old.ID != "" {
		old.RevokedAt = c.Time
		d.ids.tokens[old.ID] = old
		details["replaces"] = old.ID
	}
	d.audit3(c, "oce.tokens.create", res, nsID, "", details)
	return t, nil
}

func applyRevokeToken(d *data, c Command, p RevokeToken) (Token, error) {
	t, ok := d.ids.tokens[p.TokenID]
	if !ok {
		return Token{}, fmt.Errorf("%w: token %q", ErrNotFound, p.TokenID)
	}
	if !t.RevokedAt.IsZero() {
		return Token{}, fmt.Errorf("%w: token %q is already revoked", ErrConflict, t.ID)
	}
	t.RevokedAt = c.Time
	d.ids.tokens[t.ID] = t
	res, nsID, _ := d.principalResource(t.PrincipalKind, t.PrincipalID)
	d.audit3(c, "oce.tokens.revoke", res, nsID, "", map[string]string{"tokenId": t.ID})
	return t, nil
}

func applyCreateRoleBinding(d *data, c Command, p CreateRoleBinding) (RoleBinding, error) {
	if p.ID == "" || !roles[p.Role] {
		return RoleBinding{}, fmt.Errorf("%w: id and a built-in role are required", ErrInvalid)
	}
	if err := ValidateLabels(p.Labels); err != nil {
		return RoleBinding{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if clusterRoles[p.Role] != (p.NamespaceID == "") {
		return RoleBinding{}, fmt.Errorf("%w: cluster-admin and metrics-reader are granted without a namespace, every other role within one", ErrInvalid)
	}
	if p.NamespaceID != "" {
		if _, ok := d.namespaces[p.NamespaceID]; !ok {
			return RoleBinding{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.NamespaceID)
		}
	}
	switch p.SubjectKind {
	case PrincipalUser, SubjectGroup:
		if !groupName.MatchString(p.Subject) {
			return RoleBinding{}, fmt.Errorf("%w: subject %q", ErrInvalid, p.Subject)
		}
	case PrincipalServicePrincipal:
		if _, ok := d.ids.sps[p.Subject]; !ok {
			return RoleBinding{}, fmt.Errorf("%w: service principal %q", ErrNotFound, p.Subject)
		}
	default:
		return RoleBinding{}, fmt.Errorf("%w: subject kind %q", ErrInvalid, p.SubjectKind)
	}
	if _, ok := d.ids.bindings[p.ID]; ok {
		return RoleBinding{}, fmt.Errorf("%w: role binding %q exists", ErrConflict, p.ID)
	}
	for _, b := range d.ids.bindings {
		if b.Role == p.Role && b.NamespaceID == p.NamespaceID && b.SubjectKind == p.SubjectKind && b.Subject == p.Subject {
			return RoleBinding{}, fmt.Errorf("%w: the binding exists as %q", ErrConflict, b.ID)
		}
	}
	b := RoleBinding{ID: p.ID, Role: p.Role, NamespaceID: p.NamespaceID, SubjectKind: p.SubjectKind,
		Subject: p.Subject, CreatedAt: c.Time, CreatedBy: c.Actor, Labels: cloneLabels(p.Labels)}
	d.ids.bindings[b.ID] = b
	d.audit3(c, "oce.rolebindings.create", d.bindingResource(b), b.NamespaceID, "",
		map[string]string{"role": b.Role, "subject": b.SubjectKind + ":" + b.Subject})
	return b, nil
}

func applyDeleteRoleBinding(d *data, c Command, p DeleteRoleBinding) (RoleBinding, error) {
	b, ok := d.ids.bindings[p.BindingID]
	if !ok {
		return RoleBinding{}, fmt.Errorf("%w: role binding %q", ErrNotFound, p.BindingID)
	}
	delete(d.ids.bindings, b.ID)
	d.audit3(c, "oce.rolebindings.delete", d.bindingResource(b), b.NamespaceID, "",
		map[string]string{"role": b.Role, "subject": b.SubjectKind + ":" + b.Subject})
	return b, nil
}

func applyPutRestriction(d *data, c Command, p PutRestriction) (Restriction, error) {
	if p.ID == "" || !identName.MatchString(p.Name) || strings.TrimSpace(p.Policy) == "" || len(p.Policy) > MaxRestrictionText {
		return Restriction{}, fmt.Errorf("%w: id, a DNS-label name and a policy of at most %d bytes are required", ErrInvalid, MaxRestrictionText)
	}
	prev, exists := d.ids.restrictions[p.ID]
	for _, r := range d.ids.restrictions {
		if r.Name == p.Name && r.ID != p.ID {
			return Restriction{}, fmt.Errorf("%w: restriction name %q is taken", ErrConflict, p.Name)
		}
	}
	r := Restriction{ID: p.ID, Name: p.Name, Policy: p.Policy, CreatedAt: c.Time, UpdatedAt: c.Time, CreatedBy: c.Actor}
	action := "oce.restrictions.create"
	if exists {
		r.CreatedAt, r.CreatedBy = prev.CreatedAt, prev.CreatedBy
		action = "oce.restrictions.update"
	}
	d.ids.restrictions[r.ID] = r
	d.audit3(c, action, RestrictionResource(r.Name), "", "", nil)
	return r, nil
}

func applyDeleteRestriction(d *data, c Command, p DeleteRestriction) (Restriction, error) {
	r, ok := d.ids.restrictions[p.RestrictionID]
	if !ok {
		return Restriction{}, fmt.Errorf("%w: restriction %q", ErrNotFound, p.RestrictionID)
	}
	delete(d.ids.restrictions, r.ID)
	d.audit3(c, "oce.restrictions.delete", RestrictionResource(r.Name), "", "", nil)
	return r, nil
}

func applyRecordAudit(d *data, c Command, p RecordAudit) (AuditRecord, error) {
	if p.Action == "" || p.Resource == "" || (p.Outcome != OutcomeSuccess && p.Outcome != OutcomeDenied && p.Outcome != OutcomeFailure) {
		return AuditRecord{}, fmt.Errorf("%w: action, resource and an outcome are required", ErrInvalid)
	}
	if len(p.Details) > 8 {
		return AuditRecord{}, fmt.Errorf("%w: at most 8 details", ErrInvalid)
	}
	d.auditSeq++
	rec := boundAudit(AuditRecord{Seq: d.auditSeq, Time: c.Time, Action: p.Action, Actor: c.Actor, NamespaceID: p.NamespaceID,
		AgentID: p.AgentID, Details: cloneDetails(p.Details), Resource: p.Resource, Outcome: p.Outcome})
	d.audit = append(d.audit, rec)
	return cloneAudit(rec), nil
}

func cloneDetails(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// audit3 appends a successful mutation's record with its exact resource.
func (d *data) audit3(c Command, action, resource, nsID, agentID string, details map[string]string) {
	d.auditSeq++
	d.audit = append(d.audit, AuditRecord{Seq: d.auditSeq, Time: c.Time, Action: action, Actor: c.Actor,
		NamespaceID: nsID, AgentID: agentID, Details: details, Resource: resource, Outcome: OutcomeSuccess})
}

// Resource names as the audit log and the IAM driver spell them: Cedar
// entity UIDs of names (Namespace and resource names are immutable).

// UserResource is the resource name of a user.
func UserResource(name string) string { return `User::"` + name + `"` }

// RestrictionResource is the resource name of a Restriction.
func RestrictionResource(name string) string { return `Restriction::"` + name + `"` }

// ClusterResource is the one cluster-wide resource.
const ClusterResource = `Cluster::"oce"`

// NamespaceResource is the resource name of a Namespace.
func NamespaceResource(ns string) string { return `Namespace::"` + ns + `"` }

// ScopedResource is the resource name of a Namespace's typ named name.
func ScopedResource(typ, ns, name string) string { return typ + `::"` + ns + "/" + name + `"` }

func (d *data) nsName(id string) string { return d.namespaces[id].Name }

func (d *data) spResource(sp ServicePrincipal) string {
	return ScopedResource("ServicePrincipal", d.nsName(sp.NamespaceID), sp.Name)
}

func (d *data) bindingResource(b RoleBinding) string {
	if b.NamespaceID == "" {
		return ClusterResource
	}
	return NamespaceResource(d.nsName(b.NamespaceID))
}

func cloneUser(u User) User {
	u.Groups = cloneStrings(u.Groups)
	return u
}
