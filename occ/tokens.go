package occ

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

func (a *app) tokenCmd() *cobra.Command {
	c := &cobra.Command{Use: "token", Short: "API tokens: create (shown once), list, revoke, rotate",
		Example: "  occ token create\n  occ token list"}
	c.AddCommand(a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd(), a.tokenRotateCmd())
	return c
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var req wire.CreateToken
	var outFile string
	c := &cobra.Command{Use: "create", Short: "Mint a token (your own, a user's or a service principal's)", Args: cobra.NoArgs,
		Example: "  occ token create",
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := call(a, cmd, func(c *client.Client, ctx context.Context) (wire.MintedToken, error) { return c.CreateToken(ctx, req) })
			if err != nil {
				return err
			}
			return a.showToken(cmd.OutOrStdout(), m, outFile)
		}}
	f := c.Flags()
	f.StringVar(&req.User, "user", "", "the user the token authenticates")
	f.StringVar(&req.ServicePrincipal, "service-principal", "", "the service principal (<namespace>/<name>) the token authenticates")
	f.StringVar(&req.Name, "name", "", "a note naming the token's use")
	f.StringVar(&req.TTL, "ttl", "", "lifetime (default 720h, at most 8784h)")
	tokenOutFlag(c, &outFile, "the token")
	return c
}

// tokenOutFlag is --out of the commands that mint a token.
func tokenOutFlag(c *cobra.Command, outFile *string, what string) {
	c.Flags().StringVar(outFile, "out", "", "write "+what+" to this file (mode 0600) instead of printing it")
}

func (a *app) tokenListCmd() *cobra.Command {
	var user, sp string
	c := &cobra.Command{Use: "list", Short: "List token records (never the tokens)", Args: cobra.NoArgs,
		Example: "  occ token list\n  occ token list --user alice",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) ([]wire.Token, error) {
				return c.Tokens(ctx, user, sp)
			}, tokenTable)
		}}
	c.Flags().StringVar(&user, "user", "", "only this user's tokens")
	c.Flags().StringVar(&sp, "service-principal", "", "only this service principal's tokens (<namespace>/<name>)")
	return c
}

func tokenTable(toks []wire.Token) table {
	t := table{header: []string{"ID", "PRINCIPAL", "NAME", "EXPIRES", "STATE"}}
	for _, k := range toks {
		st := "active"
		switch {
		case !k.RevokedAt.IsZero():
			st = "revoked"
		case time.Now().After(k.ExpiresAt):
			st = "expired"
		}
		t.rows = append(t.rows, []string{k.ID, k.PrincipalKind + ":" + k.Principal, dash(k.Name), ts(k.ExpiresAt), st})
	}
	return t
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	return &cobra.Command{Use: "revoke ID", Short: "Revoke a token", Args: cobra.ExactArgs(1),
		Example: "  occ token revoke 3f9c…",
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := call(a, cmd, func(c *client.Client, ctx context.Context) (wire.Token, error) { return c.RevokeToken(ctx, args[0]) })
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", t.ID)
			return nil
		}}
}

func (a *app) tokenRotateCmd() *cobra.Command {
	var ttl, outFile string
	c := &cobra.Command{Use: "rotate ID", Short: "Mint a successor of a token and revoke it", Args: cobra.ExactArgs(1),
		Example: "  occ token rotate 3f9c… --ttl 720h",
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := call(a, cmd, func(c *client.Client, ctx context.Context) (wire.MintedToken, error) {
				return c.RotateToken(ctx, args[0], ttl)
			})
			if err != nil {
				return err
			}
			return a.showToken(cmd.OutOrStdout(), m, outFile)
		}}
	c.Flags().StringVar(&ttl, "ttl", "", "lifetime of the new token (default 720h)")
	tokenOutFlag(c, &outFile, "the new token")
	return c
}

// showToken prints a minted token once, or writes it to a 0600 file.
func (a *app) showToken(w io.Writer, m wire.MintedToken, outFile string) error {
	if outFile != "" {
		if err := writeSecretFile(outFile, []byte(m.Token+"\n")); err != nil {
			return err
		}
		fmt.Fprintf(w, "token %s for %s:%s written to %s (expires %s)\n", m.Record.ID, m.Record.PrincipalKind,
			m.Record.Principal, outFile, ts(m.Record.ExpiresAt))
		return nil
	}
	if a.settings.Output != "table" {
		return a.print(w, m, nil)
	}
	fmt.Fprintf(w, "%s\n# token %s for %s:%s, expires %s; it is shown only now\n", m.Token, m.Record.ID,
		m.Record.PrincipalKind, m.Record.Principal, ts(m.Record.ExpiresAt))
	return nil
}
