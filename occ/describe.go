package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

// describeEvents is how many of the Agent's latest work items describe shows.
const describeEvents = 10

// agentDescription is what occ agent describe gathers, with names rather
// than ids.
type agentDescription struct {
	Agent         wire.Agent      `json:"agent"`
	Namespace     string          `json:"namespace"`
	Configuration string          `json:"configuration"`
	Generation    int64           `json:"configurationGeneration,omitempty"`
	Active        *wire.Revision  `json:"activeRevision,omitempty"`
	Phase         string          `json:"phase"`
	Held          string          `json:"held,omitempty"`
	Endpoints     *wire.Endpoints `json:"endpoints,omitempty"`
	// EndpointReach says where Endpoints can be used from when not from
	// this client: "in-cluster only", "the coordinator's host only"
	// (endpointReach); empty when this client can reach them.
	EndpointReach string          `json:"endpointReach,omitempty"`
	Revisions     []wire.Revision `json:"revisions"`
	Events        []wire.Work     `json:"events"`
}

func (a *app) describeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show an Agent in full: configuration, active revision, phase, held failure, endpoint, recent events",
		Example: `  occ agent describe hello
  occ -n team agent describe coder -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			d, err := describeAgent(ctx, a.client(), a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			d.EndpointReach = endpointReach(d.Endpoints, a.settings.Server, a.opts.Getenv, socketExists)
			if f := a.settings.Output; f != outTable && f != outWide {
				return a.print(cmd.OutOrStdout(), d, func() table {
					return table{names: []string{"agent/" + d.Agent.Name}}
				})
			}
			return writeDescription(cmd.OutOrStdout(), d, a.settings.Output == outWide)
		},
	}
}

// describeAgent reads the Agent and what names it.
func describeAgent(ctx context.Context, cl *client.Client, ns, name string) (agentDescription, error) {
	var d agentDescription
	ag, err := cl.Agent(ctx, ns, name)
	if err != nil {
		return d, err
	}
	d.Agent = ag
	n, err := cl.Namespace(ctx, ag.NamespaceID)
	if err != nil {
		return d, err
	}
	d.Namespace = n.Name
	d.Configuration = ag.ConfigurationID
	if cf, err := cl.Configuration(ctx, ns, ag.ConfigurationID); err == nil {
		d.Configuration, d.Generation = cf.Name, cf.Generation
	}
	if d.Revisions, err = cl.Revisions(ctx, ns, ag.ID); err != nil {
		return d, err
	}
	for i := range d.Revisions {
		if d.Revisions[i].ID == ag.ActiveRevisionID {
			d.Active = &d.Revisions[i]
		}
	}
	work, err := cl.AgentWork(ctx, ns, ag.ID)
	if err != nil {
		return d, err
	}
	sort.Slice(work, func(i, j int) bool { return work[i].UpdatedAt.After(work[j].UpdatedAt) })
	if len(work) > describeEvents {
		work = work[:describeEvents]
	}
	d.Events = work
	d.Phase, d.Held = phaseOf(ag, d.Revisions, work)
	if ep, err := cl.Endpoints(ctx, ns, ag.ID); err == nil {
		d.Endpoints = &ep
	} else if !isNotFound(err) {
		return d, err
	}
	return d, nil
}

// phaseOf summarizes where the Agent is: its newest work's phase while
// that work is open, else the coordinator's observed state
// (serving/activating/degraded/failed/stopped); held is the observed held
// code, else the failure code of the newest revision when it failed (a held
// runtime failure reads RUNTIME_…), else the open work's last retry code.
func phaseOf(ag wire.Agent, revs []wire.Revision, newestFirst []wire.Work) (phase, held string) {
	phase = "stopped"
	if ag.ActiveRevisionID != "" {
		phase = wire.PhaseActive
	}
	if st := ag.Status; st != nil && st.State != "" {
		phase = st.State
		if st.Reason != "" {
			phase += " (" + st.Reason + ")"
		}
		held = st.HeldCode
	}
	if len(revs) > 0 && held == "" {
		if last := revs[len(revs)-1]; last.Status == wire.RevisionFailed {
			held = last.FailureCode
		}
	}
	if len(newestFirst) > 0 {
		w := newestFirst[0]
		if w.State == wire.WorkQueued || w.State == wire.WorkClaimed {
			phase = w.Kind + ": " + dash(w.Phase)
			if held == "" {
				held = w.LastCode
			}
		}
	}
	if ag.Deleting {
		phase = "deleting"
	}
	return phase, held
}

func isNotFound(err error) bool {
	var ae *client.Error
	return errors.As(err, &ae) && ae.Code == codes.NotFound
}

// writeDescription prints the description as kubectl describe does: fields,
// then the revisions and the recent events as indented tables.
func writeDescription(w io.Writer, d agentDescription, wide bool) error {
	ag := d.Agent
	auth := "-"
	if h := ag.HarnessAuth; h != nil {
		auth = h.Method
		if h.CredentialKind != "" || h.SourceRef != "" {
			auth += " (" + strings.Trim(dash(h.CredentialKind)+", "+dash(h.SourceRef), " ") + ")"
		}
	}
	active := "-"
	if r := d.Active; r != nil {
		active = fmt.Sprintf("%d (%s@%s, %s)", r.Number, r.Harness.ID, r.Harness.Version, r.Status)
	}
	cfg := d.Configuration
	if d.Generation > 0 {
		cfg += fmt.Sprintf(" (generation %d)", d.Generation)
	}
	endpoint := "-"
	if e := d.Endpoints; e != nil {
		switch {
		case d.EndpointReach == "":
			endpoint = dash(e.Gateway)
			if e.Socket != "" {
				endpoint += " (socket " + e.Socket + ")"
			}
		case wide:
			endpoint = dash(e.Gateway) + " (" + d.EndpointReach + ")"
		default:
			// An address this client cannot dial is not shown as one.
			endpoint = "- (" + d.EndpointReach + "; -o wide shows it; occ agent send reaches the Agent through the coordinator)"
		}
	}
	plugins := "-"
	if len(ag.Plugins) > 0 {
		plugins = strings.Join(ag.Plugins, ", ")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("Name", ag.Name)
	field("Namespace", d.Namespace)
	if wide {
		field("ID", ag.ID)
	}
	field("Mode", ag.ExecutionMode)
	field("Configuration", cfg)
	field("Harness auth", auth)
	compute := ag.ComputeID
	if compute == "" && d.Active != nil {
		compute = d.Active.ComputeID + " (the installation's driver)"
	}
	field("Compute", dash(compute))
	field("Plugins", plugins)
	field("Active revision", active)
	field("Phase", d.Phase)
	field("Held", dash(d.Held))
	field("Endpoint", endpoint)
	field("Created", ts(ag.CreatedAt))
	field("Updated", ts(ag.UpdatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nRevisions:")
	revs := table{header: []string{"NUMBER", "STATUS", "HARNESS", "MODE", "FAILURE", "CREATED", "ID"}, wide: wideCols(6)}
	for _, r := range d.Revisions {
		revs.rows = append(revs.rows, []string{itoa(r.Number), r.Status, r.Harness.ID + "@" + r.Harness.Version, r.Mode,
			dash(r.FailureCode), ts(r.CreatedAt), r.ID})
	}
	if err := indented(w, revs, wide); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEvents:")
	ev := table{header: []string{"UPDATED", "KIND", "STATE", "PHASE", "ATTEMPTS", "CODE", "DETAIL", "WORK"}, wide: wideCols(7)}
	for _, e := range d.Events {
		ev.rows = append(ev.rows, []string{ts(e.UpdatedAt), e.Kind, e.State, dash(e.Phase),
			fmt.Sprintf("%d/%d", e.Attempts, e.MaxAttempts), dash(e.LastCode), dash(e.LastDetail), e.ID})
	}
	return indented(w, ev, wide)
}

// indented prints t two spaces in, or "  <none>".
func indented(w io.Writer, t table, wide bool) error {
	if len(t.rows) == 0 {
		_, err := fmt.Fprintln(w, "  <none>")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range append([][]string{t.header}, t.rows...) {
		var cells []string
		for i, c := range r {
			if wide || !t.wide[i] {
				cells = append(cells, c)
			}
		}
		fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Where an endpoint can be used from, when not from this client.
const (
	reachInCluster       = "in-cluster only"
	reachCoordinatorHost = "the coordinator's host only"
)

// endpointReach says whether this client can reach the Gateway endpoint:
// "" when it can, else from where it could. A cluster DNS name (*.svc)
// resolves only inside a Kubernetes cluster (KUBERNETES_SERVICE_HOST set);
// a loopback address and the Unix socket are on the coordinator's host,
// which this client is on when it reaches the coordinator over loopback or
// sees the socket.
func endpointReach(e *wire.Endpoints, server string, getenv func(string) string, exists func(string) bool) string {
	if e == nil || e.Gateway == "" && e.Socket == "" {
		return ""
	}
	if e.Socket != "" && exists(e.Socket) {
		return ""
	}
	host := ""
	if u, err := url.Parse(e.Gateway); err == nil {
		host = u.Hostname()
	}
	switch {
	case host == "":
		return reachCoordinatorHost // a socket this client does not see
	case strings.HasSuffix(host, ".svc") || strings.Contains(host, ".svc."):
		if getenv("KUBERNETES_SERVICE_HOST") != "" {
			return ""
		}
		return reachInCluster
	case isLoopback(host):
		if u, err := url.Parse(server); err == nil && isLoopback(u.Hostname()) {
			return ""
		}
		return reachCoordinatorHost
	}
	return ""
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// socketExists reports whether a Unix socket is at path on this machine.
func socketExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeSocket != 0
}
