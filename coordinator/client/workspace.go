package client

import (
	"context"
	"net/http"

	"oce.dev/oce/coordinator/api/wire"
)

// Files lists the Agent's four workspace documents (no content) as its
// serving Gateway sees them now.
func (c *Client) Files(ctx context.Context, ns, agent string) (wire.WorkspaceFiles, error) {
	var out wire.WorkspaceFiles
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/files", nil, nil, &out)
	return out, err
}

// File reads one workspace document with its content and version.
func (c *Client) File(ctx context.Context, ns, agent, name string) (wire.WorkspaceFile, error) {
	var out wire.WorkspaceFile
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/files/"+esc(name), nil, nil, &out)
	return out, err
}

// PutFile writes one workspace document; the answer is the new version
// (no content). A stale req.Replaces is a RESOURCE_CONFLICT whose details
// carry the current version.
func (c *Client) PutFile(ctx context.Context, ns, agent, name string, req wire.PutWorkspaceFile) (wire.WorkspaceFile, error) {
	var out wire.WorkspaceFile
	err := c.do(ctx, http.MethodPut, agentPath(ns, agent)+"/files/"+esc(name), nil, req, &out)
	return out, err
}

// NamespaceOverview lists the Namespace's Agents with their derived state.
func (c *Client) NamespaceOverview(ctx context.Context, ns string) (wire.NamespaceOverview, error) {
	var out wire.NamespaceOverview
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/overview", nil, nil, &out)
	return out, err
}

// AgentOverview is one Agent with its state, revisions, work and audit.
func (c *Client) AgentOverview(ctx context.Context, ns, agent string) (wire.AgentDetail, error) {
	var out wire.AgentDetail
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/overview", nil, nil, &out)
	return out, err
}

// NamespaceAccess is what the caller may create in Namespace ns.
func (c *Client) NamespaceAccess(ctx context.Context, ns string) (wire.Access, error) {
	var out wire.Access
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/access", nil, nil, &out)
	return out, err
}

// AgentAccess is what the caller may do on the Agent, decided as the API
// decides the requests themselves.
func (c *Client) AgentAccess(ctx context.Context, ns, agent string) (wire.Access, error) {
	var out wire.Access
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/access", nil, nil, &out)
	return out, err
}
