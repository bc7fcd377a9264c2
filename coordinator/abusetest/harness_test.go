package abusetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/state"
)

// audience is the OIDC audience of the coordinator under test.
const audience = "oce-abuse"

// target is a running one-member coordinator and the issuer it trusts.
type target struct {
	t      testing.TB
	dir    string
	addr   string
	token  string // the bootstrap token
	issuer *oidctest.Issuer
	client *http.Client
}

// options tune a target.
type options struct {
	limits    api.RateLimits
	retention server.AuditRetention
	timeouts  time.Duration // ReadHeaderTimeout and IdleTimeout; 0 = defaults
}

// start runs a coordinator in this process on loopback: insecure (the
// suite measures the API, not TLS), the memory driver, an OIDC issuer.
func start(t testing.TB, o options) *target {
	t.Helper()
	is, err := oidctest.New(audience)
	require.NoError(t, err)
	t.Cleanup(is.Close)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := server.Config{DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Insecure: true,
		Listeners: []net.Listener{ln}, Driver: memory.New(memory.DefaultCapabilities()),
		OIDC:       authn.OIDCConfig{Issuer: is.URL(), Audience: audience},
		RateLimits: o.limits, AuditRetention: o.retention,
		ReadHeaderTimeout: o.timeouts, IdleTimeout: o.timeouts,
		Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	tg := &target{t: t, dir: dir, addr: ln.Addr().String(), issuer: is,
		client: &http.Client{Timeout: 30 * time.Second}}
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, server.TokenFileName))
		tg.token = strings.TrimSpace(string(b))
		return err == nil && tg.token != ""
	}, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		s, _ := tg.call(tg.token, "GET", "/v1/namespaces", nil)
		return s == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond)
	return tg
}

// call sends one request with bearer token (none when empty); body is
// JSON-encoded unless it is a string or nil.
func (tg *target) call(token, method, path string, body any) (int, []byte) {
	return tg.callWith(tg.client, token, method, path, body)
}

func (tg *target) callWith(c *http.Client, token, method, path string, body any) (int, []byte) {
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		b, err := json.Marshal(v)
		require.NoError(tg.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+tg.addr+path, rd)
	require.NoError(tg.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, b
}

// patient is call, waiting out 429s as Retry-After says (a well-behaved
// client of a rate-limited principal).
func (tg *target) patient(token, method, path string, body any) (int, []byte) {
	for {
		s, b := tg.call(token, method, path, body)
		if s != http.StatusTooManyRequests {
			return s, b
		}
		time.Sleep(time.Second) // Retry-After is whole seconds
	}
}

// must asserts a status and decodes the answer into out (when set).
func (tg *target) must(status int, token, method, path string, body, out any) {
	tg.t.Helper()
	s, b := tg.call(token, method, path, body)
	require.Equal(tg.t, status, s, "%s %s: %.300s", method, path, b)
	if out != nil {
		require.NoError(tg.t, json.Unmarshal(b, out))
	}
}

// user creates a user with no role and returns its minted token.
func (tg *target) user(name string) string {
	tg.t.Helper()
	tg.must(http.StatusCreated, tg.token, "POST", "/v1/users", map[string]any{"name": name}, nil)
	var m wire.MintedToken
	tg.must(http.StatusCreated, tg.token, "POST", "/v1/tokens", map[string]any{"user": name}, &m)
	return m.Token
}

// auditBytes is the size of the whole audit log as the API serves it
// (JSON), and its record count.
func (tg *target) auditBytes() (int, int) {
	tg.t.Helper()
	total, n := 0, 0
	after := int64(0)
	for {
		var list wire.List[json.RawMessage]
		tg.must(http.StatusOK, tg.token, "GET", "/v1/audit?limit=1000&after="+strconv.FormatInt(after, 10), nil, &list)
		for _, r := range list.Items {
			total += len(r)
			var rec struct{ Seq int64 }
			require.NoError(tg.t, json.Unmarshal(r, &rec))
			after = rec.Seq
		}
		n += len(list.Items)
		if len(list.Items) < 1000 {
			return total, n
		}
	}
}

// raftDB is raft.db's size in bytes.
func (tg *target) raftDB() int64 {
	tg.t.Helper()
	st, err := os.Stat(filepath.Join(tg.dir, "raft.db"))
	require.NoError(tg.t, err)
	return st.Size()
}

// lastIndex is the Raft log's last index (GET /v1/cluster).
func (tg *target) lastIndex() uint64 {
	tg.t.Helper()
	var c struct {
		LastIndex uint64 `json:"lastIndex"`
	}
	tg.must(http.StatusOK, tg.token, "GET", "/v1/cluster", nil, &c)
	return c.LastIndex
}

// settled waits until the leader's engine is quiescent (it writes
// nothing more until a request or a changed observation: GET /v1/cluster's
// quiescent) and returns the log's last index.
func (tg *target) settled() uint64 {
	tg.t.Helper()
	var c struct {
		LastIndex uint64 `json:"lastIndex"`
		Quiescent bool   `json:"quiescent"`
	}
	require.Eventually(tg.t, func() bool {
		tg.must(http.StatusOK, tg.token, "GET", "/v1/cluster", nil, &c)
		return c.Quiescent
	}, 30*time.Second, 20*time.Millisecond, "the leader's engine did not become quiescent")
	return c.LastIndex
}

// asideWriters are the entries a coordinator appends beside the requests
// a test sends: the aggregate record of a rate-limited principal or source
// (written once per window, in the refused request's path) and audit
// retention's prune (the leader's, once a minute when records are due).
var asideWriters = []string{api.AuditRateLimited, state.AuditPrune}

// aside counts the audit records of asideWriters: between two calls, the
// log may move by exactly their difference besides what the test did.
func (tg *target) aside() uint64 {
	tg.t.Helper()
	var n uint64
	for _, action := range asideWriters {
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		tg.must(http.StatusOK, tg.token, "GET", "/v1/audit?limit=1000&action="+action, nil, &l)
		n += uint64(len(l.Items))
	}
	return n
}

// heap is the live heap after a collection, in bytes.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rss is this process's resident set size in bytes.
func rss(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// fromSource is a client whose connections come from 127.0.0.<n> (a
// distinct source address for the coordinator's per-source limits).
func fromSource(n int) *http.Client {
	ip := net.IPv4(127, 0, byte(1+n/250), byte(2+n%250))
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// mb formats bytes as MB.
func mb(b float64) string { return fmt.Sprintf("%.2f MB", b/(1<<20)) }
