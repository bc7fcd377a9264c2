// Package client is the Go client of the coordinator's HTTP API (docs/API.md).
// It follows NOT_LEADER answers to the leader the error names, so callers
// may talk to any coordinator replica. Every write carries an
// Idempotency-Key, the same on every attempt, so the client retries what is
// safe to retry (a lost answer, an election) without a second effect; reads
// may ask for linearizable, at-least-index or blocking answers (read.go).
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/shared/codes"
)

// DefaultServer is the coordinator's default listen address; without a
// scheme it is https with a CA (WithTLS, WithCA), http otherwise.
const DefaultServer = "127.0.0.1:7400"

// maxRedirects bounds NOT_LEADER hops per call.
const maxRedirects = 3

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

// Sentinels an *Error matches with errors.Is.
var (
	// ErrNotLeader: code NOT_LEADER (no leader known, unreachable, or a
	// redirect chain that did not end).
	ErrNotLeader = errors.New("client: NOT_LEADER")
	// ErrOutcomeUnknown: code OUTCOME_UNKNOWN — the write may or may not
	// have been applied. The client has already retried it with its
	// Idempotency-Key; repeating the call with the same key
	// (WithIdempotencyKey) stays safe.
	ErrOutcomeUnknown = errors.New("client: outcome unknown")
)

// Error is an API error answer.
type Error struct {
	Status  int
	Code    codes.Code
	Message string
	Details map[string]any
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

// Is matches ErrNotLeader for NOT_LEADER answers and ErrOutcomeUnknown for
// OUTCOME_UNKNOWN ones.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotLeader:
		return e.Code == codes.NotLeader
	case ErrOutcomeUnknown:
		return e.Code == codes.OutcomeUnknown
	}
	return false
}

// Leader returns the leader address a NOT_LEADER answer names.
func (e *Error) Leader() string {
	s, _ := e.Details["leader"].(string)
	return s
}

// retryable reports whether the same call may be sent again: the write
// carries its Idempotency-Key, so a repeat never takes effect twice.
func (e *Error) retryable() bool {
	switch e.Code {
	case codes.OutcomeUnknown, codes.NotReady:
		return true
	case codes.NotLeader:
		return e.Leader() == "" || e.Status == http.StatusServiceUnavailable
	case codes.RateLimited:
		// A refused request was not processed: waiting as asked and
		// sending it again is safe; a long lockout is the caller's to see.
		return e.retryAfter() <= maxRateLimitWait
	}
	return false
}

// maxRateLimitWait is the longest Retry-After of a 429 the client waits
// out by itself.
const maxRateLimitWait = 5 * time.Second

// retryAfter is the wait a RATE_LIMITED answer asks for.
func (e *Error) retryAfter() time.Duration {
	s, _ := e.Details["retryAfterSeconds"].(float64)
	return time.Duration(s * float64(time.Second))
}

// Client calls one coordinator (and whichever leader it points to).
type Client struct {
	server string
	token  string
	hc     *http.Client
	// explicitHTTP: the server URL said http://, which TLS options keep.
	explicitHTTP bool
	// scheme is what an address without one gets: https once a TLS
	// configuration is given.
	scheme  string
	retry   Retry
	mono    bool
	highest atomic.Uint64 // the highest X-Oce-Index seen
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (e.g. an httptest server's); one
// without a Transport gets the client's own (see newTransport).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc.Transport == nil {
			own := *hc
			own.Transport = newTransport()
			hc = &own
		}
		c.hc = hc
	}
}

// maxIdlePerHost keeps connections of concurrent callers open for reuse:
// net/http's default of 2 makes a busy client dial (and, with TLS,
// handshake) again for most requests.
const maxIdlePerHost = 64

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdlePerHost
	return t
}

// WithTLS makes the client speak TLS with cfg (addresses without a scheme
// become https://). For a unix:// server the name checked is "localhost".
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		c.scheme = "https"
		if strings.HasPrefix(c.server, "http://"+unixHost) {
			cfg = cfg.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = "localhost"
			}
			c.server = "https://" + unixHost
		} else if !c.explicitHTTP && strings.HasPrefix(c.server, "http://") {
			c.server = "https://" + strings.TrimPrefix(c.server, "http://")
		}
		t := transportOf(c.hc)
		t.TLSClientConfig = cfg
		c.hc = &http.Client{Transport: t, Timeout: c.hc.Timeout}
	}
}

// WithCA makes the client trust the coordinator certificates pool signed.
func WithCA(pool *x509.CertPool) Option {
	return WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
}

// LoadCA reads a PEM CA bundle for WithCA.
func LoadCA(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("client: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("client: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// transportOf returns a copy of hc's transport to configure.
func transportOf(hc *http.Client) *http.Transport {
	if t, ok := hc.Transport.(*http.Transport); ok {
		return t.Clone()
	}
	return newTransport()
}

// unixHost is the host name of requests to a unix:// server.
const unixHost = "coordinator.sock"

// New returns a client of the coordinator at server ("host:port", an
// http(s) URL, or unix:///path/to/api.sock for a coordinator's API socket)
// authenticating with the bearer token.
func New(server, token string, opts ...Option) *Client {
	c := &Client{server: normalize(server, "http"), token: token, hc: &http.Client{Transport: newTransport()}, scheme: "http",
		explicitHTTP: strings.HasPrefix(server, "http://"), retry: DefaultRetry}
	if sock, ok := strings.CutPrefix(server, "unix://"); ok {
		c.server = "http://" + unixHost
		c.hc = &http.Client{Transport: unixTransport(sock)}
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// unixTransport dials sock for requests to unixHost and TCP for any other
// host (a leader a NOT_LEADER answer names).
func unixTransport(sock string) *http.Transport {
	t := newTransport()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		if host, _, _ := net.SplitHostPort(addr); host == unixHost {
			return d.DialContext(ctx, "unix", sock)
		}
		return d.DialContext(ctx, network, addr)
	}
	return t
}

// Ready reports whether the coordinator answers GET /readyz with 200 (a
// leader is known and the local state is applied). It asks once: readiness
// is a probe, not something to retry.
func (c *Client) Ready(ctx context.Context) error {
	resp, err := c.exchange(ctx, c.server, http.MethodGet, "/readyz", nil, nil, "", "")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Server returns the base URL the client currently talks to.
func (c *Client) Server() string { return c.server }

// normalize turns an address into a base URL; one without a scheme gets
// scheme.
func normalize(s, scheme string) string {
	if s == "" {
		s = DefaultServer
	}
	if !strings.Contains(s, "://") {
		s = scheme + "://" + s
	}
	return strings.TrimRight(s, "/")
}

// do sends one request and decodes a JSON answer into out (when non-nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
		body = b
	}
	resp, err := c.send(ctx, method, path, query, func() io.Reader {
		if body == nil {
			return nil
		}
		return bytes.NewReader(body)
	}, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: decode %s %s: %w", method, path, err)
	}
	return nil
}

func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}

// send performs the exchange: it follows NOT_LEADER to the named leader
// (at most maxRedirects hops) and retries what is safe to retry (transport
// failures, OUTCOME_UNKNOWN, no leader yet, NOT_READY) with backoff, from
// the configured server again. Every write carries one Idempotency-Key for
// all its attempts. A 2xx response is returned open; anything else becomes
// an *Error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body func() io.Reader, ctype string) (*http.Response, error) {
	key := ""
	if isWrite(method) {
		key = keyFrom(ctx)
		query = dryRunQuery(ctx, query)
	} else {
		query = c.readQuery(ctx, query)
	}
	base, hops := c.server, 0
	for attempt := 0; ; attempt++ {
		resp, err := c.exchange(ctx, base, method, path, query, body, ctype, key)
		if err == nil {
			return resp, nil
		}
		var apiErr *Error
		isAPI := errors.As(err, &apiErr)
		if isAPI && apiErr.Code == codes.NotLeader && apiErr.Leader() != "" && apiErr.Status != http.StatusServiceUnavailable {
			if hops < maxRedirects {
				base, hops = normalize(apiErr.Leader(), c.scheme), hops+1
				continue
			}
			return nil, err
		}
		if (isAPI && !apiErr.retryable()) || errors.Is(err, ErrUntrusted) || attempt >= c.retry.Attempts || ctx.Err() != nil {
			return nil, err
		}
		// Start over from the configured server: a leader we were sent
		// to may be the member that failed.
		base, hops = c.server, 0
		wait := c.retry.delay(attempt)
		if isAPI {
			wait = max(wait, apiErr.retryAfter())
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// exchange sends one attempt.
func (c *Client) exchange(ctx context.Context, base, method, path string, query url.Values, body func() io.Reader,
	ctype, key string) (*http.Response, error) {
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = body()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, &Error{Code: codes.InvalidRequest, Message: fmt.Sprintf("client: %s %s: %v", method, path, err)}
	}
	if rd != nil {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if key != "" {
		req.Header.Set(IdempotencyKeyHeader, key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, u, explainTransport(err))
	}
	c.observe(ctx, resp)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	apiErr := readError(resp)
	resp.Body.Close()
	return nil, apiErr
}

func readError(resp *http.Response) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb wire.ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		if strings.Contains(msg, "HTTP request to an HTTPS server") {
			msg = "the coordinator speaks TLS: use an https:// server and trust its CA (occ --ca-file, or ca: in the occ.yaml context)"
		}
		return &Error{Status: resp.StatusCode, Code: codes.Internal, Message: fmt.Sprintf("unexpected answer %s: %s", resp.Status, msg)}
	}
	return &Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Details: eb.Error.Details}
}

func esc(s string) string { return url.PathEscape(s) }

// ErrUntrusted: the coordinator's certificate is not signed by a CA the
// client trusts.
var ErrUntrusted = errors.New("client: the coordinator's certificate is not trusted")

// explainTransport names the usual TLS mistakes plainly.
func explainTransport(err error) error {
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown), errors.As(err, &verify) && !errors.As(err, &host):
		return fmt.Errorf("%w (%v): trust the cluster CA — occ --ca-file FILE, or ca: in the occ.yaml context (a local coordinator writes .oce/coordinator/tls/ca.crt)", ErrUntrusted, err)
	case errors.As(err, &host):
		return fmt.Errorf("%w: the certificate does not name this server: %v: dial a name it holds, or check it against one "+
			"(occ --tls-server-name NAME, e.g. through kubectl port-forward)", ErrUntrusted, err)
	case strings.Contains(err.Error(), "first record does not look like a TLS handshake"):
		return fmt.Errorf("the coordinator does not speak TLS here (started with --insecure?): use an http:// server: %w", err)
	}
	return err
}
