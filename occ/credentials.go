package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/secretfile"
)

// occ credential (alias secret): the credential sources of a Namespace,
// which Agents name in harnessAuth.sourceRef (credential:<name>[#<key>]).
// A value is read from stdin or from a file of mode 0600 or 0400, never
// from the command line (argv is visible to every user of the machine);
// the coordinator never answers it back.

// maxCredentialInput bounds what occ reads for one value.
const maxCredentialInput = wire.MaxCredentialValueBytes + 1

// credentialFlags are the value sources of create and rotate.
type credentialFlags struct {
	key        string
	fromFiles  []string
	fromSecret string
	fromLocal  string
}

func (f *credentialFlags) register(cmd *cobra.Command, values, locations bool) {
	fl := cmd.Flags()
	if values {
		fl.StringVar(&f.key, "key", wire.CredentialValueKey, "the key of the value read from stdin")
		fl.StringArrayVar(&f.fromFiles, "from-file", nil, "[KEY=]FILE: a value from a file of mode 0600 (repeatable; key default: the file's name, or 'value' for one file)")
	}
	if locations {
		fl.StringVar(&f.fromSecret, "from-secret", "", "[K8S-NAMESPACE/]SECRET[#KEY]: copy the value of an existing Kubernetes Secret (cluster-admin; Kubernetes driver)")
		fl.StringVar(&f.fromLocal, "from-local", "", "FILE: copy a file of the local driver's shared secrets directory (cluster-admin; local driver)")
	}
}

// location is the registration location the flags name, "" for none.
func (f *credentialFlags) location() (string, error) {
	switch {
	case f.fromSecret != "" && f.fromLocal != "":
		return "", usageError(errors.New("give one of --from-secret and --from-local"))
	case f.fromSecret != "":
		return "secret:" + f.fromSecret, nil
	case f.fromLocal != "":
		return "local:" + f.fromLocal, nil
	}
	return "", nil
}

// values reads the values: from each --from-file, else one from stdin
// (surrounding whitespace trimmed, as a file's).
func (f *credentialFlags) values(stdin io.Reader) (map[string]string, error) {
	out := map[string]string{}
	if len(f.fromFiles) == 0 {
		b, err := io.ReadAll(io.LimitReader(stdin, maxCredentialInput))
		if err != nil {
			return nil, fmt.Errorf("read the value from stdin: %w", err)
		}
		v := strings.TrimSpace(string(b))
		switch {
		case len(b) >= maxCredentialInput:
			return nil, fmt.Errorf("the value on stdin is larger than %d bytes", wire.MaxCredentialValueBytes)
		case v == "":
			return nil, errors.New("no value on stdin: pipe it in (occ credential create NAME < FILE), or give --from-file")
		}
		out[f.key] = v
		return out, nil
	}
	for _, spec := range f.fromFiles {
		key, path, ok := strings.Cut(spec, "=")
		if !ok {
			key, path = filepath.Base(spec), spec
			if len(f.fromFiles) == 1 {
				key = wire.CredentialValueKey
			}
		}
		v, err := readPrivateFile(path)
		if err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, usageError(fmt.Errorf("key %q is given twice", key))
		}
		out[key] = v
	}
	return out, nil
}

// readPrivateFile reads a value from a regular file of mode 0600 or 0400
// owned by this user or root (shared/secretfile's rule, without group
// access).
func readPrivateFile(path string) (string, error) {
	st, err := secretfile.Check(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s has mode %04o: a credential file must be 0600 or 0400", filepath.Base(path), st.Mode().Perm())
	}
	if st.Size() > wire.MaxCredentialValueBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), wire.MaxCredentialValueBytes)
	}
	v, err := secretfile.Read(path)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", fmt.Errorf("%s is empty", filepath.Base(path))
	}
	return v, nil
}

func (a *app) credentialCmd() *cobra.Command {
	c := &cobra.Command{Use: "credential", Aliases: []string{"credentials", "secret", "secrets"},
		Short: "Credential sources of a namespace (model keys and tokens Agents reference)",
		Long: "A credential source holds the values an Agent's harnessAuth names (--auth-ref credential:NAME[#KEY]).\n" +
			"It belongs to one namespace: an Agent can reference only its own namespace's sources. A value is\n" +
			"read from stdin or a file of mode 0600 and is never shown again; list and get show metadata.",
		Example: `  occ -n team credential create openai < openai.key
  occ -n team credential create sa --from-file codex-access-token=token --from-file chatgpt-workspace-id=ws
  occ -n team agent create bot --config chat --auth-method api_key --auth-ref credential:openai
  occ -n team credential rotate openai --from-file new.key
  occ -n team credential register model-keys --from-secret oce-system/model-keys   # cluster-admin: an existing Secret`}
	var cf credentialFlags
	create := &cobra.Command{Use: "create NAME", Short: "Create a credential source (value on stdin or --from-file)",
		Args: cobra.ExactArgs(1),
		Example: "  occ -n team credential create openai < openai.key\n" +
			"  occ -n team credential create pair --from-file a=a.key --from-file b=b.key",
		RunE: func(cmd *cobra.Command, args []string) error {
			vals, err := cf.values(a.opts.Stdin)
			if err != nil {
				return err
			}
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) (wire.CredentialSource, error) {
				return c.CreateCredentialSource(ctx, a.settings.Namespace, wire.CreateCredentialSource{Name: args[0], Values: vals})
			}, one(credentialTable))
		}}
	cf.register(create, true, false)

	var rf credentialFlags
	register := &cobra.Command{Use: "register NAME", Short: "Register an existing credential as a source of the namespace (cluster-admin)",
		Long: "register copies the value of a credential of an earlier release — a Kubernetes Secret (by default in\n" +
			"the driver's OCE_CREDENTIAL_NAMESPACE) or a file of the local driver's shared secrets directory — into a\n" +
			"source of this namespace, once. Agents keep their secret:NAME#KEY or local:NAME references.",
		Args: cobra.ExactArgs(1),
		Example: "  occ -n team credential register model-keys --from-secret oce-system/model-keys\n" +
			"  occ -n team credential register openai --from-secret model-keys#openai\n" +
			"  occ -n default credential register demo-key --from-local demo-key",
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := rf.location()
			if err == nil && from == "" {
				err = usageError(errors.New("give --from-secret or --from-local"))
			}
			if err != nil {
				return err
			}
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) (wire.CredentialSource, error) {
				return c.CreateCredentialSource(ctx, a.settings.Namespace, wire.CreateCredentialSource{Name: args[0], From: from})
			}, one(credentialTable))
		}}
	rf.register(register, false, true)

	var tf credentialFlags
	rotate := &cobra.Command{Use: "rotate NAME", Short: "Write a credential source's next version (value on stdin, --from-file, or its location again)",
		Args: cobra.ExactArgs(1), ValidArgsFunction: a.complete(credentialNames),
		Example: "  occ -n team credential rotate openai < new.key\n  occ -n team credential rotate model-keys --from-secret oce-system/model-keys",
		RunE: func(cmd *cobra.Command, args []string) error {
			req := wire.RotateCredentialSource{}
			var err error
			if req.From, err = tf.location(); err != nil {
				return err
			}
			if req.From == "" {
				if req.Values, err = tf.values(a.opts.Stdin); err != nil {
					return err
				}
			}
			return callPrint(a, cmd, func(c *client.Client, ctx context.Context) (wire.CredentialSource, error) {
				return c.RotateCredentialSource(ctx, a.settings.Namespace, args[0], req)
			}, one(credentialTable))
		}}
	tf.register(rotate, true, true)

	var watchList, watchGet bool
	list := &cobra.Command{Use: "list", Short: "List credential sources (metadata only)", Args: cobra.NoArgs,
		Example: "  occ -n team credential list -o wide",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.show(cmd, watchList, func(ctx context.Context) (any, func() table, error) {
				cs, err := a.client().CredentialSources(ctx, a.settings.Namespace)
				return cs, func() table { return credentialTable(cs) }, err
			})
		}}
	addWatch(list, &watchList)
	get := &cobra.Command{Use: "get NAME", Short: "Show a credential source's metadata", Args: cobra.ExactArgs(1),
		ValidArgsFunction: a.complete(credentialNames), Example: "  occ -n team credential get openai -o yaml",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd, watchGet, func(ctx context.Context) (any, func() table, error) {
				c, err := a.client().CredentialSource(ctx, a.settings.Namespace, args[0])
				return c, func() table { return credentialTable([]wire.CredentialSource{c}) }, err
			})
		}}
	addWatch(get, &watchGet)
	withdraw := deleteCmd(a, "withdraw NAME", "Withdraw a credential source: its value is deleted; Agents naming it can no longer deploy",
		"  occ -n team credential withdraw openai", "credential source",
		func(c *client.Client, ctx context.Context, name string) (wire.CredentialSource, error) {
			return c.WithdrawCredentialSource(ctx, a.settings.Namespace, name)
		})
	withdraw.Aliases = []string{"delete"}
	withdraw.ValidArgsFunction = a.complete(credentialNames)
	c.AddCommand(create, register, rotate, list, get, withdraw)
	return c
}

func credentialTable(cs []wire.CredentialSource) table {
	t := table{header: []string{"NAME", "KEYS", "VERSION", "REFERENCE", "UPDATED", "ID", "FROM", "CREATED BY"},
		wide: wideCols(5, 6, 7)}
	for _, c := range cs {
		updated := c.CreatedAt
		if !c.RotatedAt.IsZero() {
			updated = c.RotatedAt
		}
		t.rows = append(t.rows, []string{c.Name, strings.Join(c.Keys, ","), strconv.FormatInt(c.Version, 10),
			strings.Join(c.References, ","), ts(updated), c.ID, dash(c.RegisteredFrom), dash(c.CreatedBy)})
		t.names = append(t.names, "credential/"+c.Name)
	}
	return t
}

// credentialNames completes the namespace's source names.
var credentialNames lister = func(ctx context.Context, c *client.Client, ns string, _ []string) ([]string, error) {
	cs, err := c.CredentialSources(ctx, ns)
	names := make([]string, 0, len(cs))
	for _, s := range cs {
		names = append(names, s.Name)
	}
	return names, err
}
