package occ

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
)

// contextCmd manages occ.yaml's contexts; it needs no coordinator.
func (a *app) contextCmd() *cobra.Command {
	c := &cobra.Command{Use: "context", Short: "Named coordinators in occ.yaml (server, CA, TLS server name, token file, namespace)",
		Example:           "  occ context set prod --server https://oce.example:7400 --ca-file ca.pem\n  occ context use prod",
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil }}
	c.AddCommand(a.contextListCmd(), a.contextUseCmd(), a.contextSetCmd())
	return c
}

// loadContexts reads occ.yaml and says where it is.
func (a *app) loadContexts() (FileConfig, string, error) {
	p := a.configPath()
	fc, err := loadFileConfig(p)
	return fc, p, err
}

func (a *app) contextListCmd() *cobra.Command {
	return &cobra.Command{Use: "list", Short: "List the contexts", Args: cobra.NoArgs, Example: "  occ context list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, _, err := a.loadContexts()
			if err != nil {
				return err
			}
			a.settings.Output = first(a.output, fc.Output, "table")
			return a.print(cmd.OutOrStdout(), fc.Contexts, func() table { return contextTable(fc) })
		}}
}

func contextTable(fc FileConfig) table {
	t := table{header: []string{"CURRENT", "NAME", "SERVER", "NAMESPACE", "CA", "TOKEN FILE", "TLS SERVER NAME"}, wide: wideCols(6)}
	for _, c := range fc.Contexts {
		cur := ""
		if c.Name == fc.CurrentContext {
			cur = "*"
		}
		t.rows = append(t.rows, []string{cur, c.Name, dash(c.Server), dash(c.Namespace), dash(c.CAFile), dash(c.TokenFile),
			dash(c.TLSServerName)})
	}
	return t
}

func (a *app) contextUseCmd() *cobra.Command {
	return &cobra.Command{Use: "use NAME", Short: "Make a context the current one", Args: cobra.ExactArgs(1),
		Example: "  occ context use prod",
		RunE: func(cmd *cobra.Command, args []string) error {
			fc, p, err := a.loadContexts()
			if err != nil {
				return err
			}
			if _, ok := fc.context(args[0]); !ok {
				return fmt.Errorf("no context %q in %s", args[0], p)
			}
			fc.CurrentContext = args[0]
			if err := saveFileConfig(p, fc); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "using context %s\n", args[0])
			return nil
		}}
}

func (a *app) contextSetCmd() *cobra.Command {
	var set Context
	c := &cobra.Command{Use: "set NAME", Short: "Create or change a context (only the given fields change)", Args: cobra.ExactArgs(1),
		Example: "  occ context set prod --server https://oce.example:7400 --ca-file ca.pem --namespace team\n" +
			"  occ context set kind --server https://127.0.0.1:8443 --ca-file ca.crt --tls-server-name oce-coordinator-api.oce-system.svc",
		RunE: func(cmd *cobra.Command, args []string) error {
			fc, p, err := a.loadContexts()
			if err != nil {
				return err
			}
			ctx, ok := fc.context(args[0])
			if !ok {
				fc.Contexts = append(fc.Contexts, Context{Name: args[0]})
				ctx = &fc.Contexts[len(fc.Contexts)-1]
			}
			if err := set.applyTo(ctx); err != nil {
				return err
			}
			if err := checkTLSServerName(ctx.TLSServerName, ctx.Server); err != nil {
				return usageError(err)
			}
			if fc.CurrentContext == "" {
				fc.CurrentContext = ctx.Name
			}
			if err := saveFileConfig(p, fc); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %s saved in %s\n", ctx.Name, p)
			return nil
		}}
	f := c.Flags()
	f.StringVar(&set.Server, "server", "", "coordinator URL")
	f.StringVar(&set.CAFile, "ca-file", "", "CA bundle that signed the coordinator's certificate")
	f.StringVar(&set.TokenFile, "token-file", "", "file holding the bearer token")
	f.StringVar(&set.Namespace, "namespace", "", "default namespace")
	f.StringVar(&set.TLSServerName, "tls-server-name", "", "the name checked against the coordinator's certificate (for a port-forward's 127.0.0.1)")
	return c
}

// applyTo changes ctx's fields that set gives, keeping the files' paths
// absolute.
func (set Context) applyTo(ctx *Context) error {
	for _, f := range []struct{ dst, src *string }{{&ctx.Server, &set.Server}, {&ctx.Namespace, &set.Namespace},
		{&ctx.CAFile, &set.CAFile}, {&ctx.TokenFile, &set.TokenFile}, {&ctx.TLSServerName, &set.TLSServerName}} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	for _, f := range []*string{&ctx.CAFile, &ctx.TokenFile} {
		if *f != "" {
			var err error
			if *f, err = filepath.Abs(*f); err != nil {
				return err
			}
		}
	}
	return nil
}
