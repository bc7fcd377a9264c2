package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Client errors callers branch on.
var (
	// ErrUnauthorized: the peer refused the remote-status bearer.
	ErrUnauthorized = errors.New("status: unauthorized")
	// ErrNotPublished: the peer has not published its plugin status yet.
	ErrNotPublished = errors.New("status: plugin status not published")
	// ErrInvalidStatus: the peer answered something that is not a plugin status.
	ErrInvalidStatus = errors.New("status: invalid plugin status")
)

// RemoteErrorReason maps a FetchRemote error to a closed, log-safe token
// (the reason of a runtime.peer_status event): unauthorized, not-published,
// invalid-status, timeout or unreachable; "" for nil.
func RemoteErrorReason(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnauthorized):
		return "unauthorized"
	case errors.Is(err, ErrNotPublished):
		return "not-published"
	case errors.Is(err, ErrInvalidStatus):
		return "invalid-status"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "unreachable"
	}
}

// maxBody bounds what a client reads from a status answer.
const maxBody = 1 << 20

// maxReasonBytes bounds the readiness reason a probe prints.
const maxReasonBytes = 512

// client talks to status servers directly: no proxy from the environment
// (peers are pod-local or in-cluster) and no redirects (the bearer must not
// travel anywhere else).
var client = &http.Client{
	Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: ReadyTimeout}).DialContext,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		DisableCompression:    true,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// FetchRemote reads a peer's plugin status with the remote-status bearer.
// url is the full remote-status URL, or a base URL ("http://host:18791")
// to which PathRemoteStatus is appended. A refused bearer gives
// ErrUnauthorized, an unpublished status ErrNotPublished, a malformed answer
// ErrInvalidStatus.
func FetchRemote(ctx context.Context, url, token string) (PluginStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return PluginStatus{}, fmt.Errorf("status: remote request: %w", err)
	}
	if req.URL.Path == "" || req.URL.Path == "/" {
		req.URL.Path = PathRemoteStatus
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return PluginStatus{}, fmt.Errorf("status: remote request: unsupported scheme %q", req.URL.Scheme)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return PluginStatus{}, fmt.Errorf("status: remote status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return PluginStatus{}, fmt.Errorf("status: remote status: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return PluginStatus{}, ErrUnauthorized
	case http.StatusServiceUnavailable:
		return PluginStatus{}, ErrNotPublished
	default:
		return PluginStatus{}, fmt.Errorf("status: remote status: HTTP %d", resp.StatusCode)
	}
	if len(body) > maxBody {
		return PluginStatus{}, fmt.Errorf("%w: answer too large", ErrInvalidStatus)
	}
	var p PluginStatus
	if err := json.Unmarshal(body, &p); err != nil {
		return PluginStatus{}, fmt.Errorf("%w: %w", ErrInvalidStatus, err)
	}
	if err := p.Validate(); err != nil {
		return PluginStatus{}, err
	}
	return p, nil
}

// ReadyCheck is what the `gatewayd ready` / `harnessd ready` exec probes do:
// GET /readyz on addr ("127.0.0.1:18791", ":18791" for loopback, or a base
// URL) within ReadyTimeout.
// It returns ok on 200; otherwise a one-line reason: the server's own
// (NotReadyReason, with the held check and code appended when held), or
// NotReadyReason with err set when the server could not be asked.
func ReadyCheck(ctx context.Context, addr string) (ok bool, reason string, err error) {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	base := addr
	if strings.HasPrefix(base, ":") { // a bare ":18791" means this pod's own server
		base = "127.0.0.1" + base
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+PathReadyz, nil)
	if err != nil {
		return false, NotReadyReason, fmt.Errorf("status: ready request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, NotReadyReason, fmt.Errorf("status: ready check: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxReasonBytes))
	switch resp.StatusCode {
	case http.StatusOK:
		return true, "", nil
	case http.StatusServiceUnavailable:
		if r := cleanReason(string(body)); strings.HasPrefix(r, NotReadyReason) {
			return false, r, nil
		}
		return false, NotReadyReason, nil
	default:
		return false, NotReadyReason, fmt.Errorf("status: ready check: HTTP %d", resp.StatusCode)
	}
}

// cleanReason keeps the first line, printable ASCII only.
func cleanReason(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
}
