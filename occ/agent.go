package occ

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// maxInputBytes bounds documents and auth bindings read from files or stdin.
const maxInputBytes = 4 << 20

func readAllLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInputBytes {
		return nil, fmt.Errorf("input is larger than %d bytes", maxInputBytes)
	}
	return data, nil
}

// agentFlags are the fields create and update share.
type agentFlags struct {
	config, mode, computeID       string
	authMethod, authKind, authRef string
	plugins                       []string
	rollback                      bool
	rollbackWindow                string
	// requests and limits: "cpu=Q,memory=Q" per container and kind
	gatewayRequests, gatewayLimits, harnessRequests, harnessLimits string
}

// resourceFlags names the four resource flags.
var resourceFlags = []string{"gateway-requests", "gateway-limits", "harness-requests", "harness-limits"}

func (a *app) registerAgentFlags(c *cobra.Command, f *agentFlags) {
	fl := c.Flags()
	fl.StringVar(&f.config, "config", "", "Configuration name or id")
	fl.StringVar(&f.mode, "mode", "", "execution mode: embedded or dedicated")
	fl.StringVar(&f.computeID, "compute", "", "compute selection id")
	fl.StringVar(&f.authMethod, "auth-method", "", "harnessAuth method: api_key, codex_pat, chatgpt_service_account, credential_source, runtime")
	fl.StringVar(&f.authKind, "auth-kind", "", "harnessAuth credential kind: secret, service_account, credential_gateway")
	fl.StringVar(&f.authRef, "auth-ref", "", "harnessAuth source reference: credential:NAME[#KEY], a credential source of the namespace (a reference, never the secret)")
	fl.StringSliceVar(&f.plugins, "plugin", nil, "plugin selection (repeatable)")
	fl.BoolVar(&f.rollback, "rollback", false, "opt into exact-owner rollback: a new revision held or not ready within the window after activation is replaced once by the exact previous one")
	fl.StringVar(&f.rollbackWindow, "rollback-window", "", "rollback window (Go duration, default 5m)")
	fl.StringVar(&f.gatewayRequests, "gateway-requests", "", "the Gateway container's requests, cpu=Q,memory=Q (unset: the defaults)")
	fl.StringVar(&f.gatewayLimits, "gateway-limits", "", "the Gateway container's limits, cpu=Q,memory=Q")
	fl.StringVar(&f.harnessRequests, "harness-requests", "", "the dedicated Harness container's requests, cpu=Q,memory=Q")
	fl.StringVar(&f.harnessLimits, "harness-limits", "", "the dedicated Harness container's limits, cpu=Q,memory=Q")
	_ = c.RegisterFlagCompletionFunc("config", a.completeFlag(configNames))
	_ = c.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]string{wire.ModeEmbedded, wire.ModeDedicated}, cobra.ShellCompDirectiveNoFileComp))
}

// policy is the rollback policy the flags set, nil when untouched.
func (f *agentFlags) policy(c *cobra.Command) *wire.RollbackPolicy {
	if !c.Flags().Changed("rollback") && !c.Flags().Changed("rollback-window") {
		return nil
	}
	return &wire.RollbackPolicy{Enabled: f.rollback || c.Flags().Changed("rollback-window") && !c.Flags().Changed("rollback"),
		Window: f.rollbackWindow}
}

// resources overlays the resource flags that were set on base (nil when
// none was set).
func (f *agentFlags) resources(c *cobra.Command, base *wire.AgentResources) (*wire.AgentResources, error) {
	changed := false
	for _, n := range resourceFlags {
		changed = changed || c.Flags().Changed(n)
	}
	if !changed {
		return nil, nil
	}
	out := wire.AgentResources{}
	if base != nil {
		out = *base
	}
	for _, set := range []struct {
		flag, v  string
		cpu, mem *string
	}{
		{"gateway-requests", f.gatewayRequests, &out.Gateway.CPURequest, &out.Gateway.MemoryRequest},
		{"gateway-limits", f.gatewayLimits, &out.Gateway.CPULimit, &out.Gateway.MemoryLimit},
		{"harness-requests", f.harnessRequests, &out.Harness.CPURequest, &out.Harness.MemoryRequest},
		{"harness-limits", f.harnessLimits, &out.Harness.CPULimit, &out.Harness.MemoryLimit},
	} {
		if !c.Flags().Changed(set.flag) {
			continue
		}
		for _, kv := range strings.Split(set.v, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			switch {
			case kv == "":
			case ok && k == "cpu":
				*set.cpu = v
			case ok && k == "memory":
				*set.mem = v
			default:
				return nil, usageError(fmt.Errorf("--%s: %q is not cpu=Q or memory=Q", set.flag, kv))
			}
		}
	}
	return &out, nil
}

func (f *agentFlags) auth() *wire.HarnessAuth {
	if f.authMethod == "" && f.authKind == "" && f.authRef == "" {
		return nil
	}
	return &wire.HarnessAuth{Method: f.authMethod, CredentialKind: f.authKind, SourceRef: f.authRef}
}

// agentWorkCmd is one `occ agent stop|delete NAME` action answering with a
// work item; --wait follows the work until it is done (workwait.go).
func (a *app) agentWorkCmd(use, short, long, example string, ww workWait,
	do func(ctx context.Context, cl *client.Client, ns, name string) (wire.Work, error)) *cobra.Command {
	var wait bool
	var timeout time.Duration
	c := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example, Args: cobra.ExactArgs(1),
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageError(fmt.Errorf("--timeout %s: want a positive duration", timeout))
			}
			cl := a.client()
			ctx, cancel := a.ctx(cmd)
			wk, err := do(ctx, cl, a.settings.Namespace, args[0])
			cancel()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !wait {
				return a.print(out, wk, func() table { return workTable(nil, wk) })
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s of agent %s requested; waiting up to %s\n", ww.kind, args[0], timeout)
			wctx, wcancel := context.WithTimeout(cmd.Context(), timeout)
			defer wcancel()
			wk, err = a.waitWork(wctx, cmd, cl, ww, args[0], wk)
			if err != nil {
				return err
			}
			if f := a.settings.Output; ww.kind == wire.WorkDelete && (f == outTable || f == outWide) {
				// The work went with the Agent: say what happened.
				_, err := fmt.Fprintf(out, "agent/%s deleted\n", args[0])
				return err
			}
			return a.print(out, wk, func() table { return workTable(nil, wk) })
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait until the "+ww.kind+" is done, showing progress")
	c.Flags().DurationVar(&timeout, "timeout", DefaultWaitTimeout, "how long --wait waits")
	return c
}

func (a *app) agentCmd() *cobra.Command {
	c := &cobra.Command{Use: "agent", Short: "Create, deploy, inspect, stop and delete Agents",
		Example: "  occ agent create hello --config chat --auth-method api_key --auth-ref credential:demo-key\n" +
			"  occ agent deploy hello --wait\n  occ agent list -o wide"}

	var cf agentFlags
	create := &cobra.Command{
		Use: "create NAME --config CONFIG", Short: "Create an Agent (no runtime until deploy)", Args: cobra.ExactArgs(1),
		Example: `  occ agent create hello --config chat --auth-method api_key --auth-ref credential:demo-key
  occ agent create coder --config codex --mode dedicated --auth-method codex_pat --auth-ref credential:codex#token
  occ agent create big --config chat --gateway-requests memory=2Gi --gateway-limits cpu=4,memory=4Gi`,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := cf.resources(cmd, nil)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ag, err := a.client().CreateAgent(ctx, a.settings.Namespace, wire.CreateAgent{Name: args[0],
				Configuration: cf.config, ExecutionMode: cf.mode, HarnessAuth: cf.auth(), ComputeID: cf.computeID,
				Plugins: cf.plugins, Rollback: cf.policy(cmd), Resources: res})
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ag, func() table { return agentTable(nil, ag) })
		},
	}
	a.registerAgentFlags(create, &cf)
	a.addDryRun(create)
	_ = create.MarkFlagRequired("config")

	var uf agentFlags
	update := &cobra.Command{
		Use: "update NAME", Short: "Change an Agent's inputs for its next deploy (omitted flags keep their values)", Args: cobra.ExactArgs(1),
		Example:           "  occ agent update hello --config chat-v2\n  occ agent update coder --auth-method api_key --auth-ref credential:openai-api-key",
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req wire.UpdateAgent
			fl := cmd.Flags()
			if fl.Changed("config") {
				req.Configuration = &uf.config
			}
			if fl.Changed("mode") {
				req.ExecutionMode = &uf.mode
			}
			if fl.Changed("compute") {
				req.ComputeID = &uf.computeID
			}
			if fl.Changed("plugin") {
				req.Plugins = &uf.plugins
			}
			req.HarnessAuth = uf.auth()
			req.Rollback = uf.policy(cmd)
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if _, err := uf.resources(cmd, nil); err != nil {
				return err
			}
			if cmd.Flags().Changed("gateway-requests") || cmd.Flags().Changed("gateway-limits") ||
				cmd.Flags().Changed("harness-requests") || cmd.Flags().Changed("harness-limits") {
				// The flags change single values: the rest stays the Agent's.
				cur, err := a.client().Agent(ctx, a.settings.Namespace, args[0])
				if err != nil {
					return err
				}
				if req.Resources, err = uf.resources(cmd, cur.Resources); err != nil {
					return err
				}
			}
			ag, err := a.client().UpdateAgent(ctx, a.settings.Namespace, args[0], req)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ag, func() table { return agentTable(nil, ag) })
		},
	}
	a.registerAgentFlags(update, &uf)
	a.addDryRun(update)

	var watchGet, watchList, watchWork bool
	get := &cobra.Command{
		Use: "get NAME", Short: "Show an Agent", Args: cobra.ExactArgs(1),
		Example:           "  occ agent get hello\n  occ agent get hello -o jsonpath='{.activeRevisionId}'\n  occ agent get hello --watch",
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd, watchGet, func(ctx context.Context) (any, func() table, error) {
				cl := a.client()
				ag, err := cl.Agent(ctx, a.settings.Namespace, args[0])
				if err != nil {
					return nil, nil, err
				}
				cfgs, _ := cl.Configurations(ctx, a.settings.Namespace)
				return ag, func() table { return agentTable(cfgs, ag) }, nil
			})
		},
	}
	addWatch(get, &watchGet)
	list := &cobra.Command{
		Use: "list", Short: "List the Namespace's Agents", Args: cobra.NoArgs,
		Example: "  occ agent list\n  occ agent list -o wide --no-headers\n  occ agent list -o name",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.show(cmd, watchList, func(ctx context.Context) (any, func() table, error) {
				cl := a.client()
				ags, err := cl.Agents(ctx, a.settings.Namespace)
				if err != nil {
					return nil, nil, err
				}
				cfgs, _ := cl.Configurations(ctx, a.settings.Namespace)
				return ags, func() table { return agentTable(cfgs, ags...) }, nil
			})
		},
	}
	addWatch(list, &watchList)
	del := a.agentWorkCmd("delete NAME [--wait] [--timeout D]", "Delete an Agent (retires every revision)",
		"delete queues delete work: the activation engine stops the Agent's runtimes, retires its revisions, deletes its\n"+
			"runtime credentials and removes it; until then it is listed as (deleting). With --wait occ follows the work,\n"+
			"saying in words where it is, until `occ agent get` answers NOT_FOUND. It exits 3 when the work fails,\n"+
			"4 when the timeout passes first, and 130 on Ctrl-C: the deletion continues on the server.",
		"  occ agent delete hello\n  occ agent delete hello --wait --timeout 5m", delWait,
		func(ctx context.Context, cl *client.Client, ns, name string) (wire.Work, error) {
			return cl.DeleteAgent(ctx, ns, name)
		})
	stop := a.agentWorkCmd("stop NAME [--wait] [--timeout D]", "Stop an Agent's runtimes and clear its active revision",
		"stop queues stop work (and cancels a pending activation): the activation engine stops the Agent's runtimes\n"+
			"and clears its active revision. With --wait occ follows the work, saying in words where it is, until the\n"+
			"work completed and the Agent has no active revision (state stopped). It exits 3 when the work fails or a\n"+
			"later deploy activates a revision first, 4 when the timeout passes first, and 130 on Ctrl-C: the stop\n"+
			"continues on the server.",
		"  occ agent stop hello\n  occ agent stop hello --wait", stopWait,
		func(ctx context.Context, cl *client.Client, ns, name string) (wire.Work, error) {
			return cl.StopAgent(ctx, ns, name)
		})
	work := &cobra.Command{
		Use: "work NAME", Short: "Show the Agent's work items (deploy, stop and delete progress)", Args: cobra.ExactArgs(1),
		Example:           "  occ agent work hello\n  occ agent work hello --watch",
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd, watchWork, func(ctx context.Context) (any, func() table, error) {
				ws, err := a.client().AgentWork(ctx, a.settings.Namespace, args[0])
				return ws, func() table { return workTable(nil, ws...) }, err
			})
		},
	}
	addWatch(work, &watchWork)
	c.AddCommand(create, update, get, list, del, stop, work, a.deployCmd(), a.rollbackCmd(), a.describeCmd(), a.logsCmd(), a.filesCmd())
	return c
}

// agentTable shows an Agent by names: its configuration's (from the
// Agent, else cfgs, else a short id) and its active revision's number; the
// ids only with -o wide.
func agentTable(cfgs []wire.Configuration, ags ...wire.Agent) table {
	names := map[string]string{}
	for _, c := range cfgs {
		names[c.ID] = c.Name
	}
	t := table{header: []string{"NAME", "MODE", "CONFIGURATION", "ACTIVE REVISION", "REVISIONS", "AUTH", "STATE", "ID",
		"ACTIVE REVISION ID", "COMPUTE", "PLUGINS"},
		wide: wideCols(7, 8, 9, 10)}
	for _, ag := range ags {
		auth := "-"
		if ag.HarnessAuth != nil {
			auth = ag.HarnessAuth.Method
		}
		name := ag.Name
		if ag.Deleting {
			name += " (deleting)"
		}
		st := "-"
		if ag.Status != nil {
			st = ag.Status.State
			if ag.Status.Reason != "" {
				st += " (" + ag.Status.Reason + ")"
			}
		}
		cfg := cmp.Or(ag.Configuration, names[ag.ConfigurationID], short(ag.ConfigurationID))
		t.rows = append(t.rows, []string{name, ag.ExecutionMode, cfg, revNumber(ag.ActiveRevision, ag.ActiveRevisionID),
			itoa(ag.RevisionCount), auth, st, ag.ID, dash(ag.ActiveRevisionID), dash(ag.ComputeID),
			dash(strings.Join(ag.Plugins, ","))})
		t.names = append(t.names, "agent/"+ag.Name)
	}
	return t
}

// workTable shows work items by kind, Agent name and revision number;
// agents maps Agent ids to names for a coordinator that does not name
// them. The work's id is a -o wide column.
func workTable(agents map[string]string, ws ...wire.Work) table {
	t := table{header: []string{"KIND", "AGENT", "REVISION", "STATE", "PHASE", "ATTEMPTS", "LAST CODE", "UPDATED", "ID", "DETAIL"},
		wide: wideCols(8, 9)}
	for _, w := range ws {
		agent := cmp.Or(w.Agent, agents[w.AgentID], short(w.AgentID))
		t.rows = append(t.rows, []string{w.Kind, agent, revNumber(w.Revision, w.RevisionID), w.State, dash(w.Phase),
			fmt.Sprintf("%d/%d", w.Attempts, w.MaxAttempts), dash(w.LastCode), ts(w.UpdatedAt), w.ID, dash(w.LastDetail)})
		t.names = append(t.names, "work/"+w.ID)
	}
	return t
}
