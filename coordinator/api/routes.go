package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/codes"
)

// handlerFunc is a route handler; a returned error is rendered as the
// closed-set error envelope.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

const forwardedHeader = "X-Oce-Forwarded"

func (s *server) routes(reg *prometheus.Registry) {
	s.mux = http.NewServeMux()
	s.metricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	s.registerRoutes()
}

// registerRoutes registers every route; Routes() runs it without a backend
// to list them.
func (s *server) registerRoutes() {
	m := s.mux
	const ns = "/v1/namespaces/{ns}"
	const agent = ns + "/agents/{agent}"

	m.HandleFunc("GET /livez", s.livez)
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /v1/auth", s.authConfig)
	s.readWith("GET /metrics", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.allow(r, iam.ViewMetrics, iam.ClusterRes(), ""); err != nil {
			return err
		}
		s.metricsHandler.ServeHTTP(w, r)
		return nil
	}, readOpts{ungated: true, streamed: true})

	s.read("GET /v1/namespaces", s.listNamespaces)
	s.write("POST /v1/namespaces", s.createNamespace)
	s.read("GET "+ns, s.getNamespace)
	s.write("DELETE "+ns, s.deleteNamespace)
	s.write("PUT "+ns+"/quota", s.setQuota)
	s.write("PUT "+ns+"/labels", s.putNamespaceLabels)

	s.read("GET "+ns+"/configurations", s.listConfigurations)
	s.write("POST "+ns+"/configurations", s.createConfiguration)
	s.read("GET "+ns+"/configurations/{cfg}", s.getConfiguration)
	s.write("PUT "+ns+"/configurations/{cfg}", s.updateConfiguration)
	s.write("DELETE "+ns+"/configurations/{cfg}", s.deleteConfiguration)
	s.write("PUT "+ns+"/configurations/{cfg}/labels", s.putConfigurationLabels)

	s.read("GET "+ns+"/agents", s.listAgents)
	s.write("POST "+ns+"/agents", s.createAgent)
	s.read("GET "+agent, s.getAgent)
	s.write("PATCH "+agent, s.updateAgent)
	s.write("DELETE "+agent, s.deleteAgent)
	s.write("PUT "+agent+"/labels", s.putAgentLabels)
	s.write("POST "+agent+"/deploy", s.deployAgent)
	s.write("POST "+agent+"/stop", s.stopAgent)
	s.read("GET "+agent+"/revisions", s.listRevisions)
	s.read("GET "+agent+"/revisions/{rev}", s.getRevision)
	s.read("GET "+agent+"/work", s.agentWork)
	s.read("GET "+agent+"/endpoints", s.endpoints)
	s.read("POST "+agent+"/messages", s.messages)                      // any member relays a turn; no state changes
	s.readWith("GET "+agent+"/logs", s.logs, readOpts{streamed: true}) // followed: written as it grows
	s.consoleRoutes(ns, agent)                                         // workspace documents and overviews (workspace.go, overview.go)
	s.credentialRoutes(ns)                                             // credential sources (credentials.go)

	s.read("GET /v1/work", s.listWork)
	s.read("GET /v1/work/{id}", s.getWork)
	s.read("GET /v1/audit", s.listAudit)
	s.read("GET /v1/installation", s.installation)
	s.read("GET /v1/status", s.status)
	s.read("GET /v1/version", s.version)
	s.read("GET /v1/index", s.index)

	s.readWith("GET /v1/cluster", s.cluster, readOpts{ungated: true})
	s.admin("POST /v1/cluster/join", s.clusterJoin)
	s.admin("POST /v1/cluster/remove", s.clusterRemove)
	s.admin("POST /v1/cluster/transfer", s.clusterTransfer)
	s.readWith("GET /v1/cluster/snapshot", s.clusterSnapshot, readOpts{ungated: true, streamed: true})
	s.admin("POST /v1/cluster/restore", s.clusterRestore)

	s.identityRoutes()

	m.Handle("/", s.authed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("no route for %s %s", r.Method, r.URL.Path))
	})))
}

// register records a route with its action; a route without one is a
// programming error caught at start.
func (s *server) register(pattern string) {
	if _, ok := routeActions[pattern]; !ok {
		panic("api: route " + pattern + " names no action in routeActions")
	}
	if s.registered != nil {
		*s.registered = append(*s.registered, Route{Pattern: pattern, Action: routeActions[pattern]})
	}
}

// read registers a route any node serves from its local state, under the
// read modes of consistency.go.
func (s *server) read(pattern string, h handlerFunc) {
	s.readWith(pattern, h, readOpts{})
}

func (s *server) readWith(pattern string, h handlerFunc, o readOpts) {
	s.register(pattern)
	s.mux.Handle(pattern, s.authed(s.wrap(pattern, s.consistent(h, o))))
}

// write registers a state write: only the leader executes it, recording its
// Idempotency-Key (idempotency.go); ?dryRun=server runs it against a copy
// of the state (dryrun.go).
func (s *server) write(pattern string, h handlerFunc) {
	s.leaderOnly(pattern, s.dryRunnable(pattern, s.keyed(h)))
}

// admin registers a cluster administration route: leader only; its effects
// are not state entries, so a key is not recorded (they are idempotent by
// design: a repeated join, removal or restore ends in the same state).
func (s *server) admin(pattern string, h handlerFunc) {
	s.leaderOnly(pattern, h)
}

// leaderOnly registers a route that only the leader executes, and only once
// it is current (leading).
func (s *server) leaderOnly(pattern string, h handlerFunc) {
	s.register(pattern)
	inner := s.wrap(pattern, h)
	s.mux.Handle(pattern, s.authed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.b.IsLeader() {
			if err := s.leading(r.Context()); err != nil {
				writeError(w, err)
				return
			}
		}
		if !s.b.IsLeader() {
			leader := s.b.LeaderHTTPAddr()
			if s.cfg.ForwardWrites && leader != "" && r.Header.Get(forwardedHeader) == "" {
				s.forward(w, r, leader)
				return
			}
			writeError(w, notLeader(leader))
			return
		}
		inner.ServeHTTP(w, r)
	})))
}

// leading waits until a new leader has applied what earlier terms committed
// before it decides a write on its state: right after an election the
// previous leader's last acknowledged entries can be committed but not yet
// applied here, and a write decided then could answer NOT_FOUND for what
// exists or pass a check the cluster's state fails. A leader that does not
// get there within catchUpTimeout answers NOT_READY (retryable); one that
// lost its leadership meanwhile falls through to the follower's answer.
func (s *server) leading(ctx context.Context) *Error {
	pos, ok := s.b.(Positions)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	if err := pos.WaitLeading(ctx); err != nil && s.b.IsLeader() {
		return notReady("this new leader is still applying the previous term's log", pos)
	}
	return nil
}

func (s *server) wrap(pattern string, h handlerFunc) http.Handler {
	route := pattern
	segs, files := wildcards(pattern), strings.Contains(pattern, "/files/") // bounds.go
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), routeKey{}, route))
		err := checkPath(r, segs, files)
		if err == nil {
			err = h(sw, r)
		}
		if err != nil {
			e := toError(err)
			if e.Status >= 500 {
				s.log.Error("request failed", "route", route, "status", e.Status, "code", e.Code, "error", e.Message)
			} else {
				s.log.Info("request rejected", "route", route, "status", e.Status, "code", e.Code,
					"actor", principal(r).Actor())
			}
			writeError(sw, e)
		}
		s.metrics.requests.WithLabelValues(route, statusClass(sw.status)).Inc()
		s.metrics.requestSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// authed authenticates the request (authn middleware): the principal goes
// into its context; without a valid credential it answers 401. A source
// locked out by its failed authentications, and a principal over its rate,
// get 429 (ratelimit.go).
func (s *server) authed(h http.Handler) http.Handler {
	var limited http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.principalLimited(w, r) {
			h.ServeHTTP(w, r)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.lockedOut(w, r) {
			return
		}
		s.authMiddleware.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nextKey{}, limited)))
	})
}

type nextKey struct{}

// serveNext runs the handler authed wrapped, once authentication passed.
func serveNext(w http.ResponseWriter, r *http.Request) {
	r.Context().Value(nextKey{}).(http.Handler).ServeHTTP(w, r)
}

// unauthorized answers a request authentication refused.
func (s *server) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	s.failedAuth(r)
	s.log.Info("request unauthenticated", "path", truncate(r.URL.Path, 256), "reason", err.Error())
	w.Header().Set("WWW-Authenticate", `Bearer realm="oce"`)
	writeError(w, &Error{Status: http.StatusUnauthorized, Code: codes.Unauthorized,
		Message: "a valid bearer token is required"})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streamed responses (snapshot) flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func statusClass(code int) string {
	if code == 0 {
		code = http.StatusOK
	}
	return string(rune('0'+code/100)) + "xx"
}
