package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one kind of API access the driver makes.
type Permission struct {
	Verb, Group, Resource, Subresource string
	// Name limits the access to one object (RBAC resourceNames); empty: any.
	Name string
}

// String renders "verb group/resource[/subresource][ name]".
func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r = p.Group + "/" + r
	}
	s := p.Verb + " " + r
	if p.Name != "" {
		s += " " + p.Name
	}
	return s
}

// The RBAC objects of least privilege (docs/kubernetes.md, "RBAC"): the
// driver binds NamespaceRole to its own identity in every namespace it
// manages, with a RoleBinding named NamespaceRoleBinding it creates right
// after the namespace.
const (
	// NamespaceRole is the ClusterRole (installed by the deploy bundle)
	// holding NamespacePermissions; only a RoleBinding inside a managed
	// namespace makes it effective there.
	NamespaceRole = "oce-coordinator-namespace"
	// NamespaceRoleBinding names the RoleBinding of NamespaceRole in each
	// managed namespace.
	NamespaceRoleBinding = "oce-coordinator"

	groupRBAC = rbacv1.GroupName
)

// ClusterPermissions are the driver's cluster-wide accesses, each one it
// cannot do otherwise (the deploy bundle's ClusterRole oce-coordinator, whose
// ValidatingAdmissionPolicy narrows them further to what oce manages):
//   - get, create and delete namespaces: it creates the namespaces it works
//     in (names of its own derivation), so no namespaced grant can exist
//     beforehand; it never updates or lists them;
//   - create rolebindings: the one RoleBinding that makes NamespaceRole
//     effective inside a namespace it just created;
//   - bind the ClusterRole NamespaceRole (by name): RBAC lets an identity
//     bind a role only if it holds the role's permissions already or may
//     bind it — bind keeps the driver from needing those permissions
//     cluster-wide;
//   - get the ClusterRole NamespaceRole (by name): the start-time check
//     reads it to tell whether it grants NamespacePermissions.
var ClusterPermissions = sorted([]Permission{
	{Verb: "get", Resource: "namespaces"},
	{Verb: "create", Resource: "namespaces"},
	{Verb: "delete", Resource: "namespaces"},
	{Verb: "create", Group: groupRBAC, Resource: "rolebindings"},
	{Verb: "bind", Group: groupRBAC, Resource: "clusterroles", Name: NamespaceRole},
	{Verb: "get", Group: groupRBAC, Resource: "clusterroles", Name: NamespaceRole},
})

// NamespacePermissions are the driver's accesses inside a managed namespace
// (data plane and Gateway namespaces): the ClusterRole NamespaceRole,
// effective only where the driver bound it.
// TestPermissionsAreExactlyWhatTheDriverCalls keeps both lists equal to what
// a recording client sees the driver do.
var NamespacePermissions = expand(map[string][]string{
	"pods":                              {"get", "list", "watch", "create", "delete"}, // create, delete: the probe Pod before cutover; watch: the observation cache
	"events":                            {"list"},                                     // kubelet's readiness Events carry a held startup failure
	"secrets":                           {"get", "list", "create", "update", "delete"},
	"services":                          {"get", "list", "watch", "create", "update", "delete"}, // watch: the repair cache
	"configmaps":                        {"get", "list", "watch", "create", "delete"},           // watch: the repair cache
	"serviceaccounts":                   {"get", "list", "create", "delete"},
	"persistentvolumeclaims":            {"get", "list", "create", "delete"},
	"resourcequotas":                    {"get", "create", "update", "delete"},                  // the oce Namespace's quota
	"limitranges":                       {"get", "create", "delete"},                            // constant: never updated
	"apps/deployments":                  {"get", "list", "watch", "create", "update", "delete"}, // watch: the observation cache
	"networking.k8s.io/networkpolicies": {"get", "list", "watch", "create", "delete"},           // watch: the repair cache
})

// Permissions is every access the driver needs: ClusterPermissions then
// NamespacePermissions.
var Permissions = append(append([]Permission{}, ClusterPermissions...), NamespacePermissions...)

// NamespaceRoleRules renders NamespacePermissions as RBAC rules, one per
// resource (what the deploy bundle's ClusterRole NamespaceRole holds).
func NamespaceRoleRules() []rbacv1.PolicyRule {
	byRes := map[[2]string][]string{}
	var keys [][2]string
	for _, p := range NamespacePermissions {
		k := [2]string{p.Group, p.Resource}
		if _, ok := byRes[k]; !ok {
			keys = append(keys, k)
		}
		byRes[k] = append(byRes[k], p.Verb)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	out := make([]rbacv1.PolicyRule, 0, len(keys))
	for _, k := range keys {
		sort.Strings(byRes[k])
		out = append(out, rbacv1.PolicyRule{APIGroups: []string{k[0]}, Resources: []string{k[1]}, Verbs: byRes[k]})
	}
	return out
}

// expand turns "group/resource" → verbs into Permissions.
func expand(m map[string][]string) []Permission {
	var out []Permission
	for gr, verbs := range m {
		g, r, ok := strings.Cut(gr, "/")
		if !ok {
			g, r = "", gr
		}
		for _, v := range verbs {
			out = append(out, Permission{Verb: v, Group: g, Resource: r})
		}
	}
	return sorted(out)
}

func sorted(ps []Permission) []Permission {
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
	return ps
}

// ErrMissingPermission: the driver's identity lacks permissions it needs.
var ErrMissingPermission = errors.New("kubernetes: the driver's service account lacks permissions")

// CodeMissingPermission is the closed code of a start refused for missing
// permissions.
const CodeMissingPermission = "MISSING_PERMISSION"

// CheckPermissions asks the API server whether the client's identity may do
// what the driver does: one SelfSubjectAccessReview per cluster-wide
// Permission, and the ClusterRole NamespaceRole read for what the driver
// binds in each managed namespace (no such namespace may exist yet). The
// error names every access that is denied.
func CheckPermissions(ctx context.Context, c kubernetes.Interface) error {
	var denied []string
	for _, p := range ClusterPermissions {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Name: p.Name}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: access review for %s: %w", p, err)
		}
		if !r.Status.Allowed {
			denied = append(denied, p.String())
		}
	}
	var rules []rbacv1.PolicyRule
	if role, err := c.RbacV1().ClusterRoles().Get(ctx, NamespaceRole, metav1.GetOptions{}); err == nil {
		rules = role.Rules
	}
	for _, p := range NamespacePermissions {
		if !covers(rules, p) {
			denied = append(denied, p.String()+" (ClusterRole "+NamespaceRole+")")
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("%w: %s", ErrMissingPermission, strings.Join(denied, ", "))
	}
	return nil
}

// covers reports whether one of rules grants p (wildcards included).
func covers(rules []rbacv1.PolicyRule, p Permission) bool {
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == v || x == rbacv1.VerbAll {
				return true
			}
		}
		return false
	}
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	for _, r := range rules {
		if has(r.Verbs, p.Verb) && has(r.APIGroups, p.Group) && has(r.Resources, res) &&
			(len(r.ResourceNames) == 0 || (p.Name != "" && has(r.ResourceNames, p.Name))) {
			return true
		}
	}
	return false
}

// Identity is the RBAC subject the client authenticates as (a
// SelfSubjectReview, which every authenticated identity may create): the
// driver binds NamespaceRole to it (Config.Subject). A service account is a
// ServiceAccount subject, anything else a User.
func Identity(ctx context.Context, c kubernetes.Interface) (rbacv1.Subject, error) {
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return rbacv1.Subject{}, fmt.Errorf("kubernetes: who am I: %w", err)
	}
	return SubjectOf(r.Status.UserInfo.Username)
}

// SubjectOf is the RBAC subject of an authenticated user name.
func SubjectOf(username string) (rbacv1.Subject, error) {
	if username == "" {
		return rbacv1.Subject{}, errors.New("kubernetes: the API server names no user")
	}
	if rest, ok := strings.CutPrefix(username, "system:serviceaccount:"); ok {
		ns, name, ok := strings.Cut(rest, ":")
		if !ok || ns == "" || name == "" {
			return rbacv1.Subject{}, fmt.Errorf("kubernetes: malformed service account user %q", username)
		}
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}, nil
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: groupRBAC, Name: username}, nil
}
