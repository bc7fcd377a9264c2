package occ

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// auditExportPage is the page size of occ audit export (the API's most).
const auditExportPage = 1000

// auditExportCmd writes every audit record the caller may view, in Seq
// order, as JSON lines: what the coordinator exports before it prunes
// (docs/OPERATIONS.md "Audit retention"), on demand.
func (a *app) auditExportCmd() *cobra.Command {
	var f client.AuditFilter
	var out string
	c := &cobra.Command{
		Use: "export", Short: "Write audit records as JSON lines (to a 0600 file with --out)", Args: cobra.NoArgs,
		Example: "  occ audit export --out audit.jsonl\n  occ audit export --after 41000 > newer.jsonl",
		RunE: func(cmd *cobra.Command, _ []string) error {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			n := 0
			for {
				f.Limit = auditExportPage
				recs, err := call(a, cmd, func(c *client.Client, ctx context.Context) ([]wire.AuditRecord, error) {
					return c.AuditQuery(ctx, f)
				})
				if err != nil {
					return err
				}
				for _, r := range recs {
					if err := enc.Encode(r); err != nil {
						return err
					}
					f.After = r.Seq
				}
				n += len(recs)
				if len(recs) < auditExportPage {
					break
				}
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := writeSecretFile(out, buf.Bytes()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d audit records written to %s\n", n, out)
			return nil
		}}
	fl := c.Flags()
	fl.Int64Var(&f.After, "after", 0, "only records with a sequence number above this")
	fl.StringVar(&f.Actor, "actor", "", "only this actor's records")
	fl.StringVar(&f.Action, "action", "", "only this action")
	fl.StringVar(&out, "out", "", "write to this file (created 0600; a symbolic link is refused) instead of standard output")
	return c
}
