package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/api/wire"
)

// AuditFilter selects audit records (zero fields match everything).
type AuditFilter struct {
	After int64
	// Before bounds the records to Seq < Before (0: no bound), the cursor
	// of newest-first pages.
	Before int64
	// Newest asks for the newest records, newest first (the API's
	// order=newest); the default is the oldest first.
	Newest    bool
	Limit     int
	Actor     string
	Namespace string
	Action    string
	Since     time.Time
	Until     time.Time
}

// AuditQuery lists the audit records the caller may view that match f.
func (c *Client) AuditQuery(ctx context.Context, f AuditFilter) ([]wire.AuditRecord, error) {
	q := url.Values{}
	if f.After > 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Before > 0 {
		q.Set("before", strconv.FormatInt(f.Before, 10))
	}
	if f.Newest {
		q.Set("order", "newest")
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	for k, v := range map[string]string{"actor": f.Actor, "namespace": f.Namespace, "action": f.Action} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	var out wire.List[wire.AuditRecord]
	err := c.do(ctx, http.MethodGet, "/v1/audit", q, nil, &out)
	return out.Items, err
}

// AuthConfig asks how to get a token (no token needed).
func (c *Client) AuthConfig(ctx context.Context) (wire.AuthConfig, error) {
	var out wire.AuthConfig
	err := c.do(ctx, http.MethodGet, "/v1/auth", nil, nil, &out)
	return out, err
}

// WhoAmI names the caller.
func (c *Client) WhoAmI(ctx context.Context) (wire.WhoAmI, error) {
	var out wire.WhoAmI
	err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, nil, &out)
	return out, err
}

// Users lists the local users the caller may manage.
func (c *Client) Users(ctx context.Context) ([]wire.User, error) {
	var out wire.List[wire.User]
	err := c.do(ctx, http.MethodGet, "/v1/users", nil, nil, &out)
	return out.Items, err
}

// CreateUser creates a local user.
func (c *Client) CreateUser(ctx context.Context, req wire.CreateUser) (wire.User, error) {
	var out wire.User
	err := c.do(ctx, http.MethodPost, "/v1/users", nil, req, &out)
	return out, err
}

// DeleteUser deletes a user with its tokens and role bindings.
func (c *Client) DeleteUser(ctx context.Context, name string) (wire.User, error) {
	var out wire.User
	err := c.do(ctx, http.MethodDelete, "/v1/users/"+esc(name), nil, nil, &out)
	return out, err
}

// ServicePrincipals lists a Namespace's service principals.
func (c *Client) ServicePrincipals(ctx context.Context, ns string) ([]wire.ServicePrincipal, error) {
	var out wire.List[wire.ServicePrincipal]
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/serviceprincipals", nil, nil, &out)
	return out.Items, err
}

// CreateServicePrincipal creates a service principal.
func (c *Client) CreateServicePrincipal(ctx context.Context, ns, name string) (wire.ServicePrincipal, error) {
	var out wire.ServicePrincipal
	err := c.do(ctx, http.MethodPost, nsPath(ns)+"/serviceprincipals", nil, wire.CreateServicePrincipal{Name: name}, &out)
	return out, err
}

// DeleteServicePrincipal deletes a service principal no Agent uses.
func (c *Client) DeleteServicePrincipal(ctx context.Context, ns, name string) (wire.ServicePrincipal, error) {
	var out wire.ServicePrincipal
	err := c.do(ctx, http.MethodDelete, nsPath(ns)+"/serviceprincipals/"+esc(name), nil, nil, &out)
	return out, err
}

// Tokens lists token records: of a user, of a service principal
// (<namespace>/<name>), or every one the caller may manage.
func (c *Client) Tokens(ctx context.Context, user, servicePrincipal string) ([]wire.Token, error) {
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	if servicePrincipal != "" {
		q.Set("servicePrincipal", servicePrincipal)
	}
	var out wire.List[wire.Token]
	err := c.do(ctx, http.MethodGet, "/v1/tokens", q, nil, &out)
	return out.Items, err
}

// CreateToken mints a token; the answer holds it this once.
func (c *Client) CreateToken(ctx context.Context, req wire.CreateToken) (wire.MintedToken, error) {
	var out wire.MintedToken
	err := c.do(ctx, http.MethodPost, "/v1/tokens", nil, req, &out)
	return out, err
}

// RevokeToken revokes a token.
func (c *Client) RevokeToken(ctx context.Context, id string) (wire.Token, error) {
	var out wire.Token
	err := c.do(ctx, http.MethodDelete, "/v1/tokens/"+esc(id), nil, nil, &out)
	return out, err
}

// RotateToken mints a successor of a token and revokes it.
func (c *Client) RotateToken(ctx context.Context, id, ttl string) (wire.MintedToken, error) {
	var out wire.MintedToken
	err := c.do(ctx, http.MethodPost, "/v1/tokens/"+esc(id)+"/rotate", nil, wire.RotateToken{TTL: ttl}, &out)
	return out, err
}

// RoleBindings lists the role bindings the caller may view.
func (c *Client) RoleBindings(ctx context.Context) ([]wire.RoleBinding, error) {
	var out wire.List[wire.RoleBinding]
	err := c.do(ctx, http.MethodGet, "/v1/rolebindings", nil, nil, &out)
	return out.Items, err
}

// CreateRoleBinding grants a role.
func (c *Client) CreateRoleBinding(ctx context.Context, req wire.CreateRoleBinding) (wire.RoleBinding, error) {
	var out wire.RoleBinding
	err := c.do(ctx, http.MethodPost, "/v1/rolebindings", nil, req, &out)
	return out, err
}

// DeleteRoleBinding removes a role binding.
func (c *Client) DeleteRoleBinding(ctx context.Context, id string) (wire.RoleBinding, error) {
	var out wire.RoleBinding
	err := c.do(ctx, http.MethodDelete, "/v1/rolebindings/"+esc(id), nil, nil, &out)
	return out, err
}

// Restrictions lists the Restrictions.
func (c *Client) Restrictions(ctx context.Context) ([]wire.Restriction, error) {
	var out wire.List[wire.Restriction]
	err := c.do(ctx, http.MethodGet, "/v1/restrictions", nil, nil, &out)
	return out.Items, err
}

// PutRestriction creates or replaces a Restriction.
func (c *Client) PutRestriction(ctx context.Context, name, policy string) (wire.Restriction, error) {
	var out wire.Restriction
	err := c.do(ctx, http.MethodPut, "/v1/restrictions/"+esc(name), nil, wire.PutRestriction{Policy: policy}, &out)
	return out, err
}

// DeleteRestriction removes a Restriction.
func (c *Client) DeleteRestriction(ctx context.Context, name string) (wire.Restriction, error) {
	var out wire.Restriction
	err := c.do(ctx, http.MethodDelete, "/v1/restrictions/"+esc(name), nil, nil, &out)
	return out, err
}
