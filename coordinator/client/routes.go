package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"oce.dev/oce/coordinator/api/wire"
)

// CreateNamespace creates a Namespace.
func (c *Client) CreateNamespace(ctx context.Context, name string) (wire.Namespace, error) {
	var out wire.Namespace
	err := c.do(ctx, http.MethodPost, "/v1/namespaces", nil, wire.CreateNamespace{Name: name}, &out)
	return out, err
}

// Namespaces lists every Namespace.
func (c *Client) Namespaces(ctx context.Context) ([]wire.Namespace, error) {
	var out wire.List[wire.Namespace]
	err := c.do(ctx, http.MethodGet, "/v1/namespaces", nil, nil, &out)
	return out.Items, err
}

// Namespace gets one Namespace by id or name.
func (c *Client) Namespace(ctx context.Context, ns string) (wire.Namespace, error) {
	var out wire.Namespace
	err := c.do(ctx, http.MethodGet, "/v1/namespaces/"+esc(ns), nil, nil, &out)
	return out, err
}

// SetNamespaceQuota sets a Namespace's quota (all zero: removes it).
func (c *Client) SetNamespaceQuota(ctx context.Context, ns string, q wire.NamespaceQuota) (wire.Namespace, error) {
	var out wire.Namespace
	err := c.do(ctx, http.MethodPut, nsPath(ns)+"/quota", nil, q, &out)
	return out, err
}

// DeleteNamespace removes an empty Namespace (RESOURCE_CONFLICT while it
// holds Agents or Configurations).
func (c *Client) DeleteNamespace(ctx context.Context, ns string) (wire.Namespace, error) {
	var out wire.Namespace
	err := c.do(ctx, http.MethodDelete, nsPath(ns), nil, nil, &out)
	return out, err
}

// DeleteConfiguration removes a Configuration no Agent uses.
func (c *Client) DeleteConfiguration(ctx context.Context, ns, cfg string) (wire.Configuration, error) {
	var out wire.Configuration
	err := c.do(ctx, http.MethodDelete, nsPath(ns)+"/configurations/"+esc(cfg), nil, nil, &out)
	return out, err
}

func nsPath(ns string) string { return "/v1/namespaces/" + esc(ns) }

func agentPath(ns, agent string) string { return nsPath(ns) + "/agents/" + esc(agent) }

// CreateConfiguration saves a new Configuration (generation 1).
func (c *Client) CreateConfiguration(ctx context.Context, ns, name string, doc json.RawMessage) (wire.Configuration, error) {
	var out wire.Configuration
	err := c.do(ctx, http.MethodPost, nsPath(ns)+"/configurations", nil, wire.CreateConfiguration{Name: name, Document: doc}, &out)
	return out, err
}

// UpdateConfiguration replaces a Configuration's document (next generation).
func (c *Client) UpdateConfiguration(ctx context.Context, ns, cfg string, doc json.RawMessage) (wire.Configuration, error) {
	var out wire.Configuration
	err := c.do(ctx, http.MethodPut, nsPath(ns)+"/configurations/"+esc(cfg), nil, wire.UpdateConfiguration{Document: doc}, &out)
	return out, err
}

// Configuration gets one Configuration by id or name.
func (c *Client) Configuration(ctx context.Context, ns, cfg string) (wire.Configuration, error) {
	var out wire.Configuration
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/configurations/"+esc(cfg), nil, nil, &out)
	return out, err
}

// Configurations lists a Namespace's Configurations.
func (c *Client) Configurations(ctx context.Context, ns string) ([]wire.Configuration, error) {
	var out wire.List[wire.Configuration]
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/configurations", nil, nil, &out)
	return out.Items, err
}

// CreateAgent creates an Agent.
func (c *Client) CreateAgent(ctx context.Context, ns string, req wire.CreateAgent) (wire.Agent, error) {
	var out wire.Agent
	err := c.do(ctx, http.MethodPost, nsPath(ns)+"/agents", nil, req, &out)
	return out, err
}

// UpdateAgent patches an Agent; nil fields keep their values.
func (c *Client) UpdateAgent(ctx context.Context, ns, agent string, req wire.UpdateAgent) (wire.Agent, error) {
	var out wire.Agent
	err := c.do(ctx, http.MethodPatch, agentPath(ns, agent), nil, req, &out)
	return out, err
}

// Agent gets one Agent by id or name.
func (c *Client) Agent(ctx context.Context, ns, agent string) (wire.Agent, error) {
	var out wire.Agent
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent), nil, nil, &out)
	return out, err
}

// Agents lists a Namespace's Agents.
func (c *Client) Agents(ctx context.Context, ns string) ([]wire.Agent, error) {
	var out wire.List[wire.Agent]
	err := c.do(ctx, http.MethodGet, nsPath(ns)+"/agents", nil, nil, &out)
	return out.Items, err
}

// DeleteAgent requests the Agent's deletion and returns the delete work.
func (c *Client) DeleteAgent(ctx context.Context, ns, agent string) (wire.Work, error) {
	var out wire.Work
	err := c.do(ctx, http.MethodDelete, agentPath(ns, agent), nil, nil, &out)
	return out, err
}

// StopAgent requests the Agent's stop and returns the stop work.
func (c *Client) StopAgent(ctx context.Context, ns, agent string) (wire.Work, error) {
	var out wire.Work
	err := c.do(ctx, http.MethodPost, agentPath(ns, agent)+"/stop", nil, nil, &out)
	return out, err
}

// Deploy admits a new revision of the Agent and enqueues its activation.
func (c *Client) Deploy(ctx context.Context, ns, agent string, req wire.Deploy) (wire.DeployResult, error) {
	var out wire.DeployResult
	err := c.do(ctx, http.MethodPost, agentPath(ns, agent)+"/deploy", nil, req, &out)
	return out, err
}

// Revisions lists the Agent's revisions.
func (c *Client) Revisions(ctx context.Context, ns, agent string) ([]wire.Revision, error) {
	var out wire.List[wire.Revision]
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/revisions", nil, nil, &out)
	return out.Items, err
}

// Revision gets one revision by id or number.
func (c *Client) Revision(ctx context.Context, ns, agent, rev string) (wire.Revision, error) {
	var out wire.Revision
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/revisions/"+esc(rev), nil, nil, &out)
	return out, err
}

// AgentWork lists the Agent's work items (deploy progress).
func (c *Client) AgentWork(ctx context.Context, ns, agent string) ([]wire.Work, error) {
	var out wire.List[wire.Work]
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/work", nil, nil, &out)
	return out.Items, err
}

// Endpoints reports where the Agent's Gateway is reached.
func (c *Client) Endpoints(ctx context.Context, ns, agent string) (wire.Endpoints, error) {
	var out wire.Endpoints
	err := c.do(ctx, http.MethodGet, agentPath(ns, agent)+"/endpoints", nil, nil, &out)
	return out, err
}

// LogOptions select an Agent's log stream.
type LogOptions struct {
	Container string // gateway (default) or harness
	Follow    bool
	Tail      int    // last lines first (0: all)
	Revision  string // id or number; empty: the active, else the newest
}

// Logs opens the Agent's supervisor log as a text stream; the caller
// closes it. With Follow it ends when ctx does.
func (c *Client) Logs(ctx context.Context, ns, agent string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	if o.Follow {
		q.Set("follow", "true")
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

// WorkFilter narrows Work; empty fields match everything.
type WorkFilter struct {
	State, Kind, AgentID string
}

// Work lists work items across the installation.
func (c *Client) Work(ctx context.Context, f WorkFilter) ([]wire.Work, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Kind != "" {
		q.Set("kind", f.Kind)
	}
	if f.AgentID != "" {
		q.Set("agent", f.AgentID)
	}
	var out wire.List[wire.Work]
	err := c.do(ctx, http.MethodGet, "/v1/work", q, nil, &out)
	return out.Items, err
}

// WorkItem gets one work item.
func (c *Client) WorkItem(ctx context.Context, id string) (wire.Work, error) {
	var out wire.Work
	err := c.do(ctx, http.MethodGet, "/v1/work/"+esc(id), nil, nil, &out)
	return out, err
}

// Audit lists audit records with Seq > after, at most limit (0: server default).
func (c *Client) Audit(ctx context.Context, after int64, limit int) ([]wire.AuditRecord, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.List[wire.AuditRecord]
	err := c.do(ctx, http.MethodGet, "/v1/audit", q, nil, &out)
	return out.Items, err
}

// Installation reports the installation's capabilities.
func (c *Client) Installation(ctx context.Context) (wire.Installation, error) {
	var out wire.Installation
	err := c.do(ctx, http.MethodGet, "/v1/installation", nil, nil, &out)
	return out, err
}

// Version reports the coordinator's build.
func (c *Client) Version(ctx context.Context) (wire.Version, error) {
	var out wire.Version
	err := c.do(ctx, http.MethodGet, "/v1/version", nil, nil, &out)
	return out, err
}

// Status summarizes the cluster and every Agent.
func (c *Client) Status(ctx context.Context) (wire.Status, error) {
	var out wire.Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &out)
	return out, err
}

// Cluster returns the cluster as the answering node sees it.
func (c *Client) Cluster(ctx context.Context) (wire.Cluster, error) {
	var out wire.Cluster
	err := c.do(ctx, http.MethodGet, "/v1/cluster", nil, nil, &out)
	return out, err
}

// Join adds a voter.
func (c *Client) Join(ctx context.Context, id, raftAddr, httpAddr string) (wire.Cluster, error) {
	var out wire.Cluster
	err := c.do(ctx, http.MethodPost, "/v1/cluster/join", nil, wire.ClusterJoin{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr}, &out)
	return out, err
}

// Remove removes a member.
func (c *Client) Remove(ctx context.Context, id string) (wire.Cluster, error) {
	var out wire.Cluster
	err := c.do(ctx, http.MethodPost, "/v1/cluster/remove", nil, wire.ClusterMember{ID: id}, &out)
	return out, err
}

// Transfer moves leadership to id (empty: any voter).
func (c *Client) Transfer(ctx context.Context, id string) (wire.Cluster, error) {
	var out wire.Cluster
	err := c.do(ctx, http.MethodPost, "/v1/cluster/transfer", nil, wire.ClusterMember{ID: id}, &out)
	return out, err
}

// SnapshotSave streams a backup of the replicated state into w.
func (c *Client) SnapshotSave(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/cluster/snapshot", nil, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("client: snapshot stream: %w", err)
	}
	return n, nil
}

// SnapshotRestore uploads a backup; r is rewound when the call is
// redirected to the leader.
func (c *Client) SnapshotRestore(ctx context.Context, r io.ReadSeeker) (wire.Cluster, error) {
	resp, err := c.send(ctx, http.MethodPost, "/v1/cluster/restore", nil, func() io.Reader {
		_, _ = r.Seek(0, io.SeekStart)
		return io.NopCloser(r)
	}, "application/octet-stream")
	if err != nil {
		return wire.Cluster{}, err
	}
	defer resp.Body.Close()
	var out wire.Cluster
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("client: decode restore answer: %w", err)
	}
	return out, nil
}
