package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one kind of API access the driver makes.
type Permission struct {
	Verb, Group, Resource, Subresource string
}

// String renders "verb group/resource[/subresource]".
func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r = p.Group + "/" + r
	}
	return p.Verb + " " + r
}

// Permissions is every access the driver makes, cluster-wide: it creates the
// namespaces it works in (names of its own derivation), so a ClusterRole
// grants them (images/deploy/rbac.yaml). TestPermissionsAreExactlyWhatTheDriverCalls
// keeps this list equal to what a recording client sees the driver do.
var Permissions = expand(map[string][]string{
	"namespaces":                        {"get", "create", "delete"},
	"pods":                              {"get", "list"},
	"events":                            {"list"}, // kubelet's readiness Events carry a held startup failure
	"secrets":                           {"get", "list", "create", "update", "delete"},
	"services":                          {"get", "list", "create", "update", "delete"},
	"configmaps":                        {"get", "list", "create", "delete"},
	"serviceaccounts":                   {"get", "list", "create", "delete"},
	"persistentvolumeclaims":            {"get", "list", "create", "delete"},
	"apps/deployments":                  {"get", "list", "create", "update", "delete"},
	"networking.k8s.io/networkpolicies": {"get", "list", "create", "delete"},
})

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
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ErrMissingPermission: the driver's identity lacks permissions it needs.
var ErrMissingPermission = errors.New("kubernetes: the driver's service account lacks permissions")

// CodeMissingPermission is the closed code of a start refused for missing
// permissions.
const CodeMissingPermission = "MISSING_PERMISSION"

// CheckPermissions asks the API server, with one SelfSubjectAccessReview per
// Permission, whether the client's identity may do what the driver does;
// the error names every access that is denied.
func CheckPermissions(ctx context.Context, c kubernetes.Interface) error {
	var denied []string
	for _, p := range Permissions {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: access review for %s: %w", p, err)
		}
		if !r.Status.Allowed {
			denied = append(denied, p.String())
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("%w: %s", ErrMissingPermission, strings.Join(denied, ", "))
	}
	return nil
}
