package console

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// requestTimeout bounds the API calls of one page.
const requestTimeout = 30 * time.Second

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestTimeout)
}

type nsRow struct {
	Name                                    string
	Agents, Serving, Busy, Failed, Degraded int
}

type namespacesView struct {
	Namespaces []nsRow
	Banner     banner
}

func (c *Console) namespacesPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := c.apiClient(s.token)
	nss, err := cl.Namespaces(ctx)
	if err != nil {
		return apiErr(err)
	}
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	v := namespacesView{Namespaces: []nsRow{}, Banner: c.banner(ctx, s)}
	for _, ns := range nss {
		ov, err := cl.NamespaceOverview(ctx, ns.Name)
		if err != nil {
			return apiErr(err)
		}
		row := nsRow{Name: ns.Name, Agents: len(ov.Agents)}
		for _, a := range ov.Agents {
			switch a.State {
			case wire.AgentServing:
				row.Serving++
			case wire.AgentActivating, wire.AgentDeleting:
				row.Busy++
			case wire.AgentFailed:
				row.Failed++
			case wire.AgentDegraded:
				row.Degraded++
			}
		}
		v.Namespaces = append(v.Namespaces, row)
	}
	c.render(w, http.StatusOK, "namespaces", s, v)
	return nil
}

type agentsView struct {
	Namespace string
	Agents    []agentRow
	CanCreate bool
	Banner    banner
}

type agentRow struct {
	Name, State, Mode, Configuration, Phase, HeldCode, FailureCode string
	Active, Latest                                                 int64
}

func (c *Console) agentsPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	ov, err := c.apiClient(s.token).NamespaceOverview(ctx, r.PathValue("ns"))
	if err != nil {
		return apiErr(err)
	}
	v := agentsView{Namespace: ov.Namespace.Name, Agents: make([]agentRow, 0, len(ov.Agents)),
		CanCreate: c.can(ctx, s, ActionCreateAgent, Resource{Namespace: ov.Namespace.Name}), Banner: c.banner(ctx, s)}
	for _, a := range ov.Agents {
		v.Agents = append(v.Agents, agentRow{Name: a.Name, State: a.State, Mode: a.ExecutionMode,
			Configuration: a.Configuration, Phase: a.Phase, HeldCode: a.HeldCode, FailureCode: a.FailureCode,
			Active: a.ActiveRevision, Latest: a.LatestRevision})
	}
	c.render(w, http.StatusOK, "agents", s, v)
	return nil
}

// agentBase is what every tab of an Agent page shows.
type agentBase struct {
	Namespace string
	Agent     wire.AgentDetail
	Tab       string
	Path      string // /console/ns/{ns}/agents/{agent}
}

func agentPath(ns, agent string) string {
	return Prefix + "/ns/" + url.PathEscape(ns) + "/agents/" + url.PathEscape(agent)
}

func (c *Console) agentDetail(ctx context.Context, s *session, r *http.Request, tab string) (agentBase, error) {
	d, err := c.apiClient(s.token).AgentOverview(ctx, r.PathValue("ns"), r.PathValue("agent"))
	if err != nil {
		return agentBase{}, apiErr(err)
	}
	ns := r.PathValue("ns")
	if nsv, err := c.apiClient(s.token).Namespace(ctx, ns); err == nil {
		ns = nsv.Name
	}
	return agentBase{Namespace: ns, Agent: d, Tab: tab, Path: agentPath(ns, d.Name)}, nil
}

type agentView struct {
	agentBase
	CanDeploy, CanStop bool
	Progress           progress
	Notice             string
}

func (c *Console) agentPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	b, err := c.agentDetail(ctx, s, r, "overview")
	if err != nil {
		return err
	}
	may := c.access(ctx, s, Resource{Namespace: b.Namespace, Agent: b.Agent.Name}, ActionDeploy, ActionStop)
	v := agentView{agentBase: b, CanDeploy: may[ActionDeploy], CanStop: may[ActionStop],
		Progress: progressOf(b.Agent.AgentOverview, c.cfg.Now()), Notice: r.URL.Query().Get("notice")}
	c.render(w, http.StatusOK, "agent", s, v)
	return nil
}

// deploy asks the API to deploy the Agent and shows its page, where the
// deploy's progress streams in.
func (c *Console) deploy(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.agentWork(w, r, s, ActionDeploy, "deploy", func(ctx context.Context, cl *client.Client, ns, name string) error {
		_, err := cl.Deploy(ctx, ns, name, wire.Deploy{})
		return err
	})
}

// stop asks the API to stop the Agent.
func (c *Console) stop(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.agentWork(w, r, s, ActionStop, "stop", func(ctx context.Context, cl *client.Client, ns, name string) error {
		_, err := cl.StopAgent(ctx, ns, name)
		return err
	})
}

// agentWork authorizes verb on the Agent, runs call and shows the Agent.
func (c *Console) agentWork(w http.ResponseWriter, r *http.Request, s *session, a Action, verb string,
	call func(ctx context.Context, cl *client.Client, ns, name string) error) error {
	ns, name := r.PathValue("ns"), r.PathValue("agent")
	if c.refuses(r.Context(), s, a, Resource{Namespace: ns, Agent: name}) {
		return forbidden(verb + " agent " + name)
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := call(ctx, c.apiClient(s.token), ns, name); err != nil {
		return apiErr(err)
	}
	http.Redirect(w, r, agentPath(ns, name)+"?notice="+verb, http.StatusSeeOther)
	return nil
}
