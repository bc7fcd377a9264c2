// Package server assembles one coordinator process: the replicated store,
// the HTTP API, the compute driver and the activation engine, which runs
// only while this node is the Raft leader.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/store"
)

// The embedded default: one local node that bootstraps itself.
const (
	DefaultDataDir  = ".oce/coordinator"
	DefaultRaftAddr = "127.0.0.1:7300"
	DefaultHTTPAddr = "127.0.0.1:7400"
	// DefaultShutdownTimeout bounds the graceful stop (leadership hand-off,
	// HTTP drain).
	DefaultShutdownTimeout = 10 * time.Second
	// DriverShutdownTimeout bounds a driver's own stop on the way out (the
	// local driver stops every runtime it runs: the Gateway's 340 s budget
	// plus the Harness's 120 s).
	DriverShutdownTimeout = 460 * time.Second
	// TokenFileName is the bearer token's file inside the data dir.
	TokenFileName = "token"

	transferTimeout = 3 * time.Second
)

// HTTP server bounds (issue 25): a connection that does not finish its
// request header, or that idles between keep-alive requests, is closed;
// a request's header (its target included) is bounded.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	MaxHeaderBytes           = 64 << 10
)

// Config configures one coordinator process. Zero fields take the defaults.
type Config struct {
	// DataDir holds the Raft log, snapshots, the token and the node id.
	DataDir string
	// NodeID is the Raft server id; default: the one stored in the data
	// dir, else the host name.
	NodeID string
	// RaftAddr is the Raft bind address; RaftAdvertise what peers dial
	// (default RaftAddr).
	RaftAddr      string
	RaftAdvertise string
	// HTTPAddr is the API's listen address; HTTPAdvertise what other
	// members and clients are told (default: the bound address).
	HTTPAddr      string
	HTTPAdvertise string
	// APISocket, when set, serves the API on this Unix socket too (mode
	// 0600): reachable from outside the network namespace the coordinator
	// runs in (occ dev up).
	APISocket string
	// Listeners are further listeners the API is served on (tests, an
	// embedding process).
	Listeners []net.Listener
	// Join is a comma-separated list of members' HTTP addresses to join
	// through; empty bootstraps a new cluster when there is no state.
	Join string
	// Driver is the compute driver instance; when nil, DriverName selects
	// a registered one (selectDriver's data dir rule applies either way).
	Driver compute.Driver
	// DriverName selects a registered compute driver: kubernetes, local,
	// memory. Empty means memory, in a dev data dir only.
	DriverName string
	// Local configures the local driver (DriverName "local").
	Local LocalConfig
	// Kubernetes configures the kubernetes driver beyond its environment.
	Kubernetes KubernetesConfig
	// ColdStandby "true" keeps a follower's driver without caches:
	// less memory and fewer API watches on followers, and a leader change
	// at scale that lists everything before the new leader is current.
	// By default a follower keeps its driver warm (engine.RunStandby).
	// As given by --cold-standby ("true" or "false"); empty takes
	// OCE_COLD_STANDBY, then "false". Anything else is refused at start.
	ColdStandby string
	// MemoryDir makes the memory driver keep its runtime records in this
	// directory, shared by every member naming it: the members of a
	// multi-process test then observe the same runtimes, as a real
	// cluster's members do. Empty keeps them in the process.
	MemoryDir string
	// TokenFile is the bearer token file (default <DataDir>/token). It is
	// created (0600) with a random token when missing; every member of a
	// cluster must hold the same token.
	TokenFile string
	// TLSCert, TLSKey and TLSCA are the member's certificate, its key and
	// the cluster CA: the API serves TLS with the certificate (reloaded when
	// the files change) and members speak mutual TLS among themselves (Raft,
	// forwarded writes, join). All empty on a node that bootstraps: a local
	// CA and certificate are made in <DataDir>/tls (the dev setup).
	TLSCert, TLSKey, TLSCA string
	// Insecure serves plain HTTP and plain Raft, with a warning.
	Insecure bool
	// Authorization is cedar (default) or off (only with Insecure).
	Authorization string
	// OIDC, when Issuer is set, accepts bearer JWTs from that issuer.
	OIDC authn.OIDCConfig
	// ConsoleSSO, when its ClientID is set, offers the console's single
	// sign-on through the OIDC issuer (console.go).
	ConsoleSSO ConsoleSSO
	// RateLimits bounds callers' request rates (api.RateLimits).
	RateLimits api.RateLimits
	// AuditRetention prunes the audit log (retention.go).
	AuditRetention AuditRetention
	// ReadHeaderTimeout and IdleTimeout bound the HTTP connections
	// (defaults DefaultReadHeaderTimeout, DefaultIdleTimeout).
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// Timeouts are the Raft timings (the store's defaults when zero).
	Timeouts store.Timeouts
	// DisablePreVote turns Raft's pre-vote off (comparisons only).
	DisablePreVote bool
	// Engine tunes the activation engine (its defaults when zero); Owner is
	// always the node id.
	Engine engine.Config
	// ShutdownTimeout bounds the graceful stop.
	ShutdownTimeout time.Duration
	// Metrics is the registry /metrics serves; nil makes a private one.
	Metrics *prometheus.Registry
	// Clock stamps proposals; nil means time.Now.
	Clock func() time.Time
	// Log receives JSON records; nil means stderr.
	Log *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.RaftAddr == "" {
		c.RaftAddr = DefaultRaftAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.TokenFile == "" {
		c.TokenFile = filepath.Join(c.DataDir, TokenFileName)
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	c.AuditRetention = c.AuditRetention.withDefaults(c.DataDir)
	return c
}

// backend is the API's Backend: the store plus the compute driver and the
// engine of this node's leadership.
type backend struct {
	*store.Store
	driver compute.Driver
	engine *atomic.Pointer[engine.Engine]
}

// Driver implements api.Backend.
func (b backend) Driver() compute.Driver { return b.driver }

// Quiescent implements api.Quiescer: this node leads and its engine will
// write nothing more until a request or a changed observation. When it is
// not yet, the watcher is asked for a round now, so whoever polls for
// quiescence sees it within a round of the last write.
func (b backend) Quiescent() bool {
	e := b.engine.Load()
	if e == nil {
		return false
	}
	if e.Quiescent() {
		return true
	}
	e.ObserveNow()
	return false
}

// The contracts the assembly relies on.
var (
	_ api.Backend     = backend{}
	_ api.Readier     = backend{}
	_ api.Positions   = backend{}
	_ api.Quiescer    = backend{}
	_ engine.Proposer = (*store.Store)(nil)
)

// Shutdowner is optionally implemented by a compute driver that runs
// something itself (the local driver's runtimes): Run calls it on the way
// out, bounded by DriverShutdownTimeout.
type Shutdowner interface {
	Shutdown(ctx context.Context)
}

// node is one running coordinator: what Run opens, in order, and closes in
// reverse.
type node struct {
	cfg         Config
	log         *slog.Logger
	id, token   string
	listeners   []net.Listener
	httpAdv     string
	driver      compute.Driver
	st          *store.Store
	srv         *http.Server
	tls         *transportSecurity            // nil with Insecure
	engine      atomic.Pointer[engine.Engine] // while this node leads
	standby     func()                        // stops the follower's standby and waits for it
	coldStandby bool                          // no standby (Config.ColdStandby)
}

// Run runs one coordinator until ctx ends, then stops gracefully: a leader
// hands leadership to another member first, the HTTP server drains, Raft
// shuts down, the compute driver stops what it runs.
func Run(ctx context.Context, cfg Config) error {
	n := &node{cfg: cfg.withDefaults()}
	n.log = n.cfg.Log
	if err := engine.ValidateCredentialCheck(n.cfg.Engine.CredentialCheck); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	var err error
	if n.coldStandby, err = coldStandby(n.cfg.ColdStandby, os.Getenv); err != nil {
		return err
	}
	defer n.close()
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"identity", n.identity},
		{"listen", n.listen},
		{"security", func(context.Context) error { return n.security() }},
		{"driver", n.openDriver},
		{"store", n.openStore},
		{"standby", n.startStandby},
	} {
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	go warmSchema(n.log)
	serveErr, err := n.serve()
	if err != nil {
		return err
	}
	n.log.Info("coordinator started", "raftAddr", n.st.RaftAddr(), "httpAddr", n.httpAdv, "dataDir", n.cfg.DataDir,
		"driver", n.driver.Capabilities().Name, "join", n.cfg.Join != "")
	if err := n.join(ctx); err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("server: http: %w", err)
	}
	n.shutdown()
	return runErr
}

// warmSchema compiles the OpenClaw configuration schema in the background,
// so the first Configuration save is not seconds slower than the next.
func warmSchema(log *slog.Logger) {
	start := time.Now()
	if err := admission.WarmSchema(); err != nil {
		log.Error("openclaw schema does not compile", "error", err.Error())
		return
	}
	log.Debug("openclaw schema compiled", "ms", time.Since(start).Milliseconds())
}

// identity prepares the data dir, the node id and the bearer token.
func (n *node) identity(context.Context) error {
	if err := os.MkdirAll(n.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("server: data dir: %w", err)
	}
	id, err := resolveNodeID(n.cfg.DataDir, n.cfg.NodeID)
	if err != nil {
		return err
	}
	n.id = id
	n.log = n.log.With("node", id)
	n.token, err = LoadOrCreateToken(n.cfg.TokenFile)
	return err
}

// listen binds the HTTP address, the API socket and takes the extra
// listeners.
func (n *node) listen(context.Context) error {
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: http listen: %w", err)
	}
	n.listeners = append(n.listeners, ln)
	if n.httpAdv, err = advertise(n.cfg.HTTPAdvertise, ln.Addr()); err != nil {
		return err
	}
	// One join list for every member (a StatefulSet's): the member it names
	// itself bootstraps, the others join it.
	n.cfg.Join = joinTargets(n.cfg.Join, n.httpAdv)
	if n.cfg.APISocket != "" {
		_ = os.Remove(n.cfg.APISocket)
		uln, err := net.Listen("unix", n.cfg.APISocket)
		if err != nil {
			return fmt.Errorf("server: api socket: %w", err)
		}
		n.listeners = append(n.listeners, uln)
		if err := os.Chmod(n.cfg.APISocket, 0o600); err != nil {
			return fmt.Errorf("server: api socket: %w", err)
		}
	}
	n.listeners = append(n.listeners, n.cfg.Listeners...)
	return nil
}

// openDriver selects and builds the compute driver.
func (n *node) openDriver(context.Context) error {
	named := n.cfg.DriverName
	if n.cfg.Driver != nil {
		named = n.cfg.Driver.Capabilities().Name
	}
	name, err := selectDriver(n.cfg.DataDir, named, n.cfg.Driver != nil)
	if err != nil {
		return err
	}
	if name == DriverMemory && named == "" {
		n.log.Warn("no --driver: using the in-memory test driver in this dev data dir; no Agent runtime will run",
			"dataDir", n.cfg.DataDir)
	}
	if n.cfg.Driver != nil {
		n.driver = n.cfg.Driver
		return nil
	}
	cfg := n.cfg
	cfg.Log = n.log // the factories' records carry the node too
	d, err := newDriver(cfg, name)
	if err != nil {
		return err
	}
	n.driver = d
	// A driver that watches what it observes wakes the watcher at once
	// instead of at its next interval.
	if cn, ok := d.(compute.ChangeNotifier); ok {
		cn.NotifyChanges(func(agentIDs []string) {
			if e := n.engine.Load(); e != nil {
				e.ObserveAgents(agentIDs)
			}
		})
	}
	return nil
}

// openStore opens the Raft store; the activation engine runs while this
// node leads.
func (n *node) openStore(context.Context) error {
	// Before Raft starts, so its first election is counted too.
	if err := registerRaftMetrics(n.cfg.Metrics); err != nil {
		return err
	}
	st, err := store.Open(store.Config{
		NodeID: n.id, DataDir: n.cfg.DataDir, RaftBind: n.cfg.RaftAddr, RaftAdvertise: n.cfg.RaftAdvertise,
		HTTPAddr: n.httpAdv, Bootstrap: n.cfg.Join == "", Timeouts: n.cfg.Timeouts,
		DisablePreVote: n.cfg.DisablePreVote, Clock: n.cfg.Clock, Log: n.log,
		OnLeader: func(ctx context.Context, s *store.Store) {
			retained := make(chan struct{})
			go func() {
				defer close(retained)
				retainAudit(ctx, n.cfg.AuditRetention, s, n.cfg.Clock, n.log.With("component", "retention"))
			}()
			runEngine(ctx, n.cfg, s, n.driver, n.log, &n.engine)
			<-retained
		},
		RaftTLS: n.raftTLS(),
	})
	if err != nil {
		return err
	}
	n.st = st
	registerStoreMetrics(n.cfg.Metrics, st)
	if n.tls != nil {
		registerCertMetrics(n.cfg.Metrics, n.tls.certs)
	}
	return nil
}

// serve starts the API on every listener; the channel receives the first
// listener's failure.
func (n *node) serve() (<-chan error, error) {
	auth, oidc, err := n.authenticator(n.st.Machine())
	if err != nil {
		return nil, err
	}
	acfg := api.Config{Token: n.token, Authenticator: auth, IAM: n.iamDriver(n.st.Machine()), OIDC: oidc,
		Log: n.log.With("component", "api"), Metrics: n.cfg.Metrics, ForwardWrites: true, WithActor: store.WithActor,
		RateLimits: n.cfg.RateLimits}
	if n.tls != nil {
		acfg.ForwardTLS = n.tls.peerClient()
	}
	h, err := withConsole(api.New(acfg, backend{Store: n.st, driver: n.driver, engine: &n.engine}), n.log, n.consoleSSO)
	if err != nil {
		return nil, err
	}
	n.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: n.cfg.ReadHeaderTimeout,
		IdleTimeout:       n.cfg.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// Handshake failures (a client without the CA, plain HTTP on a TLS
		// port) are the client's; they go to the JSON log at debug.
		ErrorLog: slog.NewLogLogger(n.log.With("component", "http").Handler(), slog.LevelDebug),
	}
	errc := make(chan error, len(n.listeners))
	for _, ln := range n.listeners {
		ln := n.wrapTLS(ln)
		go func() {
			if err := n.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	return errc, nil
}

// raftTLS is the Raft transport's mutual TLS, nil with Insecure.
func (n *node) raftTLS() *store.RaftTLS {
	if n.tls == nil {
		return nil
	}
	return n.tls.raft()
}

// join asks the members named in Join to add this node, in the background,
// unless it already is a member.
func (n *node) join(ctx context.Context) error {
	if n.cfg.Join == "" {
		return nil
	}
	member, err := n.st.IsMember(ctx)
	if err != nil || member {
		return err
	}
	req := wire.ClusterJoin{ID: n.id, RaftAddr: n.st.RaftAddr(), HTTPAddr: n.httpAdv}
	go func() {
		var opts []client.Option
		if n.tls != nil {
			opts = append(opts, client.WithTLS(n.tls.peerClient()))
		}
		if err := joinCluster(ctx, n.log, n.cfg.Join, n.token, req, opts...); err != nil && ctx.Err() == nil {
			n.log.Error("join failed", "error", err.Error())
		}
	}()
	return nil
}

// shutdown hands leadership off and drains HTTP; close does the rest.
func (n *node) shutdown() {
	n.log.Info("coordinator stopping")
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	if n.st.IsLeader() {
		tctx, tcancel := context.WithTimeout(sctx, transferTimeout)
		if err := n.st.TransferLeadership(tctx, ""); err != nil {
			n.log.Info("leadership hand-off skipped", "error", err.Error())
		}
		tcancel()
	}
	if err := n.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		n.log.Warn("http shutdown", "error", err.Error())
	}
}

// close releases whatever Run opened, in reverse order.
func (n *node) close() {
	if n.standby != nil {
		n.standby()
	}
	if n.st != nil {
		if err := n.st.Close(); err != nil {
			n.log.Warn("store close", "error", err.Error())
		}
	}
	if n.driver != nil {
		if s, ok := n.driver.(Shutdowner); ok {
			ctx, cancel := context.WithTimeout(context.Background(), DriverShutdownTimeout)
			s.Shutdown(ctx)
			cancel()
		}
		if c, ok := n.driver.(io.Closer); ok {
			_ = c.Close()
		}
	}
	for _, ln := range n.listeners {
		_ = ln.Close()
	}
	if n.st != nil {
		n.log.Info("coordinator stopped")
	}
}

// advertise picks the address others are told: the configured one, else the
// bound one unless it is unspecified (0.0.0.0), which nobody can dial.
func advertise(configured string, bound net.Addr) (string, error) {
	if configured != "" {
		if _, _, err := net.SplitHostPort(configured); err != nil {
			return "", fmt.Errorf("server: http advertise %q: %w", configured, err)
		}
		return configured, nil
	}
	ta, ok := bound.(*net.TCPAddr)
	if ok && ta.IP.IsUnspecified() {
		return "", fmt.Errorf("server: http address %s is unspecified: set the HTTP advertise address", bound)
	}
	return bound.String(), nil
}
