package occ

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
)

// accessCmds are the identity and authorization commands, one tree a file:
// contexts.go, login.go (login, whoami), tokens.go, principals.go (user,
// serviceprincipal), rolebindings.go, restrictions.go.
func (a *app) accessCmds() []*cobra.Command {
	return []*cobra.Command{a.contextCmd(), a.loginCmd(), a.whoamiCmd(), a.tokenCmd(), a.userCmd(),
		a.servicePrincipalCmd(), a.roleBindingCmd(), a.restrictionCmd()}
}

// call runs one coordinator request within the command's deadline. req is
// usually a client method expression, (*client.Client).Users.
func call[T any](a *app, cmd *cobra.Command, req func(*client.Client, context.Context) (T, error)) (T, error) {
	ctx, cancel := a.ctx(cmd)
	defer cancel()
	return req(a.client(), ctx)
}

// callPrint runs one request and prints its result (as tbl's table when the
// output is one).
func callPrint[T any](a *app, cmd *cobra.Command, req func(*client.Client, context.Context) (T, error), tbl func(T) table) error {
	v, err := call(a, cmd, req)
	if err != nil {
		return err
	}
	return a.print(cmd.OutOrStdout(), v, func() table { return tbl(v) })
}

// one adapts a table of many results to one result.
func one[T any](tbl func([]T) table) func(T) table {
	return func(v T) table { return tbl([]T{v}) }
}

// deleteCmd is a tree's "delete NAME": it deletes the named object and says
// "<what> NAME deleted".
func deleteCmd[T any](a *app, use, short, example, what string, del func(*client.Client, context.Context, string) (T, error)) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Example: example, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := call(a, cmd, func(c *client.Client, ctx context.Context) (T, error) { return del(c, ctx, args[0]) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s deleted\n", what, args[0])
			return nil
		}}
}
