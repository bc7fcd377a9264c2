package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/ratelimit"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Rate limits (issue 25; docs/API.md "Rate limits"). Each member keeps its
// own token buckets:
//
//   - per authenticated principal: every request counts (the bootstrap
//     identity, the installation's root credential that members and
//     operators' tooling use, is exempt);
//   - per source address: every request that fails authentication counts,
//     and once a source has spent its allowance every request from it is
//     answered 429 until the bucket refills (a lockout that costs a
//     guesser time, not the coordinator work). IPv6 sources count per /64.
//
// A refused request answers 429 RATE_LIMITED with Retry-After. Refusals are
// audited in aggregate: one record per limited key per auditWindow (on the
// leader), carrying how many refusals it stands for, and at most
// maxLimitRecords records a window in all.

// RateLimits configures the limits. A zero field takes its default; a
// negative rate turns that limit off.
type RateLimits struct {
	// PrincipalRate is the sustained requests per second of one
	// authenticated principal; PrincipalBurst what it may send at once.
	PrincipalRate  float64
	PrincipalBurst int
	// FailedAuthRate is the sustained failed authentications per second of
	// one source address; FailedAuthBurst how many it may fail at once.
	FailedAuthRate  float64
	FailedAuthBurst int
}

// Defaults of RateLimits.
const (
	DefaultPrincipalRate   = 50
	DefaultPrincipalBurst  = 200
	DefaultFailedAuthRate  = 1
	DefaultFailedAuthBurst = 20
)

// Bounds of the aggregate records.
const (
	auditWindow     = time.Minute
	maxLimitRecords = 100 // aggregate records a window, every key together
)

// AuditRateLimited is the audit action of a rate-limit record.
const AuditRateLimited = "oce.api.ratelimited"

func (l RateLimits) withDefaults() RateLimits {
	if l.PrincipalRate == 0 {
		l.PrincipalRate = DefaultPrincipalRate
	}
	if l.PrincipalBurst <= 0 {
		l.PrincipalBurst = DefaultPrincipalBurst
	}
	if l.FailedAuthRate == 0 {
		l.FailedAuthRate = DefaultFailedAuthRate
	}
	if l.FailedAuthBurst <= 0 {
		l.FailedAuthBurst = DefaultFailedAuthBurst
	}
	return l
}

// limiter holds the API's rate limits.
type limiter struct {
	principals *ratelimit.Set
	sources    *ratelimit.Set
	now        func() time.Time

	mu       sync.Mutex
	window   time.Time // start of the current aggregate-record window
	recorded int       // aggregate records in it

	refused *prometheus.CounterVec
}

func newLimiter(l RateLimits, now func() time.Time) *limiter {
	l = l.withDefaults()
	return &limiter{principals: ratelimit.New(l.PrincipalRate, l.PrincipalBurst, now),
		sources: ratelimit.New(l.FailedAuthRate, l.FailedAuthBurst, now), now: now,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "oce_api_rate_limited_total",
			Help: "Requests refused 429 by rate limit, by limit (principal, source)."}, []string{"limit"})}
}

// recordSlot reports whether an aggregate record fits this window.
func (l *limiter) recordSlot() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.window) >= auditWindow {
		l.window, l.recorded = now, 0
	}
	if l.recorded >= maxLimitRecords {
		return false
	}
	l.recorded++
	return true
}

// lockedOut answers 429 for a source that has spent its failed
// authentications, before its credential is even looked at.
func (s *server) lockedOut(w http.ResponseWriter, r *http.Request) bool {
	src := ratelimit.SourceKey(r.RemoteAddr)
	locked, wait := s.limits.sources.Empty(src)
	if !locked {
		return false
	}
	s.tooMany(w, r, "source", src, wait)
	return true
}

// failedAuth spends one of the source's failed authentications.
func (s *server) failedAuth(r *http.Request) {
	s.limits.sources.Take(ratelimit.SourceKey(r.RemoteAddr))
}

// principalLimited answers 429 for an authenticated principal over its
// rate.
func (s *server) principalLimited(w http.ResponseWriter, r *http.Request) bool {
	p := principal(r)
	if p.Kind == iam.KindBootstrap {
		return false
	}
	actor := p.Actor()
	ok, wait := s.limits.principals.Take(actor)
	if ok {
		return false
	}
	s.tooMany(w, r, "principal", actor, wait)
	return true
}

// tooMany answers 429 and records the refusal in aggregate.
func (s *server) tooMany(w http.ResponseWriter, r *http.Request, limit, key string, wait time.Duration) {
	s.limits.refused.WithLabelValues(limit).Inc()
	set := s.limits.principals
	if limit == "source" {
		set = s.limits.sources
	}
	if first, n := set.Refusal(key, auditWindow); first && s.b.IsLeader() && s.limits.recordSlot() {
		s.auditLimited(r, limit, key, n)
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, &Error{Status: http.StatusTooManyRequests, Code: codes.RateLimited,
		Message: fmt.Sprintf("too many requests from this %s; retry after %d s", limit, secs),
		Details: map[string]any{"limit": limit, "retryAfterSeconds": secs}})
}

// auditLimited appends the aggregate record of a limited key: the
// principal's own actor, or (for a source) the source as the actor.
func (s *server) auditLimited(r *http.Request, limit, key string, refused int) {
	actor := key
	if limit == "source" {
		actor = "source:" + key
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	p := callerProposer{s: s, actor: actor}
	if _, err := state.Propose(ctx, p, state.CmdRecordAudit, state.RecordAudit{Action: AuditRateLimited,
		Resource: state.ClusterResource, Outcome: state.OutcomeDenied, Details: map[string]string{
			"limit": limit, "refused": strconv.Itoa(refused), "window": auditWindow.String(), "code": string(codes.RateLimited)}}); err != nil {
		s.log.Warn("rate-limit audit failed", "limit", limit, "error", err.Error())
	}
}
