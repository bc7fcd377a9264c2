// Command coordinator runs one member of oce's Raft-replicated coordinator.
// With no flags but --driver it is the embedded default: one node with data
// under ./.oce/coordinator, Raft on 127.0.0.1:7300, HTTP on 127.0.0.1:7400,
// which bootstraps itself. --driver kubernetes runs Agents on a cluster,
// --driver local as processes of this machine (occ dev up). The test build
// (go build -tags memorydriver, memorydriver.go) also has the in-memory test
// driver, which it runs with no --driver in a dev data dir
// (docs/OPERATIONS.md); the production build links no test driver.
// `coordinator certs` writes the TLS material of a Kubernetes install.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/memlimit"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/store"
)

func main() {
	if err := command().Execute(); err != nil {
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func command() *cobra.Command {
	var cfg server.Config
	var logLevel string
	var preVote bool
	cmd := &cobra.Command{
		Use:           "coordinator",
		Short:         "Run one member of the oce coordinator (Raft-replicated state, API, activation engine)",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			cfg.Log = log
			cfg.Local.LogLevel = logLevel
			cfg.DisablePreVote = !preVote
			if limit := memlimit.Apply(os.Getenv, memlimit.CgroupFiles...); limit > 0 {
				log.Info("soft memory limit from the container's", "bytes", limit, "fraction", memlimit.Fraction)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			go func() {
				// A second signal after the first stops the process at once.
				<-ctx.Done()
				stop()
				again := make(chan os.Signal, 1)
				signal.Notify(again, syscall.SIGTERM, syscall.SIGINT)
				<-again
				os.Exit(1)
			}()
			if err := server.Run(ctx, cfg); err != nil {
				log.Error("coordinator failed", "code", server.StartCode(err), "error", err.Error())
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", env("OCE_DATA_DIR", server.DefaultDataDir), "data directory (env OCE_DATA_DIR)")
	f.StringVar(&cfg.RaftAddr, "raft-addr", env("OCE_RAFT_ADDR", server.DefaultRaftAddr), "Raft bind address (env OCE_RAFT_ADDR)")
	f.StringVar(&cfg.RaftAdvertise, "raft-advertise", env("OCE_RAFT_ADVERTISE", ""), "Raft address peers dial; default --raft-addr (env OCE_RAFT_ADVERTISE)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", env("OCE_HTTP_ADDR", server.DefaultHTTPAddr), "HTTP API listen address (env OCE_HTTP_ADDR)")
	f.StringVar(&cfg.HTTPAdvertise, "http-advertise", env("OCE_HTTP_ADVERTISE", ""), "HTTP address told to members and clients; default the bound one (env OCE_HTTP_ADVERTISE)")
	f.StringVar(&cfg.NodeID, "node-id", env("OCE_NODE_ID", ""), "Raft server id; default the stored one, else the host name (env OCE_NODE_ID)")
	f.StringVar(&cfg.Join, "join", env("OCE_JOIN", ""), "comma-separated HTTP addresses of members to join through; empty bootstraps (env OCE_JOIN)")
	f.StringVar(&cfg.DriverName, "driver", env("OCE_DRIVER", ""), "compute driver: "+strings.Join(server.Drivers(), ", ")+
		"; empty runs the in-memory test driver of a test build (-tags memorydriver), in a dev data dir only (env OCE_DRIVER)")
	f.StringVar(&cfg.MemoryDir, "memory-dir", env("OCE_MEMORY_DIR", ""), "memory driver (test build): keep its runtime records in this directory, shared by every member naming it (multi-process tests; env OCE_MEMORY_DIR)")
	f.StringVar(&cfg.APISocket, "api-socket", env("OCE_API_SOCKET", ""), "also serve the API on this Unix socket, mode 0600 (env OCE_API_SOCKET)")
	f.StringVar(&cfg.Local.Root, "local-root", env("OCE_LOCAL_ROOT", ""), "local driver: root of the runtimes' directories; default <data-dir>/local")
	f.StringVar(&cfg.Local.BinDir, "local-bin-dir", env("OCE_LOCAL_BIN_DIR", ""), "local driver: directory of gatewayd, harnessd, nodehost; default beside this binary")
	f.StringVar(&cfg.Local.SecretsDir, "local-secrets-dir", env("OCE_LOCAL_SECRETS_DIR", ""), "local driver: the shared secrets directory a cluster admin registers files of as Namespaces' credential sources (occ credential register --from-local); default <local-root>/secrets")
	f.StringVar(&cfg.Local.ProviderURL, "local-provider-url", env("OCE_LOCAL_PROVIDER_URL", ""), "local driver: model provider base URL for every runtime (the offline fake provider)")
	f.BoolVar(&cfg.Local.AllowHostNetwork, "local-allow-host-network", false, "local driver: let runtimes run outside a loopback-only network namespace")
	// Strings, not numbers: the driver validates them at start and a bad one
	// is refused with NOT_CONFIGURED naming the flag, like its variable.
	f.StringVar(&cfg.Kubernetes.QPS, "kube-qps", "", fmt.Sprintf("kubernetes driver: the client's requests/s toward the API server; wins over env OCE_KUBE_QPS; default %d (docs/kubernetes.md, Scale)", server.DefaultKubeQPS))
	f.StringVar(&cfg.Kubernetes.Burst, "kube-burst", "", fmt.Sprintf("kubernetes driver: the client's burst toward the API server (raised to --kube-qps when below it); wins over env OCE_KUBE_BURST; default %d", server.DefaultKubeBurst))
	f.Var(unsetBool{&cfg.ColdStandby}, "cold-standby", "keep no driver caches while following: less memory and fewer API watches on followers, but a new leader lists everything it observes before it is current (docs/kubernetes.md, Scale); wins over env OCE_COLD_STANDBY; default false")
	f.Lookup("cold-standby").NoOptDefVal = "true" // a bare --cold-standby, as a boolean flag
	f.StringVar(&cfg.TokenFile, "token-file", env("OCE_TOKEN_FILE", ""), "bearer token file (0600), created when missing; default <data-dir>/token (env OCE_TOKEN_FILE)")
	f.StringVar(&cfg.TLSCert, "tls-cert", env("OCE_TLS_CERT", ""), "this member's certificate (PEM; reloaded on change): the API serves TLS with it and members authenticate each other with it (env OCE_TLS_CERT)")
	f.StringVar(&cfg.TLSKey, "tls-key", env("OCE_TLS_KEY", ""), "the certificate's private key (PEM, 0600) (env OCE_TLS_KEY)")
	f.StringVar(&cfg.TLSCA, "tls-ca", env("OCE_TLS_CA", ""), "the cluster CA bundle: Raft and member-to-member calls require certificates it signed (env OCE_TLS_CA). Without the three flags a bootstrapping node makes a local CA in <data-dir>/tls")
	f.BoolVar(&cfg.Insecure, "insecure", false, "serve plain HTTP and run Raft over plain TCP (logs a warning)")
	f.StringVar(&cfg.Authorization, "authorization", server.AuthorizationCedar, "authorization: cedar, or off (with --insecure only: every authenticated caller may do everything; for measurements)")
	f.StringVar(&cfg.OIDC.Issuer, "oidc-issuer", env("OCE_OIDC_ISSUER", ""), "accept bearer JWTs from this OIDC issuer URL (env OCE_OIDC_ISSUER)")
	f.StringVar(&cfg.OIDC.Audience, "oidc-audience", env("OCE_OIDC_AUDIENCE", ""), "the audience (client id) OIDC tokens must carry (env OCE_OIDC_AUDIENCE)")
	f.StringVar(&cfg.OIDC.UsernameClaim, "oidc-username-claim", "sub", "the OIDC claim that names the user (prefixed oidc:)")
	f.StringVar(&cfg.OIDC.GroupsClaim, "oidc-groups-claim", "groups", "the OIDC claim that lists the user's groups (prefixed oidc:)")
	f.StringVar(&cfg.OIDC.CAFile, "oidc-ca-file", env("OCE_OIDC_CA_FILE", ""), "CA bundle trusted for the OIDC issuer (default: the system roots)")
	f.DurationVar(&cfg.OIDC.JWKSRefresh, "oidc-jwks-refresh", authn.DefaultJWKSRefresh, "least time between two fetches of the OIDC issuer's key set (a token naming an unknown key waits for the next)")
	f.StringVar(&cfg.ConsoleSSO.ClientID, "console-oidc-client-id", env("OCE_CONSOLE_OIDC_CLIENT_ID", ""), "offer the console's single sign-on through --oidc-issuer as this confidential client; the API also accepts ID tokens issued to it (env OCE_CONSOLE_OIDC_CLIENT_ID)")
	f.StringVar(&cfg.ConsoleSSO.ClientSecretFile, "console-oidc-client-secret-file", env("OCE_CONSOLE_OIDC_CLIENT_SECRET_FILE", ""), "file (0600) holding the console client's secret (env OCE_CONSOLE_OIDC_CLIENT_SECRET_FILE)")
	f.StringVar(&cfg.ConsoleSSO.URL, "console-url", env("OCE_CONSOLE_URL", ""), "the console's external base URL, like https://oce.example.com: the provider redirects to <url>/console/sso/callback and, after logout, to <url>/console/login (env OCE_CONSOLE_URL)")
	f.StringVar(&cfg.ConsoleSSO.Name, "console-oidc-name", env("OCE_CONSOLE_OIDC_NAME", "single sign-on"), "the provider's name on the console's login page (\"Sign in with <name>\")")
	f.Float64Var(&cfg.RateLimits.PrincipalRate, "rate-limit-principal", api.DefaultPrincipalRate, "API requests per second of one authenticated principal (the bootstrap identity is exempt); negative turns it off")
	f.IntVar(&cfg.RateLimits.PrincipalBurst, "rate-limit-principal-burst", api.DefaultPrincipalBurst, "API requests one principal may send at once")
	f.Float64Var(&cfg.RateLimits.FailedAuthRate, "rate-limit-failed-auth", api.DefaultFailedAuthRate, "failed authentications per second of one source address before it is locked out (429); negative turns it off")
	f.IntVar(&cfg.RateLimits.FailedAuthBurst, "rate-limit-failed-auth-burst", api.DefaultFailedAuthBurst, "failed authentications one source address may make at once")
	f.DurationVar(&cfg.AuditRetention.MaxAge, "audit-max-age", server.DefaultAuditMaxAge, "prune audit records older than this (exported first); negative keeps every age")
	f.IntVar(&cfg.AuditRetention.MaxRecords, "audit-max-records", server.DefaultAuditMaxRecords, "keep at most this many audit records (the oldest are exported, then pruned); negative keeps any number")
	f.StringVar(&cfg.AuditRetention.ExportDir, "audit-export-dir", env("OCE_AUDIT_EXPORT_DIR", ""), "where pruned audit records are exported (JSON lines, 0600); default <data-dir>/audit-export; - prunes without exporting (env OCE_AUDIT_EXPORT_DIR)")
	f.DurationVar(&cfg.IdleTimeout, "http-idle-timeout", server.DefaultIdleTimeout, "close keep-alive connections idle this long")
	f.StringVar(&logLevel, "log-level", env("OCE_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env OCE_LOG_LEVEL)")
	f.DurationVar(&cfg.Timeouts.Heartbeat, "raft-heartbeat-timeout", store.DefaultHeartbeatTimeout, "Raft heartbeat timeout")
	f.DurationVar(&cfg.Timeouts.Election, "raft-election-timeout", store.DefaultElectionTimeout, "Raft election timeout")
	f.DurationVar(&cfg.Timeouts.LeaderLease, "raft-leader-lease-timeout", store.DefaultLeaderLeaseTimeout, "Raft leader lease timeout")
	f.DurationVar(&cfg.Timeouts.Commit, "raft-commit-timeout", store.DefaultCommitTimeout, "Raft commit timeout")
	f.BoolVar(&preVote, "raft-prevote", true, "Raft pre-vote: a member cut off and back does not depose a healthy leader (off only for comparisons)")
	f.IntVar(&cfg.Engine.Concurrency, "engine-concurrency", engine.DefaultConcurrency, "Agents the activation engine processes in parallel")
	f.StringVar(&cfg.Engine.CredentialCheck, "credential-check", env("OCE_CREDENTIAL_CHECK", engine.CredentialCheckBeforeCutover),
		"activation order: before-cutover checks a candidate's credential (and runs an embedded replacement's model probe) before any predecessor is stopped; seed keeps the seeds' order (env OCE_CREDENTIAL_CHECK)")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "graceful stop budget")
	cmd.AddCommand(certsCommand())
	return cmd
}

// unsetBool is a boolean flag that stays "" unless given, so a variable can
// stand in for it; the server validates what it holds (a bad value is
// refused at start naming the flag).
type unsetBool struct{ v *string }

func (b unsetBool) String() string {
	if b.v == nil { // pflag asks a zero value whether a default is worth printing
		return ""
	}
	return *b.v
}
func (b unsetBool) Set(s string) error { *b.v = s; return nil }
func (b unsetBool) Type() string       { return "bool" } // shown as a boolean flag in --help
