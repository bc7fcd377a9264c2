package occ

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

func (a *app) restrictionCmd() *cobra.Command {
	c := &cobra.Command{Use: "restriction", Short: "Restrictions: Cedar forbid policies over every decision (cluster-admin)",
		Example: "  occ restriction apply no-codex -f no-codex.cedar\n  occ restriction list"}
	list := &cobra.Command{Use: "list", Short: "List Restrictions", Args: cobra.NoArgs, Example: "  occ restriction list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callPrint(a, cmd, (*client.Client).Restrictions, restrictionTable)
		}}
	c.AddCommand(a.restrictionApplyCmd(), list, deleteCmd(a, "delete NAME", "Remove a Restriction",
		"  occ restriction delete no-codex", "restriction", (*client.Client).DeleteRestriction))
	return c
}

func (a *app) restrictionApplyCmd() *cobra.Command {
	var file string
	c := &cobra.Command{Use: "apply NAME", Short: "Create or replace a Restriction from a Cedar policy file", Args: cobra.ExactArgs(1),
		Example: "  occ restriction apply no-codex -f no-codex.cedar",
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := a.readText(file)
			if err != nil {
				return err
			}
			r, err := call(a, cmd, func(c *client.Client, ctx context.Context) (wire.Restriction, error) {
				return c.PutRestriction(ctx, args[0], text)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restriction %s applied\n", r.Name)
			return nil
		}}
	c.Flags().StringVarP(&file, "file", "f", "", "Cedar policy file, '-' for stdin")
	_ = c.MarkFlagRequired("file")
	return c
}

func restrictionTable(rs []wire.Restriction) table {
	t := table{header: []string{"NAME", "UPDATED", "BY", "POLICIES"}}
	for _, r := range rs {
		t.rows = append(t.rows, []string{r.Name, ts(r.UpdatedAt), dash(r.CreatedBy), itoa(int64(strings.Count(r.Policy, "forbid")))})
	}
	return t
}

// readText reads a text file, '-' meaning stdin.
func (a *app) readText(path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(a.opts.Stdin, 1<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	return string(b), err
}
