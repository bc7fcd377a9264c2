// Package status is the private status server every runtime wrapper
// (gatewayd, harnessd) runs on port 18791 (docs/design/reference.md#s1-3, docs/design/reference.md#s1-7, docs/design/reference.md#s1-8):
// readiness for kubelet, the held runtime failure, runtime and plugin
// status, and the HMAC-authenticated remote plugin status the Gateway reads
// from its Harness peer. Readiness reads published state only: a poll never
// starts work, and a held failure stays unready until the process stops.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
)

// DefaultPort is the status server's port (OPENCLAW_RUNTIME_STATUS_PORT).
const DefaultPort = contract.StatusPort

// DefaultAddr listens on every interface at DefaultPort: the Harness peer
// reads the remote-status route over the pod network.
var DefaultAddr = ":" + strconv.Itoa(contract.StatusPort)

// ReadyTimeout is the overall budget of one readiness exec probe (docs/design/reference.md#s1-7).
const ReadyTimeout = 2 * time.Second

// DefaultReadyCheckTimeout bounds the extra readiness check (for example the
// child's /readyz) inside one /readyz request, leaving room in ReadyTimeout.
const DefaultReadyCheckTimeout = 1500 * time.Millisecond

// NotReadyReason is the fixed reason /readyz and ReadyCheck give when the
// runtime is not ready; a held failure appends HeldSuffix.
const NotReadyReason = "runtime not ready"

// Route paths.
const (
	PathReadyz             = contract.RouteReadyz
	PathLivez              = "/livez"
	PathStartupz           = contract.RouteStartupz
	PathStatus             = "/status"
	PathRuntimeStatus      = contract.RouteRuntimeStatus
	PathDiagnostics        = "/diagnostics"
	PathRuntimeDiagnostics = "/openclaw/runtime/diagnostics"
	PathRuntimeImage       = "/openclaw/runtime/image"
	PathPluginStatus       = "/openclaw/plugin-runtime/status"
	PathRemoteStatus       = contract.RouteRemoteStatus
)

// Plugin status phases.
const (
	PluginPhasePending = "pending"
	PluginPhaseReady   = "ready"
	PluginPhaseFailed  = "failed"
)

// ErrReservedKey rejects a status section that would shadow a built-in field.
var ErrReservedKey = errors.New("status: reserved status key")

// RuntimeFailure is a held startup failure (docs/design/reference.md#s1-8).
type RuntimeFailure struct {
	Component string       `json:"component"`
	Check     string       `json:"check"`
	CheckedAt time.Time    `json:"checkedAt"`
	Code      codes.Code   `json:"code"`
	Cause     *codes.Cause `json:"cause,omitempty"`
}

// PluginFailure is one plugin that did not become ready.
type PluginFailure struct {
	PluginID string     `json:"pluginId"`
	Code     codes.Code `json:"code"`
}

// PluginStatus is what a Harness reports to its Gateway peer. StartupID and
// PodUID identify one Harness process; a change means a replacement.
type PluginStatus struct {
	StartupID           string          `json:"startupId"`
	PodUID              string          `json:"podUid"`
	SuccessfulPluginIDs []string        `json:"successfulPluginIds"`
	Failures            []PluginFailure `json:"failures"`
	Phase               string          `json:"phase"`
}

// SameIdentity reports whether p and o describe the same Harness process
// with the same plugin outcome: startupId, podUid, successful plugin IDs and
// failures (the peer-status watcher's identity, docs/design/reference.md#s1-4).
func (p PluginStatus) SameIdentity(o PluginStatus) bool {
	return p.StartupID == o.StartupID && p.PodUID == o.PodUID &&
		slices.Equal(p.SuccessfulPluginIDs, o.SuccessfulPluginIDs) && slices.Equal(p.Failures, o.Failures)
}

// Validate checks the shape of a plugin status read from a peer.
func (p PluginStatus) Validate() error {
	switch p.Phase {
	case PluginPhasePending, PluginPhaseReady, PluginPhaseFailed:
	default:
		return fmt.Errorf("%w: phase %q", ErrInvalidStatus, p.Phase)
	}
	for _, f := range p.Failures {
		if !codes.WellFormed(string(f.Code)) {
			return fmt.Errorf("%w: plugin failure code", ErrInvalidStatus)
		}
	}
	return nil
}

// AuthMode says who may call a route.
type AuthMode int

// Authentication modes. The zero value, AuthLocal, is the default of the
// status routes.
const (
	// AuthLocal admits loopback callers and callers with the remote-status bearer.
	AuthLocal AuthMode = iota
	// AuthNone admits everyone (kubelet probes).
	AuthNone
	// AuthLoopback admits loopback callers only.
	AuthLoopback
	// AuthToken admits callers with the remote-status bearer only.
	AuthToken
)

// Options configure a Server.
type Options struct {
	// Addr to listen on in ListenAndServe; empty means DefaultAddr.
	Addr string
	// Component names this runtime in status and held failures ("gateway", "agent").
	Component string
	// RevisionID is the AgentRevision this process serves; it scopes the remote-status bearer.
	RevisionID string
	// RemoteStatusKey is the HMAC key of the remote-status bearer; empty refuses every bearer.
	RemoteStatusKey []byte
	// Log receives the server's own records; nil discards them.
	Log *slog.Logger
	// Clock is time.Now when nil.
	Clock func() time.Time
	// ReadyCheckTimeout bounds the ready check per poll; zero means DefaultReadyCheckTimeout.
	ReadyCheckTimeout time.Duration
	// StatusAuth guards the status, diagnostics and plugin-status routes.
	StatusAuth AuthMode
}

// Server is the private status server. Its setters are safe for concurrent
// use with serving.
type Server struct {
	opts    Options
	clock   func() time.Time
	log     *slog.Logger
	token   string // expected remote-status bearer; "" refuses all
	mux     *http.ServeMux
	started time.Time

	mu         sync.RWMutex
	ready      bool
	startupEnd bool
	check      func(ctx context.Context) error
	held       *RuntimeFailure
	phase      string // the startup phase running now (SetPhase)
	plugin     *PluginStatus
	sections   map[string]json.RawMessage
}

// reserved status keys are the built-in fields of /status.
var reserved = map[string]bool{"component": true, "revisionId": true, "ready": true, "started": true,
	"held": true, PhaseKey: true, "runtimeFailure": true, "pluginStatus": true, "uptimeMs": true, "goroutines": true}

var (
	checkRe  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	detailRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// New returns a Server; it serves nothing until Serve or ListenAndServe.
func New(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.ReadyCheckTimeout <= 0 {
		opts.ReadyCheckTimeout = DefaultReadyCheckTimeout
	}
	s := &Server{opts: opts, clock: opts.Clock, log: opts.Log, mux: http.NewServeMux(),
		sections: map[string]json.RawMessage{}}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if len(opts.RemoteStatusKey) > 0 {
		s.token = RemoteStatusToken(opts.RemoteStatusKey, opts.RevisionID)
	}
	s.started = s.clock()
	s.routes()
	return s
}

// SetReady publishes whether startup finished and the runtime may serve.
// It has no effect once a failure is held.
func (s *Server) SetReady(ready bool) {
	s.mu.Lock()
	s.ready = ready
	s.mu.Unlock()
}

// SetReadyCheck adds a live condition to readiness (for example the child's
// /readyz answering 200). It runs only while the published state is ready
// and nothing is held, bounded by Options.ReadyCheckTimeout.
func (s *Server) SetReadyCheck(check func(ctx context.Context) error) {
	s.mu.Lock()
	s.check = check
	s.mu.Unlock()
}

// SetStarted marks the startup phases finished (/startupz answers 200).
func (s *Server) SetStarted() {
	s.mu.Lock()
	s.startupEnd = true
	s.mu.Unlock()
}

// Hold publishes a held runtime failure: from now on the runtime is started
// but never ready, and readiness polls do no work. The first hold wins. A
// malformed code becomes UNAVAILABLE and a malformed check "startup", so a
// hold always happens; an off-set cause is dropped.
func (s *Server) Hold(f RuntimeFailure) {
	if f.Component == "" {
		f.Component = s.opts.Component
	}
	if !codes.WellFormed(string(f.Code)) {
		f.Code = codes.Unavailable
	}
	if !checkRe.MatchString(f.Check) {
		f.Check = "startup"
	}
	if f.CheckedAt.IsZero() {
		f.CheckedAt = s.clock()
	}
	f.CheckedAt = f.CheckedAt.UTC()
	if f.Cause != nil {
		c := *f.Cause
		if !codes.IsCauseKind(c.Kind) {
			f.Cause = nil
		} else {
			if !detailRe.MatchString(c.Detail) {
				c.Detail = ""
			}
			f.Cause = &c
		}
	}
	s.mu.Lock()
	first := s.held == nil
	if first {
		s.held = &f
		s.ready = false
	}
	s.mu.Unlock()
	if first {
		s.log.Error("runtime failure held", "check", f.Check, "code", string(f.Code))
	}
}

// Held returns the held failure, if any.
func (s *Server) Held() (RuntimeFailure, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.held == nil {
		return RuntimeFailure{}, false
	}
	return *s.held, true
}

// SetStatus publishes a status section under key in /status (phase, peer
// identity, …). v is encoded now, so later changes to it are not seen.
func (s *Server) SetStatus(key string, v any) error {
	if key == "" || reserved[key] {
		return fmt.Errorf("%w: %q", ErrReservedKey, key)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("status: encode %q: %w", key, err)
	}
	s.mu.Lock()
	s.sections[key] = b
	s.mu.Unlock()
	return nil
}

// SetPluginStatus publishes the plugin runtime status a Gateway peer reads.
func (s *Server) SetPluginStatus(p PluginStatus) {
	p.SuccessfulPluginIDs = slices.Clone(p.SuccessfulPluginIDs)
	p.Failures = slices.Clone(p.Failures)
	if p.SuccessfulPluginIDs == nil {
		p.SuccessfulPluginIDs = []string{}
	}
	if p.Failures == nil {
		p.Failures = []PluginFailure{}
	}
	s.mu.Lock()
	s.plugin = &p
	s.mu.Unlock()
}
