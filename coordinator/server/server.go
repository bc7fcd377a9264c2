// Package server assembles one coordinator process: the replicated store,
// the HTTP API, the compute driver and the activation engine, which runs
// only while this node is the Raft leader.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/coordinator/store"
)

// The embedded default: one local node that bootstraps itself.
const (
	DefaultDataDir  = ".oce/coordinator"
	DefaultRaftAddr = "127.0.0.1:7300"
	DefaultHTTPAddr = "127.0.0.1:7400"
	DefaultDriver   = "memory"
	// DefaultShutdownTimeout bounds the graceful stop (leadership hand-off,
	// HTTP drain).
	DefaultShutdownTimeout = 10 * time.Second
	// TokenFileName is the bearer token's file inside the data dir.
	TokenFileName = "token"

	readHeaderTimeout = 10 * time.Second
	transferTimeout   = 3 * time.Second
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
	// Join is a comma-separated list of members' HTTP addresses to join
	// through; empty bootstraps a new cluster when there is no state.
	Join string
	// Driver selects the compute driver ("memory").
	Driver string
	// TokenFile is the bearer token file (default <DataDir>/token). It is
	// created (0600) with a random token when missing; every member of a
	// cluster must hold the same token.
	TokenFile string
	// Timeouts are the Raft timings (hashicorp/raft defaults when zero).
	Timeouts store.Timeouts
	// Engine tunes the activation engine (its defaults when zero); Owner is
	// always the node id.
	Engine engine.Config
	// ShutdownTimeout bounds the graceful stop.
	ShutdownTimeout time.Duration
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
	if c.Driver == "" {
		c.Driver = DefaultDriver
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
	return c
}

// backend is the API's Backend: the store plus the compute driver.
type backend struct {
	*store.Store
	driver compute.Driver
}

// Driver implements api.Backend.
func (b backend) Driver() compute.Driver { return b.driver }

// The contracts the assembly relies on.
var (
	_ api.Backend     = backend{}
	_ api.Readier     = backend{}
	_ engine.Proposer = (*store.Store)(nil)
)

// Run runs one coordinator until ctx ends, then stops gracefully: a leader
// hands leadership to another member first, the HTTP server drains, Raft
// shuts down.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	log := cfg.Log
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("server: data dir: %w", err)
	}
	id, err := resolveNodeID(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return err
	}
	log = log.With("node", id)
	token, err := LoadOrCreateToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: http listen: %w", err)
	}
	defer ln.Close()
	httpAdv, err := advertise(cfg.HTTPAdvertise, ln.Addr())
	if err != nil {
		return err
	}
	driver, err := newDriver(cfg)
	if err != nil {
		return err
	}

	st, err := store.Open(store.Config{
		NodeID: id, DataDir: cfg.DataDir, RaftBind: cfg.RaftAddr, RaftAdvertise: cfg.RaftAdvertise,
		HTTPAddr: httpAdv, Bootstrap: cfg.Join == "", Timeouts: cfg.Timeouts, Clock: cfg.Clock, Log: log,
		OnLeader: func(ctx context.Context, s *store.Store) { runEngine(ctx, cfg, s, driver, log) },
	})
	if err != nil {
		return err
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	registerStoreMetrics(reg, st)
	srv := &http.Server{
		Handler: api.New(api.Config{Token: token, Log: log.With("component", "api"), Metrics: reg,
			ForwardWrites: true, WithActor: store.WithActor}, backend{Store: st, driver: driver}),
		ReadHeaderTimeout: readHeaderTimeout,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("coordinator started", "raftAddr", st.RaftAddr(), "httpAddr", httpAdv, "dataDir", cfg.DataDir,
		"driver", cfg.Driver, "join", cfg.Join != "")

	if cfg.Join != "" {
		member, err := st.IsMember(ctx)
		if err != nil {
			return err
		}
		if !member {
			go func() {
				req := joinRequest{ID: id, RaftAddr: st.RaftAddr(), HTTPAddr: httpAdv}
				if err := joinCluster(ctx, log, cfg.Join, token, req); err != nil && ctx.Err() == nil {
					log.Error("join failed", "error", err.Error())
				}
			}()
		}
	}

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("server: http: %w", err)
	}
	log.Info("coordinator stopping")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if st.IsLeader() {
		tctx, tcancel := context.WithTimeout(sctx, transferTimeout)
		if err := st.TransferLeadership(tctx, ""); err != nil {
			log.Info("leadership hand-off skipped", "error", err.Error())
		}
		tcancel()
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "error", err.Error())
	}
	if err := st.Close(); err != nil {
		log.Warn("store close", "error", err.Error())
	}
	log.Info("coordinator stopped")
	return runErr
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

func registerStoreMetrics(reg *prometheus.Registry, st *store.Store) {
	g := func(name, help string, f func(store.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(st.Stats()) })
	}
	c := func(name, help string, f func(store.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(st.Stats()) })
	}
	reg.MustRegister(
		g("oce_raft_leader", "1 while this node is the Raft leader.", func(s store.Stats) float64 {
			if s.Leader {
				return 1
			}
			return 0
		}),
		g("oce_raft_term", "Current Raft term.", func(s store.Stats) float64 { return float64(s.Term) }),
		g("oce_raft_applied_index", "Last Raft index applied to the state machine.", func(s store.Stats) float64 { return float64(s.AppliedIndex) }),
		g("oce_raft_commit_index", "Last Raft index known committed.", func(s store.Stats) float64 { return float64(s.CommitIndex) }),
		c("oce_store_proposals_total", "Proposals made on this node.", func(s store.Stats) float64 { return float64(s.Proposals) }),
		c("oce_store_propose_failures_total", "Proposals that failed for want of leadership.", func(s store.Stats) float64 { return float64(s.ProposeFailures) }),
		c("oce_store_leaderships_total", "Terms in which this node ran leader work.", func(s store.Stats) float64 { return float64(s.Leaderships) }),
	)
}
