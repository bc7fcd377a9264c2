package occ

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api/wire"
)

func (a *app) namespaceCmd() *cobra.Command {
	c := &cobra.Command{Use: "namespace", Aliases: []string{"ns"}, Short: "Create, inspect and delete Namespaces",
		Example: "  occ namespace create team\n  occ ns list"}
	var watchList, watchGet bool
	list := &cobra.Command{
		Use: "list", Short: "List Namespaces", Args: cobra.NoArgs,
		Example: "  occ namespace list\n  occ ns list -o name\n  occ ns list --watch",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.show(cmd, watchList, func(ctx context.Context) (any, func() table, error) {
				nss, err := a.client().Namespaces(ctx)
				return nss, func() table { return namespaceTable(nss...) }, err
			})
		},
	}
	addWatch(list, &watchList)
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a Namespace", Args: cobra.ExactArgs(1),
		Example:           "  occ namespace get team\n  occ ns get team -o yaml",
		ValidArgsFunction: a.complete(namespaceNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd, watchGet, func(ctx context.Context) (any, func() table, error) {
				ns, err := a.client().Namespace(ctx, args[0])
				return ns, func() table { return namespaceTable(ns) }, err
			})
		},
	}
	addWatch(get, &watchGet)
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a Namespace", Args: cobra.ExactArgs(1),
		Example: "  occ namespace create team\n  occ namespace create team --dry-run=server",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ns, err := a.client().CreateNamespace(ctx, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ns, func() table { return namespaceTable(ns) })
		},
	}
	a.addDryRun(create)
	c.AddCommand(create, list, get, a.setQuotaCmd(), &cobra.Command{
		Use: "delete NAME", Short: "Delete an empty Namespace (refused while it holds Agents or Configurations)",
		Args: cobra.ExactArgs(1), Example: "  occ namespace delete team",
		ValidArgsFunction: a.complete(namespaceNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ns, err := a.client().DeleteNamespace(ctx, args[0])
			if err != nil {
				return err
			}
			return a.printDeleted(cmd, ns, "namespace/"+ns.Name)
		},
	})
	return c
}

// printDeleted confirms a delete like kubectl (`kind/name deleted`), or
// prints the deleted resource in a structured format.
func (a *app) printDeleted(cmd *cobra.Command, v any, name string) error {
	if f := a.settings.Output; f == outTable || f == outWide {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), name, "deleted")
		return err
	}
	return a.print(cmd.OutOrStdout(), v, func() table { return table{names: []string{name}} })
}

// setQuotaCmd is `occ namespace set-quota`.
func (a *app) setQuotaCmd() *cobra.Command {
	var q wire.NamespaceQuota
	var clear bool
	c := &cobra.Command{
		Use: "set-quota NAME", Short: "Bound a Namespace's Agents: count, CPU and memory limits, storage (cluster administrators)",
		Long: `Sets the Namespace's quota, replacing the previous one: a deploy that would pass a bound is refused
with QUOTA_EXCEEDED naming it. --agents counts the Agents deployed at least once and not deleted; --cpu
and --memory the container limits of the Agents that run or are being deployed; --storage their claims.
On Kubernetes the quota also becomes a ResourceQuota and a LimitRange in the Namespace's namespaces.`,
		Args: cobra.ExactArgs(1), ValidArgsFunction: a.complete(namespaceNames),
		Example: "  occ namespace set-quota team --agents 5 --cpu 16 --memory 32Gi --storage 500Gi\n  occ namespace set-quota team --clear",
		RunE: func(cmd *cobra.Command, args []string) error {
			if clear && q != (wire.NamespaceQuota{}) {
				return usageError(fmt.Errorf("--clear takes no bounds"))
			}
			if !clear && q == (wire.NamespaceQuota{}) {
				return usageError(fmt.Errorf("name at least one bound (--agents, --cpu, --memory, --storage) or --clear"))
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ns, err := a.client().SetNamespaceQuota(ctx, args[0], q)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), ns, func() table { return namespaceTable(ns) })
		},
	}
	fl := c.Flags()
	fl.Int64Var(&q.Agents, "agents", 0, "most Agents deployed at once (0: unbounded)")
	fl.StringVar(&q.CPU, "cpu", "", "CPU limits of the running Agents, a quantity (16, 2500m)")
	fl.StringVar(&q.Memory, "memory", "", "memory limits of the running Agents, a quantity (32Gi)")
	fl.StringVar(&q.Storage, "storage", "", "claims of the deployed Agents, a quantity (500Gi)")
	fl.BoolVar(&clear, "clear", false, "remove the quota")
	return c
}

// quotaText renders a quota for tables ("-" when none).
func quotaText(q *wire.NamespaceQuota) string {
	if q == nil {
		return "-"
	}
	var parts []string
	if q.Agents > 0 {
		parts = append(parts, fmt.Sprintf("agents=%d", q.Agents))
	}
	for _, kv := range [][2]string{{"cpu", q.CPU}, {"memory", q.Memory}, {"storage", q.Storage}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, ",")
}

func namespaceTable(nss ...wire.Namespace) table {
	t := table{header: []string{"NAME", "CREATED", "QUOTA", "ID"}, wide: wideCols(2, 3)}
	for _, ns := range nss {
		t.rows = append(t.rows, []string{ns.Name, ts(ns.CreatedAt), quotaText(ns.Quota), ns.ID})
		t.names = append(t.names, "namespace/"+ns.Name)
	}
	return t
}

// docInputHelp is what config create and update say about bad input.
const docInputHelp = "A document that does not parse, or is not an object, is refused before anything is sent with exit 2,\n" +
	"naming the file (or stdin), the line and the column: invalid JSON in chat.json at line 4, column 3: …"

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
	name := inputName(path)
	// A Configuration is a JSON object: check it here, where the error can
	// name the line and column.
	var obj map[string]json.RawMessage
	t := strings.TrimSpace(string(data))
	if t == "" {
		return nil, usageError(fmt.Errorf("document %s is empty", name))
	}
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		if err := decodeJSONInput(name, data, &obj, "an object"); err != nil {
			return nil, err
		}
		return json.RawMessage(data), nil
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		// sigs.k8s.io/yaml's errors carry the line ("yaml: line 3: …").
		return nil, usageError(fmt.Errorf("document %s is neither JSON nor YAML: %w", name, err))
	}
	if json.Unmarshal(j, &obj) != nil || obj == nil {
		return nil, usageError(fmt.Errorf("document %s is not a YAML mapping (a JSON object)", name))
	}
	return j, nil
}

func (a *app) configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Aliases: []string{"configuration"}, Short: "Save, inspect and delete native OpenClaw Configurations",
		Example: "  occ config create chat -f scripts/demo/embedded.json\n  occ config list"}
	var file string
	create := &cobra.Command{
		Use: "create NAME -f FILE", Short: "Save a new Configuration", Args: cobra.ExactArgs(1),
		Long:    "create saves a native OpenClaw configuration document (a JSON object, or a YAML mapping) under NAME.\n" + docInputHelp,
		Example: "  occ config create chat -f scripts/demo/embedded.json\n  cat doc.yaml | occ config create chat -f -",
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
	a.addDryRun(create)
	var ufile string
	update := &cobra.Command{
		Use: "update NAME -f FILE", Short: "Replace a Configuration's document (next generation)", Args: cobra.ExactArgs(1),
		Long:              "update replaces the Configuration's document; Agents use it from their next deploy.\n" + docInputHelp,
		Example:           "  occ config update chat -f scripts/demo/embedded.json",
		ValidArgsFunction: a.complete(configNames),
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
	a.addDryRun(update)
	var watchGet, watchList bool
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a Configuration and its document", Args: cobra.ExactArgs(1),
		Example:           "  occ config get chat\n  occ config get chat -o jsonpath='{.document.agents}'",
		ValidArgsFunction: a.complete(configNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd, watchGet, func(ctx context.Context) (any, func() table, error) {
				cf, err := a.client().Configuration(ctx, a.settings.Namespace, args[0])
				return cf, func() table {
					// The document is the point of get: the table shows it too.
					t := configTable(cf)
					var doc bytes.Buffer
					if json.Indent(&doc, cf.Document, "", "  ") == nil {
						t.trailer = doc.String() + "\n"
					}
					return t
				}, err
			})
		},
	}
	addWatch(get, &watchGet)
	list := &cobra.Command{
		Use: "list", Short: "List the Namespace's Configurations", Args: cobra.NoArgs,
		Example: "  occ config list\n  occ config list -o wide",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.show(cmd, watchList, func(ctx context.Context) (any, func() table, error) {
				cfs, err := a.client().Configurations(ctx, a.settings.Namespace)
				return cfs, func() table { return configTable(cfs...) }, err
			})
		},
	}
	addWatch(list, &watchList)
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a Configuration no Agent uses (refused while one does)", Args: cobra.ExactArgs(1),
		Example:           "  occ config delete chat",
		ValidArgsFunction: a.complete(configNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cf, err := a.client().DeleteConfiguration(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.printDeleted(cmd, cf, "config/"+cf.Name)
		},
	}
	c.AddCommand(create, update, get, list, del)
	return c
}

func configTable(cfs ...wire.Configuration) table {
	t := table{header: []string{"NAME", "GENERATION", "UPDATED", "ID", "DOCUMENT BYTES"}, wide: wideCols(3, 4)}
	for _, c := range cfs {
		t.rows = append(t.rows, []string{c.Name, itoa(c.Generation), ts(c.UpdatedAt), c.ID, fmt.Sprint(len(c.Document))})
		t.names = append(t.names, "config/"+c.Name)
	}
	return t
}

func (a *app) revisionsCmd() *cobra.Command {
	var watch bool
	c := &cobra.Command{
		Use: "revisions AGENT [REVISION]", Short: "List an Agent's revisions, or show one (by number or id)",
		Args:              cobra.RangeArgs(1, 2),
		Example:           "  occ revisions hello\n  occ revisions hello 2 -o yaml\n  occ revisions hello -o wide --watch",
		ValidArgsFunction: a.complete(agentNames, revisionNumbers),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd, watch, func(ctx context.Context) (any, func() table, error) {
				cl := a.client()
				ag, err := cl.Agent(ctx, a.settings.Namespace, args[0])
				if err != nil {
					return nil, nil, err
				}
				if len(args) == 2 {
					rev, err := cl.Revision(ctx, a.settings.Namespace, args[0], args[1])
					return rev, func() table { return revisionTable(ag.ActiveRevisionID, rev) }, err
				}
				revs, err := cl.Revisions(ctx, a.settings.Namespace, args[0])
				return revs, func() table { return revisionTable(ag.ActiveRevisionID, revs...) }, err
			})
		},
	}
	addWatch(c, &watch)
	return c
}

func revisionTable(active string, revs ...wire.Revision) table {
	t := table{header: []string{"NUMBER", "STATUS", "HARNESS", "MODE", "FAILURE", "ACTIVE", "CREATED", "ID", "GENERATION", "COMPUTE"},
		wide: wideCols(7, 8, 9)}
	for _, r := range revs {
		act := ""
		if r.ID == active {
			act = "*"
		}
		t.rows = append(t.rows, []string{itoa(r.Number), r.Status, r.Harness.ID + "@" + r.Harness.Version, r.Mode,
			dash(r.FailureCode), act, ts(r.CreatedAt), r.ID, itoa(r.ConfigurationGeneration), dash(r.ComputeID)})
		t.names = append(t.names, "revision/"+itoa(r.Number))
	}
	return t
}

func (a *app) installationCmd() *cobra.Command {
	return &cobra.Command{
		Use: "installation", Short: "Show the runtimes Agents of this installation can deploy in", Args: cobra.NoArgs,
		Long: "installation lists every runtime an Agent can deploy in here — embedded OpenClaw, dedicated Codex,\n" +
			"dedicated OpenClaw — as the compute driver runs them, with the harnessAuth methods it delivers for\n" +
			"each; native worker support and a Sandbox driver outage follow the table.",
		Example: "  occ installation\n  occ installation -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			inst, err := a.client().Installation(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), inst, func() table { return installationTable(inst) })
		},
	}
}

// harnessNames spells harness ids for people.
var harnessNames = map[string]string{wire.HarnessOpenClaw: "OpenClaw", wire.HarnessCodex: "Codex"}

// installationTable has a row per runtime; an older coordinator that lists
// no runtimes gets rows from its OpenClaw execution modes.
func installationTable(inst wire.Installation) table {
	caps := inst.Capabilities
	driver, auth := "-", "-"
	if c := inst.Compute; c != nil {
		driver, auth = dash(c.Driver), dash(strings.Join(c.HarnessAuth, ","))
	}
	rts := caps.Runtimes
	if rts == nil {
		for _, m := range caps.OpenClaw.ExecutionModes {
			rts = append(rts, wire.RuntimeCapability{Harness: wire.HarnessOpenClaw, Mode: m})
		}
	}
	t := table{header: []string{"RUNTIME", "HARNESS", "MODE", "COMPUTE", "HARNESS AUTH"}, wide: wideCols(1, 2),
		names: []string{"installation/" + driver}}
	for _, r := range rts {
		name := harnessNames[r.Harness]
		if name == "" {
			name = r.Harness
		}
		ra := auth
		if r.HarnessAuth != nil {
			ra = strings.Join(r.HarnessAuth, ",")
		}
		t.rows = append(t.rows, []string{r.Mode + " " + name, r.Harness, r.Mode, driver, ra})
	}
	if len(rts) == 0 {
		t.trailer = "No runtime: this installation's compute driver runs no Agent.\n"
	}
	if nw := caps.NativeWorkers; nw != nil {
		t.trailer += "Native workers: " + nw.Support + "\n"
	}
	if inst.SandboxDriverUnavailable {
		t.trailer += "Sandbox driver: unavailable (dedicated OpenClaw cannot deploy until it is back)\n"
	}
	return t
}
