package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

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

// LogOptions select an Agent's log.
type LogOptions struct {
	Container string // gateway (default) or harness
	Tail      int    // last lines (0: all)
	Revision  string // id or number; empty: the active, else the newest
}

// Logs reads the Agent's supervisor log as text; the caller closes it.
func (c *Client) Logs(ctx context.Context, ns, agent string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	if o.Tail > 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Revision != "" {
		q.Set("revision", o.Revision)
	}
	resp, err := c.send(ctx, http.MethodGet, agentPath(ns, agent)+"/logs", q, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
