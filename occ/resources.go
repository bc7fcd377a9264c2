package occ

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api/wire"
)

func (a *app) namespaceCmd() *cobra.Command {
	c := &cobra.Command{Use: "namespace", Aliases: []string{"ns"}, Short: "Create and inspect Namespaces"}
	c.AddCommand(&cobra.Command{
		Use: "create NAME", Short: "Create a Namespace", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ns, err := a.client().CreateNamespace(ctx, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ns, func() table { return namespaceTable(ns) })
		},
	}, &cobra.Command{
		Use: "list", Short: "List Namespaces", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			nss, err := a.client().Namespaces(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), nss, func() table { return namespaceTable(nss...) })
		},
	}, &cobra.Command{
		Use: "get NAME", Short: "Show a Namespace", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ns, err := a.client().Namespace(ctx, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ns, func() table { return namespaceTable(ns) })
		},
	})
	return c
}

func namespaceTable(nss ...wire.Namespace) table {
	t := table{header: []string{"NAME", "ID", "CREATED"}}
	for _, ns := range nss {
		t.rows = append(t.rows, []string{ns.Name, ns.ID, ts(ns.CreatedAt)})
	}
	return t
}

// readDocument reads a configuration document (JSON or YAML) from a file or
// '-' for stdin and returns it as JSON.
func (a *app) readDocument(path string) (json.RawMessage, error) {
	if path == "" {
		return nil, usageError(fmt.Errorf("a document is required: -f FILE (or -f - for stdin)"))
	}
	var data []byte
	var err error
	if path == "-" {
		data, err = readAllLimited(a.opts.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	if strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		return json.RawMessage(data), nil
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("document %s is neither JSON nor YAML: %w", path, err)
	}
	return j, nil
}

func (a *app) configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Aliases: []string{"configuration"}, Short: "Save and inspect native OpenClaw Configurations"}
	var file string
	create := &cobra.Command{
		Use: "create NAME -f FILE", Short: "Save a new Configuration", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := a.readDocument(file)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cf, err := a.client().CreateConfiguration(ctx, a.settings.Namespace, args[0], doc)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), cf, func() table { return configTable(cf) })
		},
	}
	create.Flags().StringVarP(&file, "file", "f", "", "document file (JSON or YAML), '-' for stdin")
	var ufile string
	update := &cobra.Command{
		Use: "update NAME -f FILE", Short: "Replace a Configuration's document (next generation)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := a.readDocument(ufile)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cf, err := a.client().UpdateConfiguration(ctx, a.settings.Namespace, args[0], doc)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), cf, func() table { return configTable(cf) })
		},
	}
	update.Flags().StringVarP(&ufile, "file", "f", "", "document file (JSON or YAML), '-' for stdin")
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a Configuration and its document", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cf, err := a.client().Configuration(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			if a.settings.Output == "table" {
				// The document is the point of get: show it as JSON.
				if err := a.print(cmd.OutOrStdout(), cf, func() table { return configTable(cf) }); err != nil {
					return err
				}
				return a.printRaw(cmd.OutOrStdout(), cf.Document)
			}
			return a.print(cmd.OutOrStdout(), cf, nil)
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "List the Namespace's Configurations", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cfs, err := a.client().Configurations(ctx, a.settings.Namespace)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), cfs, func() table { return configTable(cfs...) })
		},
	}
	c.AddCommand(create, update, get, list)
	return c
}

func configTable(cfs ...wire.Configuration) table {
	t := table{header: []string{"NAME", "ID", "GENERATION", "UPDATED"}}
	for _, c := range cfs {
		t.rows = append(t.rows, []string{c.Name, c.ID, itoa(c.Generation), ts(c.UpdatedAt)})
	}
	return t
}

func (a *app) revisionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "revisions AGENT", Short: "List an Agent's revisions", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cl := a.client()
			ag, err := cl.Agent(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			revs, err := cl.Revisions(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), revs, func() table { return revisionTable(ag.ActiveRevisionID, revs...) })
		},
	}
}

func revisionTable(active string, revs ...wire.Revision) table {
	t := table{header: []string{"NUMBER", "ID", "HARNESS", "MODE", "STATUS", "FAILURE", "ACTIVE", "CREATED"}}
	for _, r := range revs {
		act := ""
		if r.ID == active {
			act = "*"
		}
		t.rows = append(t.rows, []string{itoa(r.Number), r.ID, r.Harness.ID + "@" + r.Harness.Version, r.Mode,
			r.Status, dash(r.FailureCode), act, ts(r.CreatedAt)})
	}
	return t
}

func (a *app) installationCmd() *cobra.Command {
	return &cobra.Command{
		Use: "installation", Short: "Show what Agents of this installation can deploy", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			inst, err := a.client().Installation(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), inst, func() table {
				native := "-"
				if inst.Capabilities.NativeWorkers != nil {
					native = inst.Capabilities.NativeWorkers.Support
				}
				return table{header: []string{"OPENCLAW MODES", "NATIVE WORKERS", "SANDBOX DRIVER UNAVAILABLE"},
					rows: [][]string{{strings.Join(inst.Capabilities.OpenClaw.ExecutionModes, ","), native,
						fmt.Sprint(inst.SandboxDriverUnavailable)}}}
			})
		},
	}
}
