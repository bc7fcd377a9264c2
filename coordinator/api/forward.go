package api

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

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

// forward reverse-proxies a write to the leader, keeping the bearer token.
// The forwarded mark stops a second hop when leadership moved meanwhile.
func (s *server) forward(w http.ResponseWriter, r *http.Request, leader string) {
	target, err := s.leaderURL(leader)
	if err != nil {
		writeError(w, notLeader(leader))
		return
	}
	p := &httputil.ReverseProxy{
		Transport: s.forwardTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.log.Warn("forward to leader failed", "leader", leader, "error", err.Error())
			writeError(w, &Error{Status: http.StatusServiceUnavailable, Code: codes.NotLeader,
				Message: "the leader could not be reached", Details: map[string]any{"leader": leader}})
		},
	}
	p.ServeHTTP(w, r)
}
