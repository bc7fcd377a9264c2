package occ

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
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
}

func (f *agentFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.config, "config", "", "Configuration name or id")
	fl.StringVar(&f.mode, "mode", "", "execution mode: embedded or dedicated")
	fl.StringVar(&f.computeID, "compute", "", "compute selection id")
	fl.StringVar(&f.authMethod, "auth-method", "", "harnessAuth method: api_key, codex_pat, chatgpt_service_account, credential_source, runtime")
	fl.StringVar(&f.authKind, "auth-kind", "", "harnessAuth credential kind: secret, service_account, credential_gateway")
	fl.StringVar(&f.authRef, "auth-ref", "", "harnessAuth source reference, e.g. secret://ns/name#key (a reference, never the secret)")
	fl.StringSliceVar(&f.plugins, "plugin", nil, "plugin selection (repeatable)")
	fl.BoolVar(&f.rollback, "rollback", false, "opt into exact-owner rollback: a new revision held or not ready within the window after activation is replaced once by the exact previous one")
	fl.StringVar(&f.rollbackWindow, "rollback-window", "", "rollback window (Go duration, default 5m)")
}

// policy is the rollback policy the flags set, nil when untouched.
func (f *agentFlags) policy(c *cobra.Command) *wire.RollbackPolicy {
	if !c.Flags().Changed("rollback") && !c.Flags().Changed("rollback-window") {
		return nil
	}
	return &wire.RollbackPolicy{Enabled: f.rollback || c.Flags().Changed("rollback-window") && !c.Flags().Changed("rollback"),
		Window: f.rollbackWindow}
}

func (f *agentFlags) auth() *wire.HarnessAuth {
	if f.authMethod == "" && f.authKind == "" && f.authRef == "" {
		return nil
	}
	return &wire.HarnessAuth{Method: f.authMethod, CredentialKind: f.authKind, SourceRef: f.authRef}
}

func (a *app) agentCmd() *cobra.Command {
	c := &cobra.Command{Use: "agent", Short: "Create, deploy, stop and delete Agents"}

	var cf agentFlags
	create := &cobra.Command{
		Use: "create NAME --config CONFIG", Short: "Create an Agent (no runtime until deploy)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ag, err := a.client().CreateAgent(ctx, a.settings.Namespace, wire.CreateAgent{Name: args[0],
				Configuration: cf.config, ExecutionMode: cf.mode, HarnessAuth: cf.auth(), ComputeID: cf.computeID,
				Plugins: cf.plugins, Rollback: cf.policy(cmd)})
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ag, func() table { return agentTable(ag) })
		},
	}
	cf.register(create)
	_ = create.MarkFlagRequired("config")

	var uf agentFlags
	update := &cobra.Command{
		Use: "update NAME", Short: "Change an Agent's inputs for its next deploy (omitted flags keep their values)", Args: cobra.ExactArgs(1),
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
			ag, err := a.client().UpdateAgent(ctx, a.settings.Namespace, args[0], req)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ag, func() table { return agentTable(ag) })
		},
	}
	uf.register(update)

	get := &cobra.Command{
		Use: "get NAME", Short: "Show an Agent", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ag, err := a.client().Agent(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ag, func() table { return agentTable(ag) })
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "List the Namespace's Agents", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ags, err := a.client().Agents(ctx, a.settings.Namespace)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ags, func() table { return agentTable(ags...) })
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete an Agent (retires every revision)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			wk, err := a.client().DeleteAgent(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), wk, func() table { return workTable(wk) })
		},
	}
	stop := &cobra.Command{
		Use: "stop NAME", Short: "Stop an Agent's runtimes and clear its active revision", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			wk, err := a.client().StopAgent(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), wk, func() table { return workTable(wk) })
		},
	}
	work := &cobra.Command{
		Use: "work NAME", Short: "Show the Agent's work items (deploy, stop and delete progress)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ws, err := a.client().AgentWork(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ws, func() table { return workTable(ws...) })
		},
	}
	c.AddCommand(create, update, get, list, del, stop, work, a.deployCmd(), a.filesCmd())
	return c
}

func agentTable(ags ...wire.Agent) table {
	t := table{header: []string{"NAME", "ID", "MODE", "CONFIGURATION", "ACTIVE REVISION", "REVISIONS", "AUTH", "STATE"}}
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
		t.rows = append(t.rows, []string{name, ag.ID, ag.ExecutionMode, short(ag.ConfigurationID),
			dash(ag.ActiveRevisionID), itoa(ag.RevisionCount), auth, st})
	}
	return t
}

func workTable(ws ...wire.Work) table {
	t := table{header: []string{"ID", "KIND", "AGENT", "REVISION", "STATE", "PHASE", "ATTEMPTS", "LAST CODE", "UPDATED"}}
	for _, w := range ws {
		t.rows = append(t.rows, []string{w.ID, w.Kind, short(w.AgentID), short(w.RevisionID), w.State, dash(w.Phase),
			fmt.Sprintf("%d/%d", w.Attempts, w.MaxAttempts), dash(w.LastCode), ts(w.UpdatedAt)})
	}
	return t
}
