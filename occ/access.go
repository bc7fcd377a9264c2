package occ

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
)

// accessCmds are the identity and authorization commands.
func (a *app) accessCmds() []*cobra.Command {
	cmds := []*cobra.Command{a.contextCmd(), a.loginCmd(), a.whoamiCmd(), a.tokenCmd(), a.userCmd(),
		a.servicePrincipalCmd(), a.roleBindingCmd(), a.restrictionCmd()}
	for _, c := range cmds {
		withExamples(c, "")
	}
	return cmds
}

// accessExamples are the help examples of the access commands, by their
// path below occ.
var accessExamples = map[string]string{
	"context":                 "  occ context set prod --server https://oce.example:7400 --ca-file ca.pem\n  occ context use prod",
	"context list":            "  occ context list",
	"context set":             "  occ context set prod --server https://oce.example:7400 --ca-file ca.pem --namespace team",
	"context use":             "  occ context use prod",
	"login":                   "  occ login                       # OIDC device login when the coordinator names an issuer\n  occ login --token-file token",
	"whoami":                  "  occ whoami\n  occ whoami -o json",
	"token":                   "  occ token create\n  occ token list",
	"token create":            "  occ token create",
	"token list":              "  occ token list\n  occ token list --user alice",
	"token revoke":            "  occ token revoke 3f9c…",
	"token rotate":            "  occ token rotate 3f9c… --ttl 720h",
	"user":                    "  occ user create alice --group platform\n  occ user list",
	"user create":             "  occ user create alice --group platform",
	"user list":               "  occ user list",
	"user delete":             "  occ user delete alice",
	"serviceprincipal":        "  occ -n team serviceprincipal create ci\n  occ -n team sp list",
	"serviceprincipal create": "  occ -n team serviceprincipal create ci",
	"serviceprincipal list":   "  occ -n team serviceprincipal list",
	"serviceprincipal delete": "  occ -n team serviceprincipal delete ci",
	"rolebinding":             "  occ -n team rolebinding create --role deployer --user alice\n  occ rolebinding list",
	"rolebinding create":      "  occ -n team rolebinding create --role deployer --user alice\n  occ rolebinding create --role cluster-admin --group oidc:ops --cluster",
	"rolebinding list":        "  occ rolebinding list",
	"rolebinding delete":      "  occ rolebinding delete 7a1e…",
	"restriction":             "  occ restriction apply no-codex -f no-codex.cedar\n  occ restriction list",
	"restriction apply":       "  occ restriction apply no-codex -f no-codex.cedar",
	"restriction list":        "  occ restriction list",
	"restriction delete":      "  occ restriction delete no-codex",
}

// withExamples sets, down c's tree, the examples accessExamples names.
func withExamples(c *cobra.Command, parent string) {
	path := strings.TrimSpace(parent + " " + c.Name())
	if ex, ok := accessExamples[path]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, sub := range c.Commands() {
		withExamples(sub, path)
	}
}

// contextCmd manages occ.yaml's contexts; it needs no coordinator.
func (a *app) contextCmd() *cobra.Command {
	c := &cobra.Command{Use: "context", Short: "Named coordinators in occ.yaml (server, CA, token file, namespace)",
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil }}
	load := func() (FileConfig, string, error) {
		p := a.configPath()
		fc, err := loadFileConfig(p)
		return fc, p, err
	}
	list := &cobra.Command{Use: "list", Short: "List the contexts", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, _, err := load()
			if err != nil {
				return err
			}
			a.settings.Output = first(a.output, fc.Output, "table")
			return a.print(cmd.OutOrStdout(), fc.Contexts, func() table {
				t := table{header: []string{"CURRENT", "NAME", "SERVER", "NAMESPACE", "CA", "TOKEN FILE"}}
				for _, c := range fc.Contexts {
					cur := ""
					if c.Name == fc.CurrentContext {
						cur = "*"
					}
					t.rows = append(t.rows, []string{cur, c.Name, dash(c.Server), dash(c.Namespace), dash(c.CAFile), dash(c.TokenFile)})
				}
				return t
			})
		}}
	use := &cobra.Command{Use: "use NAME", Short: "Make a context the current one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fc, p, err := load()
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
	var set Context
	setCmd := &cobra.Command{Use: "set NAME", Short: "Create or change a context (only the given fields change)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fc, p, err := load()
			if err != nil {
				return err
			}
			ctx, ok := fc.context(args[0])
			if !ok {
				fc.Contexts = append(fc.Contexts, Context{Name: args[0]})
				ctx = &fc.Contexts[len(fc.Contexts)-1]
			}
			for _, f := range []struct{ dst, src *string }{{&ctx.Server, &set.Server}, {&ctx.Namespace, &set.Namespace},
				{&ctx.CAFile, &set.CAFile}, {&ctx.TokenFile, &set.TokenFile}} {
				if *f.src != "" {
					*f.dst = *f.src
				}
			}
			for _, f := range []*string{&ctx.CAFile, &ctx.TokenFile} {
				if *f != "" {
					if *f, err = filepath.Abs(*f); err != nil {
						return err
					}
				}
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
	f := setCmd.Flags()
	f.StringVar(&set.Server, "server", "", "coordinator URL")
	f.StringVar(&set.CAFile, "ca-file", "", "CA bundle that signed the coordinator's certificate")
	f.StringVar(&set.TokenFile, "token-file", "", "file holding the bearer token")
	f.StringVar(&set.Namespace, "namespace", "", "default namespace")
	c.AddCommand(list, use, setCmd)
	return c
}

// loginCmd records a token file in the current context after checking it,
// or gets an OIDC token with the device grant when no file is given.
func (a *app) loginCmd() *cobra.Command {
	var tokenFile string
	c := &cobra.Command{Use: "login", Short: "Log in: check a token file, or get an OIDC token (device grant), and keep it in the context",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			out := cmd.OutOrStdout()
			if tokenFile == "" {
				tok, err := a.deviceLogin(ctx, out)
				if err != nil {
					return err
				}
				if tokenFile, err = a.saveLoginToken(tok); err != nil {
					return err
				}
			} else if tokenFile != "-" {
				var err error
				if tokenFile, err = filepath.Abs(tokenFile); err != nil {
					return err
				}
			}
			tok, err := a.readToken(tokenFile)
			if err != nil {
				return err
			}
			a.settings.Token = tok
			who, err := a.client().WhoAmI(ctx)
			if err != nil {
				return fmt.Errorf("the coordinator refused the token: %w", err)
			}
			if tokenFile == "-" {
				if tokenFile, err = a.saveLoginToken(tok); err != nil {
					return err
				}
			}
			if err := a.rememberToken(tokenFile); err != nil {
				return err
			}
			fmt.Fprintf(out, "logged in as %s\n", who.Actor)
			return nil
		}}
	c.Flags().StringVar(&tokenFile, "token-file", "", "file holding the token, '-' for stdin (default: an OIDC device login when the coordinator names an issuer)")
	return c
}

// saveLoginToken keeps a token occ received in a 0600 file of its own.
func (a *app) saveLoginToken(tok string) (string, error) {
	dir := filepath.Join(filepath.Dir(a.configPath()), "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := first(a.settings.Context, "default")
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(tok+"\n"), 0o600)
}

// rememberToken stores the token file in the current context (making a
// "default" context from the resolved settings when there is none).
func (a *app) rememberToken(tokenFile string) error {
	p := a.configPath()
	fc, err := loadFileConfig(p)
	if err != nil {
		return err
	}
	name := first(a.settings.Context, "default")
	ctx, ok := fc.context(name)
	if !ok {
		fc.Contexts = append(fc.Contexts, Context{Name: name, Server: a.settings.Server, CAFile: absOrEmpty(a.settings.CAFile)})
		ctx = &fc.Contexts[len(fc.Contexts)-1]
	}
	ctx.TokenFile = tokenFile
	if fc.CurrentContext == "" {
		fc.CurrentContext = name
	}
	return saveFileConfig(p, fc)
}

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}

func (a *app) whoamiCmd() *cobra.Command {
	return &cobra.Command{Use: "whoami", Short: "Show who the token authenticates", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			who, err := a.client().WhoAmI(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), who, func() table {
				return table{header: []string{"ACTOR", "KIND", "GROUPS"},
					rows: [][]string{{who.Actor, who.Kind, dash(strings.Join(who.Groups, ","))}}}
			})
		}}
}

func (a *app) tokenCmd() *cobra.Command {
	c := &cobra.Command{Use: "token", Short: "API tokens: create (shown once), list, revoke, rotate"}
	var req wire.CreateToken
	var outFile string
	create := &cobra.Command{Use: "create", Short: "Mint a token (your own, a user's or a service principal's)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			m, err := a.client().CreateToken(ctx, req)
			if err != nil {
				return err
			}
			return a.showToken(cmd.OutOrStdout(), m, outFile)
		}}
	f := create.Flags()
	f.StringVar(&req.User, "user", "", "the user the token authenticates")
	f.StringVar(&req.ServicePrincipal, "service-principal", "", "the service principal (<namespace>/<name>) the token authenticates")
	f.StringVar(&req.Name, "name", "", "a note naming the token's use")
	f.StringVar(&req.TTL, "ttl", "", "lifetime (default 720h, at most 8784h)")
	f.StringVar(&outFile, "out", "", "write the token to this file (mode 0600) instead of printing it")
	var user, sp string
	list := &cobra.Command{Use: "list", Short: "List token records (never the tokens)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			toks, err := a.client().Tokens(ctx, user, sp)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), toks, func() table {
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
			})
		}}
	list.Flags().StringVar(&user, "user", "", "only this user's tokens")
	list.Flags().StringVar(&sp, "service-principal", "", "only this service principal's tokens (<namespace>/<name>)")
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			t, err := a.client().RevokeToken(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", t.ID)
			return nil
		}}
	var ttl, rotOut string
	rotate := &cobra.Command{Use: "rotate ID", Short: "Mint a successor of a token and revoke it", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			m, err := a.client().RotateToken(ctx, args[0], ttl)
			if err != nil {
				return err
			}
			return a.showToken(cmd.OutOrStdout(), m, rotOut)
		}}
	rotate.Flags().StringVar(&ttl, "ttl", "", "lifetime of the new token (default 720h)")
	rotate.Flags().StringVar(&rotOut, "out", "", "write the new token to this file (mode 0600) instead of printing it")
	c.AddCommand(create, list, revoke, rotate)
	return c
}

// showToken prints a minted token once, or writes it to a 0600 file.
func (a *app) showToken(w io.Writer, m wire.MintedToken, outFile string) error {
	if outFile != "" {
		if err := os.WriteFile(outFile, []byte(m.Token+"\n"), 0o600); err != nil {
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

func (a *app) userCmd() *cobra.Command {
	c := &cobra.Command{Use: "user", Short: "Local users (cluster-admin)"}
	var groups []string
	create := &cobra.Command{Use: "create NAME", Short: "Create a user", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			u, err := a.client().CreateUser(ctx, wire.CreateUser{Name: args[0], Groups: groups})
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), u, func() table { return userTable(u) })
		}}
	create.Flags().StringArrayVar(&groups, "group", nil, "a group the user belongs to (repeatable)")
	list := &cobra.Command{Use: "list", Short: "List users", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			us, err := a.client().Users(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), us, func() table { return userTable(us...) })
		}}
	del := &cobra.Command{Use: "delete NAME", Short: "Delete a user with its tokens and role bindings", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if _, err := a.client().DeleteUser(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s deleted\n", args[0])
			return nil
		}}
	c.AddCommand(create, list, del)
	return c
}

func userTable(us ...wire.User) table {
	t := table{header: []string{"NAME", "GROUPS", "CREATED"}}
	for _, u := range us {
		t.rows = append(t.rows, []string{u.Name, dash(strings.Join(u.Groups, ",")), ts(u.CreatedAt)})
	}
	return t
}

func (a *app) servicePrincipalCmd() *cobra.Command {
	c := &cobra.Command{Use: "serviceprincipal", Aliases: []string{"sp"}, Short: "Service principals of a namespace"}
	create := &cobra.Command{Use: "create NAME", Short: "Create a service principal", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			sp, err := a.client().CreateServicePrincipal(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), sp, func() table { return spTable(sp) })
		}}
	list := &cobra.Command{Use: "list", Short: "List service principals", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			sps, err := a.client().ServicePrincipals(ctx, a.settings.Namespace)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), sps, func() table { return spTable(sps...) })
		}}
	del := &cobra.Command{Use: "delete NAME", Short: "Delete a service principal no Agent uses", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if _, err := a.client().DeleteServicePrincipal(ctx, a.settings.Namespace, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "service principal %s deleted\n", args[0])
			return nil
		}}
	c.AddCommand(create, list, del)
	return c
}

func spTable(sps ...wire.ServicePrincipal) table {
	t := table{header: []string{"NAME", "AGENT", "CREATED"}}
	for _, sp := range sps {
		t.rows = append(t.rows, []string{sp.Name, short(sp.AgentID), ts(sp.CreatedAt)})
	}
	return t
}

func (a *app) roleBindingCmd() *cobra.Command {
	c := &cobra.Command{Use: "rolebinding", Short: "Grant the built-in roles: viewer, deployer, admin (per namespace), cluster-admin"}
	var role, user, group, sp string
	var cluster bool
	create := &cobra.Command{Use: "create", Short: "Grant a role to a user, group or service principal", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := wire.CreateRoleBinding{Role: role}
			if !cluster {
				req.Namespace = a.settings.Namespace
			}
			switch {
			case user != "" && group == "" && sp == "":
				req.Subject = wire.Subject{Kind: wire.PrincipalUser, Name: user}
			case group != "" && user == "" && sp == "":
				req.Subject = wire.Subject{Kind: wire.SubjectGroup, Name: group}
			case sp != "" && user == "" && group == "":
				req.Subject = wire.Subject{Kind: wire.PrincipalServicePrincipal, Name: req.Namespace + "/" + sp}
			default:
				return usageError(errors.New("name exactly one of --user, --group, --service-principal"))
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			b, err := a.client().CreateRoleBinding(ctx, req)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), b, func() table { return bindingTable(b) })
		}}
	f := create.Flags()
	f.StringVar(&role, "role", "", "viewer, deployer, admin or cluster-admin")
	f.StringVar(&user, "user", "", "a user name (issuer users: oidc:<name>)")
	f.StringVar(&group, "group", "", "a group name (issuer groups: oidc:<name>)")
	f.StringVar(&sp, "service-principal", "", "a service principal of the namespace")
	f.BoolVar(&cluster, "cluster", false, "grant cluster-wide (cluster-admin)")
	list := &cobra.Command{Use: "list", Short: "List the role bindings you may view", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			bs, err := a.client().RoleBindings(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), bs, func() table { return bindingTable(bs...) })
		}}
	del := &cobra.Command{Use: "delete ID", Short: "Remove a role binding", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if _, err := a.client().DeleteRoleBinding(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "role binding %s deleted\n", args[0])
			return nil
		}}
	c.AddCommand(create, list, del)
	return c
}

func bindingTable(bs ...wire.RoleBinding) table {
	t := table{header: []string{"ID", "ROLE", "NAMESPACE", "SUBJECT"}}
	for _, b := range bs {
		t.rows = append(t.rows, []string{b.ID, b.Role, dash(b.Namespace), b.Subject.Kind + ":" + b.Subject.Name})
	}
	return t
}

func (a *app) restrictionCmd() *cobra.Command {
	c := &cobra.Command{Use: "restriction", Short: "Restrictions: Cedar forbid policies over every decision (cluster-admin)"}
	var file string
	apply := &cobra.Command{Use: "apply NAME", Short: "Create or replace a Restriction from a Cedar policy file", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := a.readText(file)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := a.client().PutRestriction(ctx, args[0], text)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restriction %s applied\n", r.Name)
			return nil
		}}
	apply.Flags().StringVarP(&file, "file", "f", "", "Cedar policy file, '-' for stdin")
	_ = apply.MarkFlagRequired("file")
	list := &cobra.Command{Use: "list", Short: "List Restrictions", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			rs, err := a.client().Restrictions(ctx)
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), rs, func() table {
				t := table{header: []string{"NAME", "UPDATED", "BY", "POLICIES"}}
				for _, r := range rs {
					t.rows = append(t.rows, []string{r.Name, ts(r.UpdatedAt), dash(r.CreatedBy), itoa(int64(strings.Count(r.Policy, "forbid")))})
				}
				return t
			})
		}}
	del := &cobra.Command{Use: "delete NAME", Short: "Remove a Restriction", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if _, err := a.client().DeleteRestriction(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restriction %s deleted\n", args[0])
			return nil
		}}
	c.AddCommand(apply, list, del)
	return c
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
