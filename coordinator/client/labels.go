package client

import (
	"context"
	"net/http"
	"net/url"

	"oce.dev/oce/coordinator/api/wire"
)

// Labels: creates that carry them, PUT …/labels that replaces them, and
// the lists filtered by a label selector (docs/API.md).

// selectorQuery is the query of a list filtered by sel ("" lists all).
func selectorQuery(sel string) url.Values {
	if sel == "" {
		return nil
	}
	return url.Values{wire.LabelSelectorParam: {sel}}
}

// CreateNamespaceWith creates a Namespace from a full request (labels).
func (c *Client) CreateNamespaceWith(ctx context.Context, req wire.CreateNamespace) (wire.Namespace, error) {
	var out wire.Namespace
	err := c.do(ctx, http.MethodPost, "/v1/namespaces", nil, req, &out)
	return out, err
}

// CreateConfigurationWith saves a new Configuration from a full request
// (labels).
func (c *Client) CreateConfigurationWith(ctx context.Context, ns string, req wire.CreateConfiguration) (wire.Configuration, error) {
	var out wire.Configuration
	err := c.do(ctx, http.MethodPost, nsPath(ns)+"/configurations", nil, req, &out)
	return out, err
}

// NamespacesSelected lists the Namespaces whose labels match sel.
func (c *Client) NamespacesSelected(ctx context.Context, sel string) ([]wire.Namespace, error) {
	var out wire.List[wire.Namespace]
	err := c.do(ctx, http.MethodGet, "/v1/namespaces", selectorQuery(sel), nil, &out)
	return out.Items, err
}

// ConfigurationsSelected lists a Namespace's Configurations whose labels
// match sel.
func (c *Client) ConfigurationsSelected(ctx context.Context, ns, sel string) ([]wire.Configuration, error) {
	var out wire.List[wire.Configuration]
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/configurations", selectorQuery(sel), nil, &out)
	return out.Items, err
}

// AgentsSelected lists a Namespace's Agents whose labels match sel.
func (c *Client) AgentsSelected(ctx context.Context, ns, sel string) ([]wire.Agent, error) {
	var out wire.List[wire.Agent]
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/agents", selectorQuery(sel), nil, &out)
	return out.Items, err
}

// RoleBindingsSelected lists the role bindings whose labels match sel.
func (c *Client) RoleBindingsSelected(ctx context.Context, sel string) ([]wire.RoleBinding, error) {
	var out wire.List[wire.RoleBinding]
	err := c.do(ctx, http.MethodGet, "/v1/rolebindings", selectorQuery(sel), nil, &out)
	return out.Items, err
}

// SetNamespaceLabels replaces a Namespace's labels.
func (c *Client) SetNamespaceLabels(ctx context.Context, ns string, labels map[string]string) (wire.Namespace, error) {
	var out wire.Namespace
	err := c.do(ctx, http.MethodPut, nsPath(ns)+"/labels", nil, wire.PutLabels{Labels: labels}, &out)
	return out, err
}

// SetConfigurationLabels replaces a Configuration's labels (its generation
// stays).
func (c *Client) SetConfigurationLabels(ctx context.Context, ns, cfg string, labels map[string]string) (wire.Configuration, error) {
	var out wire.Configuration
	err := c.do(ctx, http.MethodPut, nsPath(ns)+"/configurations/"+esc(cfg)+"/labels", nil, wire.PutLabels{Labels: labels}, &out)
	return out, err
}

// SetAgentLabels replaces an Agent's labels.
func (c *Client) SetAgentLabels(ctx context.Context, ns, agent string, labels map[string]string) (wire.Agent, error) {
	var out wire.Agent
	err := c.do(ctx, http.MethodPut, agentPath(ns, agent)+"/labels", nil, wire.PutLabels{Labels: labels}, &out)
	return out, err
}

// SetRoleBindingLabels replaces a role binding's labels.
func (c *Client) SetRoleBindingLabels(ctx context.Context, id string, labels map[string]string) (wire.RoleBinding, error) {
	var out wire.RoleBinding
	err := c.do(ctx, http.MethodPut, "/v1/rolebindings/"+esc(id)+"/labels", nil, wire.PutLabels{Labels: labels}, &out)
	return out, err
}
