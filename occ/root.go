// Package occ is the admin CLI of the oce coordinator as a library: the cobra
// command tree that cmd/occ runs. Commands talk to the coordinator through
// coordinator/client.
package occ

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
)

// Exit codes of occ.
const (
	ExitOK      = 0
	ExitErr     = 1 // any failed request or bad input
	ExitUsage   = 2 // unknown command or flag
	ExitFailed  = 3 // deploy --wait: the revision failed or was superseded
	ExitTimeout = 4 // deploy --wait: the timeout passed before a final state
)

// DefaultPollInterval paces deploy --wait while the coordinator cannot answer
// its blocking query for change (it waits on that otherwise).
const DefaultPollInterval = 500 * time.Millisecond

// DefaultWaitTimeout bounds deploy --wait; the convergence window of revision
// work is 900 s (REFERENCE §6.1), so wait as long.
const DefaultWaitTimeout = 900 * time.Second

// DefaultRequestTimeout bounds one non-streaming command.
const DefaultRequestTimeout = 60 * time.Second

// Options are the process environment of one occ run; zero fields take the
// real process's.
type Options struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment (OCC_SERVER, OCC_TOKEN, OCC_NAMESPACE).
	Getenv func(string) string
	// ConfigFile is the occ.yaml path; empty means ~/.config/oce/occ.yaml.
	ConfigFile string
	// WorkDir is where ./.oce/coordinator/token is looked up; empty means
	// the current directory.
	WorkDir string
	// HTTPClient replaces the HTTP client (tests).
	HTTPClient *http.Client
	// PollInterval of deploy --wait; zero means DefaultPollInterval.
	PollInterval time.Duration
}

// ExitError carries an exit code out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// app is the state shared by the command tree.
type app struct {
	opts Options
	// global flags
	server, token, tokenFile, namespace, output, caFile, contextName string
	// resolved in PersistentPreRunE
	settings settings
	caPool   *x509.CertPool
}

func (o *Options) defaults() {
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
}

// NewRootCommand builds the occ command tree.
func NewRootCommand(opts Options) *cobra.Command {
	opts.defaults()
	a := &app{opts: opts}
	root := &cobra.Command{
		Use:           "occ",
		Short:         "occ administers an oce coordinator",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.resolve(cmd)
			if err != nil {
				return err
			}
			a.settings = s
			if s.CAFile != "" {
				if a.caPool, err = client.LoadCA(s.CAFile); err != nil {
					return err
				}
			}
			return nil
		},
	}
	root.SetIn(opts.Stdin)
	root.SetOut(opts.Stdout)
	root.SetErr(opts.Stderr)
	f := root.PersistentFlags()
	f.StringVar(&a.server, "server", "", "coordinator URL (env OCC_SERVER; default "+client.DefaultServer+")")
	f.StringVar(&a.token, "token", "", "bearer token (prefer --token-file; env OCC_TOKEN)")
	f.StringVar(&a.tokenFile, "token-file", "", "file holding the bearer token, '-' for stdin (default ./"+defaultTokenFile+" when present)")
	f.StringVarP(&a.namespace, "namespace", "n", "", "namespace (env OCC_NAMESPACE; default "+DefaultNamespace+")")
	f.StringVarP(&a.output, "output", "o", "", "output format: table, json or yaml")
	f.StringVar(&a.caFile, "ca-file", "", "CA bundle that signed the coordinator's certificate (env OCC_CA_FILE; default ./"+defaultCAFile+" when present)")
	f.StringVar(&a.contextName, "context", "", "the occ.yaml context to use (env OCC_CONTEXT; default its currentContext)")

	root.AddGroup(&cobra.Group{ID: "resources", Title: "Resources:"},
		&cobra.Group{ID: "ops", Title: "Operations:"})
	for _, c := range []*cobra.Command{a.namespaceCmd(), a.configCmd(), a.agentCmd(), a.revisionsCmd()} {
		c.GroupID = "resources"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.statusCmd(), a.auditCmd(), a.workCmd(), a.installationCmd(), a.clusterCmd()} {
		c.GroupID = "ops"
		root.AddCommand(c)
	}
	root.AddGroup(&cobra.Group{ID: "access", Title: "Access:"})
	for _, c := range a.accessCmds() {
		c.GroupID = "access"
		root.AddCommand(c)
	}
	a.registerDev(root)
	root.AddCommand(completionCmd(root))
	groups(root)
	return root
}

// groups makes every command that only holds subcommands refuse unknown
// subcommands (cobra would print help and succeed).
func groups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groups(sub)
	}
	if c.HasParent() && c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
			}
			return cmd.Help()
		}
	}
}

// Main runs occ with args and returns the process exit code.
func Main(ctx context.Context, args []string, opts Options) int {
	opts.defaults()
	root := NewRootCommand(opts)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(opts.Stderr, "occ:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if isUsage(err) {
		return ExitUsage
	}
	return ExitErr
}

// client returns an API client for the resolved settings.
func (a *app) client() *client.Client {
	var opts []client.Option
	if a.opts.HTTPClient != nil {
		opts = append(opts, client.WithHTTPClient(a.opts.HTTPClient))
	}
	if a.caPool != nil {
		opts = append(opts, client.WithCA(a.caPool))
	}
	return client.New(a.settings.Server, a.settings.Token, opts...)
}

// ctx bounds one non-streaming command.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), DefaultRequestTimeout)
}
