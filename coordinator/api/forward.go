package api

import (
	"errors"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"

	"oce.dev/oce/shared/codes"
)

// leaderURL turns a leader HTTP address ("host:port" or a URL) into a URL;
// members speak TLS to each other when ForwardTLS is set.
func (s *server) leaderURL(addr string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		scheme := "http://"
		if s.cfg.ForwardTLS != nil {
			scheme = "https://"
		}
		addr = scheme + addr
	}
	return url.Parse(addr)
}

// errSentToLeader marks a forward that failed after the request's headers
// went out: the leader may have executed it.
var errSentToLeader = errors.New("api: forward failed after the request was sent")

// sentTracking records whether a forwarded request left this node, so a
// failure is told apart: a refused or failed dial sent nothing (the client
// may resend anywhere), anything later leaves the outcome unknown.
type sentTracking struct{ base http.RoundTripper }

func (t sentTracking) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }}
	resp, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil && sent.Load() {
		return nil, errors.Join(errSentToLeader, err)
	}
	return resp, err
}

// forward reverse-proxies a request to the leader, keeping the bearer token
// and the Idempotency-Key. The forwarded mark stops a second hop when
// leadership moved meanwhile. A write whose forward failed after it was sent
// answers OUTCOME_UNKNOWN, never NOT_LEADER: the leader may have applied it.
func (s *server) forward(w http.ResponseWriter, r *http.Request, leader string) {
	target, err := s.leaderURL(leader)
	if err != nil {
		writeError(w, notLeader(leader))
		return
	}
	base := s.forwardTransport
	if base == nil {
		base = http.DefaultTransport
	}
	p := &httputil.ReverseProxy{
		Transport: sentTracking{base: base},
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("forward to leader failed", "leader", leader, "error", err.Error())
			if errors.Is(err, errSentToLeader) && r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeError(w, outcomeUnknown("the leader received the request but its answer was lost"))
				return
			}
			writeError(w, &Error{Status: http.StatusServiceUnavailable, Code: codes.NotLeader,
				Message: "the leader could not be reached", Details: map[string]any{"leader": leader}})
		},
	}
	p.ServeHTTP(w, r)
}
