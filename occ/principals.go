package occ

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

func (a *app) userCmd() *cobra.Command {
	c := &cobra.Command{Use: "user", Short: "Local users (cluster-admin)",
		Example: "  occ user create alice --group platform\n  occ user list"}
	var groups []string
	create := &cobra.Command{Use: "create NAME", Short: "Create a user", Args: cobra.ExactArgs(1),
		Example: "  occ user create alice --group platform",
		RunE: func(cmd *cobra.Command, args []string) error {
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) (wire.User, error) {
				return c.CreateUser(ctx, wire.CreateUser{Name: args[0], Groups: groups})
			}, one(userTable))
		}}
	create.Flags().StringArrayVar(&groups, "group", nil, "a group the user belongs to (repeatable)")
	list := &cobra.Command{Use: "list", Short: "List users", Args: cobra.NoArgs, Example: "  occ user list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callPrint(a, cmd, (*client.Client).Users, userTable)
		}}
	c.AddCommand(create, list, deleteCmd(a, "delete NAME", "Delete a user with its tokens and role bindings",
		"  occ user delete alice", "user", (*client.Client).DeleteUser))
	return c
}

func userTable(us []wire.User) table {
	t := table{header: []string{"NAME", "GROUPS", "CREATED"}}
	for _, u := range us {
		t.rows = append(t.rows, []string{u.Name, dash(strings.Join(u.Groups, ",")), ts(u.CreatedAt)})
	}
	return t
}

func (a *app) servicePrincipalCmd() *cobra.Command {
	c := &cobra.Command{Use: "serviceprincipal", Aliases: []string{"sp"}, Short: "Service principals of a namespace",
		Example: "  occ -n team serviceprincipal create ci\n  occ -n team sp list"}
	create := &cobra.Command{Use: "create NAME", Short: "Create a service principal", Args: cobra.ExactArgs(1),
		Example: "  occ -n team serviceprincipal create ci",
		RunE: func(cmd *cobra.Command, args []string) error {
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) (wire.ServicePrincipal, error) {
				return c.CreateServicePrincipal(ctx, a.settings.Namespace, args[0])
			}, one(spTable))
		}}
	list := &cobra.Command{Use: "list", Short: "List service principals", Args: cobra.NoArgs,
		Example: "  occ -n team serviceprincipal list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) ([]wire.ServicePrincipal, error) {
				return c.ServicePrincipals(ctx, a.settings.Namespace)
			}, spTable)
		}}
	del := deleteCmd(a, "delete NAME", "Delete a service principal no Agent uses", "  occ -n team serviceprincipal delete ci",
		"service principal", func(c *client.Client, ctx context.Context, name string) (wire.ServicePrincipal, error) {
			return c.DeleteServicePrincipal(ctx, a.settings.Namespace, name)
		})
	c.AddCommand(create, list, del)
	return c
}

func spTable(sps []wire.ServicePrincipal) table {
	t := table{header: []string{"NAME", "AGENT", "CREATED", "AGENT ID"}, wide: wideCols(3)}
	for _, sp := range sps {
		// The Agent by name; a short id only from a coordinator that sends no name.
		agent := sp.Agent
		if agent == "" && sp.AgentID != "" {
			agent = short(sp.AgentID)
		}
		t.rows = append(t.rows, []string{sp.Name, dash(agent), ts(sp.CreatedAt), dash(sp.AgentID)})
	}
	return t
}
