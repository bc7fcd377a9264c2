// Package occ is the admin CLI of the oce coordinator as a library: the cobra
// command tree that cmd/occ runs. Commands talk to the coordinator through
// coordinator/client.
package occ

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/buildinfo"
)

// Exit codes of occ: stable, documented in `occ --help` and
// docs/OPERATIONS.md; scripts may branch on them.
const (
	ExitOK      = 0
	ExitErr     = 1 // a request failed or the input was bad
	ExitUsage   = 2 // unknown command or flag, wrong arguments
	ExitFailed  = 3 // --wait: the revision (deploy) or the work (stop, delete) failed or was superseded
	ExitTimeout = 4 // --wait: the timeout passed before a final state
	// ExitInterrupted (130, deploywait.go): Ctrl-C or SIGTERM ended the command.
)

// exitCodesHelp is the exit-code table of occ --help.
const exitCodesHelp = `Exit codes:
  0    success
  1    a request failed or the input was bad
  2    usage: unknown command or flag, wrong arguments
  3    --wait: the revision (deploy) or the work (stop, delete) failed or was superseded
  4    --wait: the timeout passed first
  130  interrupted (Ctrl-C)
occ diff exits as kubectl diff: 0 no differences, 1 differences, 2 bad manifests or a failed request.`

// DefaultPollInterval paces deploy --wait while the coordinator cannot answer
// its blocking query for change (it waits on that otherwise).
const DefaultPollInterval = 500 * time.Millisecond

// DefaultWaitTimeout bounds deploy --wait; the convergence window of revision
// work is 900 s (docs/design/reference.md#s6-1), so wait as long.
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
	// PollInterval of deploy --wait and --watch; zero means DefaultPollInterval.
	PollInterval time.Duration
	// Build is what occ version reports for the client; nil reads this
	// binary's build information.
	Build *buildinfo.Info
	// Now is the clock that relative times (audit --since 24h, yesterday)
	// count from, in its location; nil means time.Now.
	Now func() time.Time
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
	server, token, tokenFile, namespace, output, caFile, contextName, tlsServerName string
	noHeaders                                                                       bool
	// dryRun is --dry-run of the commands that take it (dryrun.go).
	dryRun string
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
	if o.Now == nil {
		o.Now = time.Now
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
		Use:   "occ",
		Short: "occ administers an oce coordinator",
		Long: "occ administers an oce coordinator through its HTTP API: Namespaces, Configurations, Agents and\n" +
			"their revisions, the audit log, the Raft cluster, and a development instance on this machine.\n\n" +
			exitCodesHelp,
		Example: `  occ dev up && make demo            # a coordinator on this machine, then the quickstart
  occ agent list -o wide
  occ agent describe hello
  occ --server https://oce.example:7400 --token-file token status
  occ --server https://127.0.0.1:8443 --tls-server-name oce-coordinator-api.oce-system.svc status`,
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
	f.StringVarP(&a.output, "output", "o", "", "output format: "+strings.Join(outputFormats, ", "))
	f.BoolVar(&a.noHeaders, "no-headers", false, "print tables without their header line")
	f.StringVar(&a.caFile, "ca-file", "", "CA bundle that signed the coordinator's certificate (env OCC_CA_FILE; default ./"+defaultCAFile+" when present)")
	f.StringVar(&a.tlsServerName, "tls-server-name", "", "name to check the coordinator's certificate against instead of --server's host, e.g. behind kubectl port-forward (env OCC_TLS_SERVER_NAME)")
	f.StringVar(&a.contextName, "context", "", "the occ.yaml context to use (env OCC_CONTEXT; default its currentContext)")

	root.AddGroup(&cobra.Group{ID: "resources", Title: "Resources:"},
		&cobra.Group{ID: "ops", Title: "Operations:"})
	for _, c := range []*cobra.Command{a.namespaceCmd(), a.configCmd(), a.agentCmd(), a.revisionsCmd(), a.credentialCmd(),
		a.applyCmd(), a.diffCmd()} {
		c.GroupID = "resources"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.statusCmd(), a.auditCmd(), a.workCmd(), a.installationCmd(), a.clusterCmd(),
		a.versionCmd()} {
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
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeFlag(namespaceNames))
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	groups(root)
	return root
}

// suggestionDistance is the Levenshtein distance within which a mistyped
// command gets a "did you mean" (cobra's default is 2).
const suggestionDistance = 2

// groups makes every command that only holds subcommands refuse unknown
// subcommands with a suggestion (cobra would print help and succeed, and
// suggests only at the root).
func groups(c *cobra.Command) {
	c.SuggestionsMinimumDistance = suggestionDistance
	for _, sub := range c.Commands() {
		groups(sub)
	}
	if c.HasParent() && c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(unknownCommand(cmd, args[0]))
			}
			return cmd.Help()
		}
	}
}

// unknownCommand names the mistyped subcommand and what it may have meant.
func unknownCommand(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, cmd.CommandPath())
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return errors.New(msg)
}

// Main runs occ with args and returns the process exit code. ctx is
// cancelled on Ctrl-C (cmd/occ): a command that ends with ctx done exits
// ExitInterrupted.
func Main(ctx context.Context, args []string, opts Options) int {
	opts.defaults()
	root := NewRootCommand(opts)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if ctx.Err() != nil {
		// cmd/occ cancels ctx on SIGINT or SIGTERM: whatever the command
		// made of that, the process was interrupted.
		var ee *ExitError
		if !errors.As(err, &ee) {
			err = ErrInterrupted
		}
		fmt.Fprintln(opts.Stderr, "occ:", err)
		return ExitInterrupted
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
	if a.caPool != nil || a.settings.TLSServerName != "" {
		// A nil pool trusts the system roots; the server name replaces the
		// dialed host in the certificate check (and in SNI).
		opts = append(opts, client.WithTLS(&tls.Config{RootCAs: a.caPool, ServerName: a.settings.TLSServerName,
			MinVersion: tls.VersionTLS12}))
	}
	return client.New(a.settings.Server, a.settings.Token, opts...)
}

// ctx bounds one non-streaming command.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.withDryRun(cmd.Context()), DefaultRequestTimeout)
}
