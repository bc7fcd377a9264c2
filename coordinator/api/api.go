// Package api is the coordinator's HTTP/JSON API under /v1: Namespaces,
// Configurations, Agents, deploy/stop/delete, revisions, work, audit, the
// installation's capabilities and cluster administration, plus /readyz,
// /livez and /metrics. Every write runs on the Raft leader: a follower
// forwards it (Config.ForwardWrites) or answers NOT_LEADER with the leader's
// address. Ids are minted here, on the leader, never inside Apply.
package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
)

// Backend is the replicated store the API drives; coordinator/store
// implements it.
type Backend interface {
	// Propose replicates one command and returns Apply's result. On a
	// follower the error offers NotLeader.
	Propose(ctx context.Context, typ string, payload any) (any, error)
	Machine() *state.Machine
	VerifyLeader(ctx context.Context) error
	IsLeader() bool
	LeaderHTTPAddr() string
	// Cluster returns JSON-able cluster information (members, state, term,
	// lastApplied, digest).
	Cluster(ctx context.Context) (any, error)
	Join(ctx context.Context, id, raftAddr, httpAddr string) error
	Remove(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
	SnapshotSave(ctx context.Context, w io.Writer) error
	SnapshotRestore(ctx context.Context, r io.Reader) error
	// Driver is the selected compute driver (capabilities, installation).
	Driver() compute.Driver
}

// Readier is optionally implemented by a Backend whose readiness needs more
// than a known leader (e.g. the local state has caught up with the log).
type Readier interface {
	Ready(ctx context.Context) error
}

// Config configures the API handler.
type Config struct {
	// Token is the bearer token every request except /livez and /readyz
	// must carry. Empty disables authentication (tests only).
	Token string
	// MaxBodyBytes bounds request bodies (snapshot restore excepted);
	// zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Log receives one record per failed request; nil discards.
	Log *slog.Logger
	// ForwardWrites makes a follower reverse-proxy writes to the leader
	// instead of answering NOT_LEADER.
	ForwardWrites bool
	// Metrics is the registry /metrics serves and the API registers its
	// collectors in; nil makes a private one.
	Metrics *prometheus.Registry
	// MaxAttempts of enqueued work; zero means the state machine's default.
	MaxAttempts int
	// Actor names the authenticated principal recorded with every
	// proposal (the audit actor); empty means DefaultActor.
	Actor string
	// WithActor attaches the actor to a proposal's context
	// (store.WithActor); nil leaves the context unchanged.
	WithActor func(ctx context.Context, actor string) context.Context
	// HarnessVersions maps harness id to the approved version admission
	// freezes into revisions; nil means admission's defaults.
	HarnessVersions map[string]string
}

// DefaultActor is the actor of requests authenticated by the bearer token.
const DefaultActor = "admin"

type server struct {
	cfg      Config
	b        Backend
	log      *slog.Logger
	maxBody  int64
	metrics  *metrics
	mux      *http.ServeMux
	versions map[string]string
}

// New returns the API handler over b.
func New(cfg Config, b Backend) http.Handler {
	s := &server{cfg: cfg, b: b, log: cfg.Log, maxBody: cfg.MaxBodyBytes,
		versions: cfg.HarnessVersions}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if s.cfg.Actor == "" {
		s.cfg.Actor = DefaultActor
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(reg, b)
	s.routes(reg)
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}
