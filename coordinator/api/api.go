// Package api is the coordinator's HTTP/JSON API under /v1: Namespaces,
// Configurations, Agents, deploy/stop/delete, revisions, work, audit, the
// installation's capabilities and cluster administration, plus /readyz,
// /livez and /metrics. Every write runs on the Raft leader: a follower
// forwards it (Config.ForwardWrites) or answers NOT_LEADER with the leader's
// address. Ids are minted here, on the leader, never inside Apply.
package api

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/buildinfo"
)

// authentication is the authn middleware for this handler.
func (s *server) authentication() http.Handler {
	next := http.HandlerFunc(serveNext)
	if s.cfg.Authenticator != nil {
		return s.cfg.Authenticator.Middleware(next, s.unauthorized)
	}
	if s.cfg.Token == "" {
		// Authentication disabled (tests): every caller is the bootstrap
		// identity.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(authn.WithPrincipal(r.Context(),
				iam.Principal{Kind: iam.KindBootstrap, Name: iam.BootstrapActor})))
		})
	}
	return authn.New(authn.Config{Bootstrap: s.cfg.Token, Machine: s.b.Machine(), Clock: time.Now}).
		Middleware(next, s.unauthorized)
}

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
	// Token is the shared bootstrap token, a cluster-admin identity. Empty
	// with no Authenticator disables authentication: every request is the
	// bootstrap identity (tests only).
	Token string
	// Authenticator authenticates callers; nil builds one from Token and
	// the Backend's state (bootstrap and minted tokens).
	Authenticator *authn.Authenticator
	// IAM is the IAMDriver; nil means the built-in Cedar driver over the
	// Backend's state.
	IAM iam.Driver
	// OIDC, when set, is announced by GET /v1/auth for occ login.
	OIDC *wire.OIDCConfig
	// MaxBodyBytes bounds request bodies (snapshot restore excepted);
	// zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Log receives one record per failed request; nil discards.
	Log *slog.Logger
	// ForwardWrites makes a follower reverse-proxy writes to the leader
	// instead of answering NOT_LEADER.
	ForwardWrites bool
	// ForwardTLS, when set, is the TLS of forwarded writes (members call
	// each other over https with their member certificates).
	ForwardTLS *tls.Config
	// Metrics is the registry /metrics serves and the API registers its
	// collectors in; nil makes a private one.
	Metrics *prometheus.Registry
	// MaxAttempts of enqueued work; zero means the state machine's default.
	MaxAttempts int
	// WithActor attaches the actor to a proposal's context
	// (store.WithActor); nil leaves the context unchanged.
	WithActor func(ctx context.Context, actor string) context.Context
	// HarnessVersions maps harness id to the approved version admission
	// freezes into revisions; nil means admission's defaults.
	HarnessVersions map[string]string
	// Build is what GET /v1/version reports; nil reads this binary's.
	Build *buildinfo.Info
	// RateLimits bounds callers' request rates (ratelimit.go); zero fields
	// take the defaults.
	RateLimits RateLimits
	// Clock paces the rate limits and dates the ages /metrics reports
	// (oce_work_oldest_queued_seconds); nil means time.Now.
	Clock func() time.Time
}

type server struct {
	cfg      Config
	b        Backend
	log      *slog.Logger
	maxBody  int64
	metrics  *metrics
	mux      *http.ServeMux
	versions map[string]string

	iam              iam.Driver
	limits           *limiter     // ratelimit.go
	denials          *denialAudit // bounds.go
	authMiddleware   http.Handler
	forwardTransport http.RoundTripper
	metricsHandler   http.Handler
	registered       *[]Route // set by Routes()

	credMu sync.Mutex // serializes credential source writes (credentials.go)
}

// New returns the API handler over b.
func New(cfg Config, b Backend) http.Handler {
	s := &server{cfg: cfg, b: b, log: cfg.Log, maxBody: cfg.MaxBodyBytes,
		versions: cfg.HarnessVersions}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	s.iam = cfg.IAM
	if s.iam == nil {
		s.iam = iam.NewCedar(b.Machine())
	}
	s.authMiddleware = s.authentication()
	if cfg.ForwardTLS != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg.ForwardTLS
		s.forwardTransport = t
	}
	if s.cfg.Build == nil {
		b := buildinfo.Read()
		s.cfg.Build = &b
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	s.metrics = newMetrics(reg, b, clock)
	s.limits, s.denials = newLimiter(cfg.RateLimits, clock), newDenialAudit(clock)
	_ = reg.Register(s.limits.refused)
	_ = reg.Register(s.denials.unrecorded)
	s.routes(reg)
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}
