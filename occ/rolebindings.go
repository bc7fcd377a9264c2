package occ

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

func (a *app) roleBindingCmd() *cobra.Command {
	c := &cobra.Command{Use: "rolebinding", Short: "Grant the built-in roles: viewer, deployer, admin (per namespace), cluster-admin, metrics-reader (cluster-wide)",
		Example: "  occ -n team rolebinding create --role deployer --user alice\n  occ rolebinding list"}
	list := &cobra.Command{Use: "list", Short: "List the role bindings you may view", Args: cobra.NoArgs,
		Example: "  occ rolebinding list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callPrint(a, cmd, (*client.Client).RoleBindings, bindingTable)
		}}
	c.AddCommand(a.roleBindingCreateCmd(), list, deleteCmd(a, "delete ID", "Remove a role binding",
		"  occ rolebinding delete 7a1e…", "role binding", (*client.Client).DeleteRoleBinding))
	return c
}

// bindingSubject names who a role binding grants to: exactly one of a
// user, a group or a service principal.
type bindingSubject struct{ user, group, sp string }

func (s bindingSubject) subject(namespace string) (wire.Subject, error) {
	switch {
	case s.user != "" && s.group == "" && s.sp == "":
		return wire.Subject{Kind: wire.PrincipalUser, Name: s.user}, nil
	case s.group != "" && s.user == "" && s.sp == "":
		return wire.Subject{Kind: wire.SubjectGroup, Name: s.group}, nil
	case s.sp != "" && s.user == "" && s.group == "":
		return wire.Subject{Kind: wire.PrincipalServicePrincipal, Name: namespace + "/" + s.sp}, nil
	}
	return wire.Subject{}, usageError(errors.New("name exactly one of --user, --group, --service-principal"))
}

func (a *app) roleBindingCreateCmd() *cobra.Command {
	var role string
	var who bindingSubject
	var cluster bool
	c := &cobra.Command{Use: "create", Short: "Grant a role to a user, group or service principal", Args: cobra.NoArgs,
		Example: "  occ -n team rolebinding create --role deployer --user alice\n  occ rolebinding create --role cluster-admin --group oidc:ops --cluster\n  occ rolebinding create --role metrics-reader --user prometheus --cluster",
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := wire.CreateRoleBinding{Role: role}
			if !cluster {
				req.Namespace = a.settings.Namespace
			}
			var err error
			if req.Subject, err = who.subject(req.Namespace); err != nil {
				return err
			}
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) (wire.RoleBinding, error) {
				return c.CreateRoleBinding(ctx, req)
			}, one(bindingTable))
		}}
	f := c.Flags()
	f.StringVar(&role, "role", "", "viewer, deployer, admin, cluster-admin or metrics-reader")
	f.StringVar(&who.user, "user", "", "a user name (issuer users: oidc:<name>)")
	f.StringVar(&who.group, "group", "", "a group name (issuer groups: oidc:<name>)")
	f.StringVar(&who.sp, "service-principal", "", "a service principal of the namespace")
	f.BoolVar(&cluster, "cluster", false, "grant cluster-wide (cluster-admin, metrics-reader)")
	return c
}

func bindingTable(bs []wire.RoleBinding) table {
	t := table{header: []string{"ID", "ROLE", "NAMESPACE", "SUBJECT"}}
	for _, b := range bs {
		t.rows = append(t.rows, []string{b.ID, b.Role, dash(b.Namespace), b.Subject.Kind + ":" + b.Subject.Name})
	}
	return t
}
