package occ

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/atomicfile"
)

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use: "status", Short: "Show the cluster and a summary of every Agent", Args: cobra.NoArgs,
		Example: "  occ status\n  occ status -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			st, err := a.client().Status(ctx)
			if err != nil {
				return err
			}
			if f := a.settings.Output; f != outTable && f != outWide {
				return a.print(cmd.OutOrStdout(), st, func() table { return summaryTable(st.Agents) })
			}
			out := cmd.OutOrStdout()
			if st.Cluster != nil { // only for callers who may view the cluster
				fmt.Fprintln(out, "Cluster:")
				if err := a.print(out, st.Cluster, func() table { return clusterTable(*st.Cluster) }); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
			fmt.Fprintln(out, "Agents:")
			return a.print(out, st, func() table { return summaryTable(st.Agents) })
		},
	}
}

func summaryTable(as []wire.AgentSummary) table {
	t := table{header: []string{"NAMESPACE", "AGENT", "MODE", "ACTIVE REVISION", "REVISIONS", "STATE", "REASON", "ID",
		"ACTIVE REVISION ID"}, wide: wideCols(7, 8)}
	for _, s := range as {
		st := s.State
		if st == "" { // an older coordinator: what it knows
			st = "stopped"
			if s.ActiveRevisionID != "" {
				st = "active"
			}
			if s.Deleting {
				st = "deleting"
			}
		}
		t.rows = append(t.rows, []string{s.Namespace, s.Name, s.ExecutionMode, revNumber(s.ActiveRevision, s.ActiveRevisionID),
			itoa(s.RevisionCount), st, dash(s.Reason), s.ID, dash(s.ActiveRevisionID)})
		t.names = append(t.names, "agent/"+s.Namespace+"/"+s.Name)
	}
	return t
}

// clusterTable lists the members; the answering node adds its Raft state,
// term and applied index, the others what it knows of them.
func clusterTable(c wire.Cluster) table {
	t := table{header: []string{"MEMBER", "RAFT ADDRESS", "HTTP ADDRESS", "SUFFRAGE", "STATE", "TERM", "APPLIED"}}
	for _, m := range c.Members {
		state, term, applied := "-", "-", "-"
		if m.Leader {
			state = "Leader"
		}
		if m.ID == c.NodeID {
			state, term, applied = c.State, fmt.Sprint(c.Term), fmt.Sprint(c.LastApplied)
		}
		t.rows = append(t.rows, []string{m.ID, m.RaftAddr, dash(m.HTTPAddr), m.Suffrage, state, term, applied})
	}
	return t
}

func (a *app) auditCmd() *cobra.Command {
	var f client.AuditFilter
	var since, until string
	var watch, oldestFirst bool
	c := &cobra.Command{
		Use: "audit", Short: "List audit records, newest first (filter by actor, namespace with -n, action, time)", Args: cobra.NoArgs,
		Long: "audit lists the audit log's records, filtered by actor, namespace (-n), action and time: the newest\n" +
			"--limit records (default 100), newest first; --oldest-first lists the oldest ones first instead,\n" +
			"and `occ audit export` writes them all in order.\n\n" +
			"--since and --until take " + whenForms + ".\n\n" +
			"Dates and today/yesterday are midnight in the local time zone; --until is exclusive, so\n" +
			"--since yesterday --until today is all of yesterday. Any other value is a usage error (exit 2).",
		Example: `  occ audit --actor user:alice --since 24h
  occ audit --since yesterday --until today
  occ audit --since 2026-12-01 --until 2026-12-02T12:00:00+01:00
  occ audit -n team --action openclaw.agents.lifecycle.deploy
  occ audit --limit 20 --watch
  occ audit --oldest-first --after 41000`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			now := a.opts.Now()
			if f.Since, err = parseWhen(since, now); err != nil {
				return usageError(fmt.Errorf("--since: %w", err))
			}
			if f.Until, err = parseWhen(until, now); err != nil {
				return usageError(fmt.Errorf("--until: %w", err))
			}
			if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
				return usageError(fmt.Errorf("--since %s is not before --until %s: no record can match", since, until))
			}
			// The namespace filters only when asked for: -n or OCC_NAMESPACE.
			if cmd.Flags().Changed("namespace") || a.opts.Getenv("OCC_NAMESPACE") != "" {
				f.Namespace = a.settings.Namespace
			}
			f.Newest = !oldestFirst
			return a.show(cmd, watch, func(ctx context.Context) (any, func() table, error) {
				recs, err := a.client().AuditQuery(ctx, f)
				return recs, func() table { return auditTable(recs) }, err
			})
		},
	}
	addWatch(c, &watch)
	c.AddCommand(a.auditExportCmd())
	fl := c.Flags()
	fl.Int64Var(&f.After, "after", 0, "only records with a sequence number above this")
	fl.IntVar(&f.Limit, "limit", 0, "the newest this many records (server default 100, max 1000)")
	fl.BoolVar(&oldestFirst, "oldest-first", false, "the oldest records, oldest first (--limit counts from the start)")
	fl.Int64Var(&f.Before, "before", 0, "only records with a sequence number below this (the next page back)")
	fl.StringVar(&f.Actor, "actor", "", "only this actor's records (user:<name>, serviceprincipal:<ns>/<name>, bootstrap)")
	fl.StringVar(&f.Action, "action", "", "only this action (e.g. openclaw.agents.lifecycle.deploy)")
	fl.StringVar(&since, "since", "", "only records at or after this time: "+whenForms)
	fl.StringVar(&until, "until", "", "only records before this time (the same forms as --since)")
	return c
}

// auditTable shows audit records; -o wide adds the Namespace, Agent and
// revision by name and number (a short id where the coordinator sent no
// name: the resource is gone, or the coordinator is older).
func auditTable(recs []wire.AuditRecord) table {
	t := table{header: []string{"SEQ", "TIME", "ACTOR", "ACTION", "RESOURCE", "OUTCOME", "NAMESPACE", "AGENT", "REVISION"},
		wide: wideCols(6, 7, 8)}
	for _, r := range recs {
		t.rows = append(t.rows, []string{itoa(r.Seq), ts(r.Time), dash(r.Actor), r.Action, dash(r.Resource), dash(r.Outcome),
			cmp.Or(r.Namespace, short(r.NamespaceID)), cmp.Or(r.Agent, short(r.AgentID)), revNumber(r.Revision, r.RevisionID)})
		t.names = append(t.names, "audit/"+itoa(r.Seq))
	}
	return t
}

// clusterWorkTable is workTable for work of every Namespace: the Agent as
// namespace/name.
func clusterWorkTable(ws []wire.Work) table {
	t := workTable(nil, ws...)
	for i, w := range ws {
		if w.Namespace != "" && w.Agent != "" {
			t.rows[i][1] = w.Namespace + "/" + w.Agent
		}
	}
	return t
}

func (a *app) workCmd() *cobra.Command {
	var f client.WorkFilter
	var watch bool
	c := &cobra.Command{
		Use: "work", Short: "List revision work (queued, claimed, completed, failed, superseded)", Args: cobra.NoArgs,
		Example: "  occ work --state queued\n  occ work --kind activate -o wide --watch",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.show(cmd, watch, func(ctx context.Context) (any, func() table, error) {
				ws, err := a.client().Work(ctx, f)
				return ws, func() table { return clusterWorkTable(ws) }, err
			})
		},
	}
	addWatch(c, &watch)
	_ = c.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(wire.WorkStates(), cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(wire.WorkKinds(), cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&f.State, "state", "", "only work in this state")
	c.Flags().StringVar(&f.Kind, "kind", "", "only work of this kind (activate, stop, delete)")
	c.Flags().StringVar(&f.AgentID, "agent-id", "", "only work of this Agent id")
	return c
}

func (a *app) clusterCmd() *cobra.Command {
	c := &cobra.Command{Use: "cluster", Short: "Raft membership, leadership and backups",
		Example: "  occ cluster members\n  occ cluster snapshot save backup.snap"}
	raw := func(cmd *cobra.Command, v wire.Cluster, err error) error {
		if err != nil {
			return err
		}
		return a.print(cmd.OutOrStdout(), v, func() table { return clusterTable(v) })
	}
	members := &cobra.Command{
		Use: "members", Short: "Show members, leader, term and applied index", Args: cobra.NoArgs,
		Example: "  occ cluster members\n  occ cluster members -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			v, err := a.client().Cluster(ctx)
			return raw(cmd, v, err)
		},
	}
	join := &cobra.Command{
		Use: "join ID RAFT_ADDR HTTP_ADDR", Short: "Add a voter", Args: cobra.ExactArgs(3),
		Example: "  occ cluster join c-1 10.0.0.2:7300 10.0.0.2:7400",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			v, err := a.client().Join(ctx, args[0], args[1], args[2])
			return raw(cmd, v, err)
		},
	}
	remove := &cobra.Command{
		Use: "remove ID", Short: "Remove a member", Args: cobra.ExactArgs(1),
		Example: "  occ cluster remove c-2",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			v, err := a.client().Remove(ctx, args[0])
			return raw(cmd, v, err)
		},
	}
	transfer := &cobra.Command{
		Use: "transfer [ID]", Short: "Transfer leadership (to ID, or any voter)", Args: cobra.MaximumNArgs(1),
		Example: "  occ cluster transfer\n  occ cluster transfer c-1",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			v, err := a.client().Transfer(ctx, id)
			return raw(cmd, v, err)
		},
	}
	snap := &cobra.Command{Use: "snapshot", Short: "Save or restore a backup of the replicated state",
		Example: "  occ cluster snapshot save backup.snap\n  occ cluster snapshot restore backup.snap"}
	snap.AddCommand(&cobra.Command{
		Use: "save FILE", Short: "Stream a backup into FILE (mode 0600)", Args: cobra.ExactArgs(1),
		Example: "  occ cluster snapshot save backup.snap",
		RunE: func(cmd *cobra.Command, args []string) error {
			var n int64
			err := atomicfile.WriteFrom(args[0], 0o600, func(w io.Writer) error {
				var err error
				n, err = a.client().SnapshotSave(cmd.Context(), w)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "saved %d bytes to %s\n", n, args[0])
			return nil
		},
	}, &cobra.Command{
		Use: "restore FILE", Short: "Replace the replicated state with a backup", Args: cobra.ExactArgs(1),
		Example: "  occ cluster snapshot restore backup.snap",
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			v, err := a.client().SnapshotRestore(cmd.Context(), f)
			return raw(cmd, v, err)
		},
	})
	c.AddCommand(members, join, remove, transfer, snap)
	return c
}

func completionCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use: "completion bash|zsh|fish", Short: "Print a shell completion script",
		Example: "  source <(occ completion bash)\n  occ completion zsh > \"${fpath[1]}/_occ\"",
		Args:    cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs), ValidArgs: []string{"bash", "zsh", "fish"},
		// Completion needs no server settings.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}
