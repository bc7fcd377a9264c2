package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/state"
)

// hostile is an API over a state with two Namespaces and three users:
// vera views team, olga administers other, mallory holds no role.
type hostile struct {
	t      *testing.T
	b      *apitest.Backend
	srv    *httptest.Server
	tokens map[string]string
	clock  *fakeClock
}

const hostileBootstrap = "hostile-bootstrap-token"

type fakeClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

func newHostile(t *testing.T, limits api.RateLimits) *hostile {
	b := apitest.New()
	h := &hostile{t: t, b: b, tokens: map[string]string{}, clock: &fakeClock{at: time.Now()}}
	must := func(typ state.Named, p any) {
		t.Helper()
		_, err := b.Apply(typ, p)
		require.NoError(t, err, typ)
	}
	for _, ns := range []string{"team", "other"} {
		must(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns-" + ns, Name: ns})
	}
	for _, u := range []string{"vera", "olga", "mallory"} {
		must(state.CmdCreateUser, state.CreateUser{ID: "u-" + u, Name: u})
		m, err := authn.Mint()
		require.NoError(t, err)
		must(state.CmdCreateToken, state.CreateToken{ID: m.ID, PrincipalKind: state.PrincipalUser, PrincipalID: "u-" + u,
			Hash: m.Hash, ExpiresAt: time.Now().Add(time.Hour)})
		h.tokens[u] = m.Token
	}
	h.tokens["bootstrap"] = hostileBootstrap
	must(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b-vera", Role: state.RoleViewer, NamespaceID: "ns-team",
		SubjectKind: state.PrincipalUser, Subject: "vera"})
	must(state.CmdCreateRoleBinding, state.CreateRoleBinding{ID: "b-olga", Role: state.RoleAdmin, NamespaceID: "ns-other",
		SubjectKind: state.PrincipalUser, Subject: "olga"})
	authr := authn.New(authn.Config{Bootstrap: hostileBootstrap, Machine: b.M})
	h.srv = httptest.NewServer(api.New(api.Config{Authenticator: authr, Metrics: prometheus.NewRegistry(),
		WithActor: apitest.WithActor, RateLimits: limits, Clock: h.clock.now}, b))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostile) send(who, method, path string, body any) (int, []byte, http.Header) {
	h.t.Helper()
	var rd *strings.Reader
	switch v := body.(type) {
	case nil:
		rd = strings.NewReader("")
	case string:
		rd = strings.NewReader(v)
	default:
		b, err := json.Marshal(v)
		require.NoError(h.t, err)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(h.t, err)
	if tok := h.tokens[who]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if who != "" {
		req.Header.Set("Authorization", "Bearer "+who) // a made-up credential
	}
	res, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return res.StatusCode, out, res.Header
}

func (h *hostile) audit() []state.AuditRecord { return h.b.M.Audit(0, 0) }

func errorCode(t *testing.T, body []byte) string {
	var eb struct {
		Error struct{ Code string }
	}
	require.NoError(t, json.Unmarshal(body, &eb), "%s", body)
	return eb.Error.Code
}

// TestRefusedRequestsStoreBoundedRecords: oversized names and path
// segments are refused before anything is stored; a denial's record is
// compact whatever the request carried.
func TestRefusedRequestsStoreBoundedRecords(t *testing.T) {
	h := newHostile(t, api.RateLimits{PrincipalRate: -1})
	huge := strings.Repeat("a", 200<<10)
	before := len(h.audit())
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/namespaces", map[string]any{"name": huge}},
		{"POST", "/v1/namespaces", map[string]any{"name": ""}},
		{"POST", "/v1/namespaces", map[string]any{"name": "Not_A_Label"}},
		{"DELETE", "/v1/namespaces/" + huge, nil},
		{"POST", "/v1/namespaces/" + huge + "/agents", map[string]any{"name": "x", "configuration": "c"}},
		{"PUT", "/v1/namespaces/team/configurations/" + huge, map[string]any{"document": map[string]any{}}},
		{"DELETE", "/v1/users/" + huge, nil},
		{"PUT", "/v1/restrictions/" + huge, map[string]any{"policy": "forbid (principal, action, resource);"}},
		{"POST", "/v1/tokens", map[string]any{"user": huge}},
		{"POST", "/v1/users", map[string]any{"name": huge}},
		{"POST", "/v1/namespaces/other/serviceprincipals", map[string]any{"name": huge}},
	} {
		who := "mallory"
		if strings.Contains(tc.path, "/other/") {
			who = "olga" // may see other: the name is what is refused
		}
		status, body, _ := h.send(who, tc.method, tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, status, "%s %.80s: %.300s", tc.method, tc.path, body)
		require.Equal(t, "INVALID_REQUEST", errorCode(t, body))
		require.Less(t, len(body), 1024, "the refusal does not echo the value: %.300s", body)
	}
	require.Len(t, h.audit(), before, "a request refused by validation stores nothing")

	// A denied write with a valid name: one compact record.
	status, _, _ := h.send("mallory", "POST", "/v1/namespaces", map[string]any{"name": "fresh"})
	require.Equal(t, http.StatusForbidden, status)
	au := h.audit()
	require.Len(t, au, before+1)
	rec := au[len(au)-1]
	require.Equal(t, `Namespace::"fresh"`, rec.Resource)
	require.Empty(t, rec.NamespaceID)
	raw, _ := json.Marshal(rec)
	require.Less(t, len(raw), 400, "a denial record is compact: %s", raw)
}

// TestDenialsAuditedAgainstTheRightNamespace: a caller who may view the
// Namespace is recorded in it, under its real id; a caller who may not is
// recorded cluster-wide — never in that Namespace's log, never against
// Namespace::"".
func TestDenialsAuditedAgainstTheRightNamespace(t *testing.T) {
	h := newHostile(t, api.RateLimits{PrincipalRate: -1})
	last := func() state.AuditRecord {
		au := h.audit()
		return au[len(au)-1]
	}
	// vera views team: her denied write lands in team's log.
	status, _, _ := h.send("vera", "POST", "/v1/namespaces/team/configurations", map[string]any{"name": "c",
		"document": map[string]any{}})
	require.Equal(t, http.StatusForbidden, status)
	rec := last()
	require.Equal(t, "ns-team", rec.NamespaceID)
	require.Equal(t, "user:vera", rec.Actor)
	require.Equal(t, `Configuration::"team/c"`, rec.Resource)

	// olga cannot see team: her refusals are cluster-wide.
	teamBefore := len(h.b.M.AuditQuery(state.AuditFilter{NamespaceID: "ns-team"}, 0))
	for path, body := range map[string]any{
		"/v1/namespaces/team/configurations":    map[string]any{"name": "c", "document": map[string]any{}},
		"/v1/namespaces/team/agents":            map[string]any{"name": "a", "configuration": "cfg"},
		"/v1/namespaces/nowhere/configurations": map[string]any{"name": "c", "document": map[string]any{}},
	} {
		status, resp, _ := h.send("olga", "POST", path, body)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", path, resp)
		rec = last()
		require.Equal(t, "user:olga", rec.Actor)
		require.Empty(t, rec.NamespaceID, "an outsider's refusal is not written into the Namespace's log")
		require.NotContains(t, rec.Resource, `Namespace::""`)
	}
	// A Namespace named in a body, not the path: named in the record.
	status, _, _ = h.send("olga", "POST", "/v1/tokens", map[string]any{"servicePrincipal": "team/ci"})
	require.Equal(t, http.StatusForbidden, status)
	rec = last()
	require.Equal(t, `Namespace::"team"`, rec.Resource)
	require.Empty(t, rec.NamespaceID)
	require.Len(t, h.b.M.AuditQuery(state.AuditFilter{NamespaceID: "ns-team"}, 0), teamBefore)
	for _, r := range h.audit() {
		require.NotEqual(t, `Namespace::""`, r.Resource)
	}
}

// TestDenialFloodFolds: a flood of denied writes by one actor appends a
// bounded number of records that together count every refusal.
func TestDenialFloodFolds(t *testing.T) {
	h := newHostile(t, api.RateLimits{PrincipalRate: -1})
	before := len(h.audit())
	const n = 200
	for range n {
		status, _, _ := h.send("mallory", "POST", "/v1/namespaces", map[string]any{"name": "fresh"})
		require.Equal(t, http.StatusForbidden, status)
	}
	recs := h.audit()[before:]
	require.LessOrEqual(t, len(recs), 31, "a burst of records, then one a second")
	h.clock.advance(5 * time.Second)
	status, _, _ := h.send("mallory", "POST", "/v1/namespaces", map[string]any{"name": "fresh"})
	require.Equal(t, http.StatusForbidden, status)
	recs = h.audit()[before:]
	total := 0
	for _, r := range recs {
		total++
		if s := r.Details["suppressed"]; s != "" {
			var k int
			_, err := fmt.Sscan(s, &k)
			require.NoError(t, err)
			total += k
		}
	}
	require.Equal(t, n+1, total, "every refusal is counted, in a record of its own or folded into the next")
}

// TestRateLimits: a principal over its rate gets 429 with Retry-After
// (audited once per window); the bootstrap identity is exempt; a source
// that keeps failing authentication is locked out, whatever it sends.
func TestRateLimits(t *testing.T) {
	h := newHostile(t, api.RateLimits{PrincipalRate: 1, PrincipalBurst: 5, FailedAuthRate: 0.5, FailedAuthBurst: 3})
	for range 5 {
		status, body, _ := h.send("vera", "GET", "/v1/namespaces", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	before := len(h.audit())
	for range 20 {
		status, body, hdr := h.send("vera", "GET", "/v1/namespaces", nil)
		require.Equal(t, http.StatusTooManyRequests, status)
		require.Equal(t, "RATE_LIMITED", errorCode(t, body))
		require.Equal(t, "1", hdr.Get("Retry-After"))
	}
	recs := h.audit()[before:]
	require.Len(t, recs, 1, "one aggregate record per principal per window")
	require.Equal(t, api.AuditRateLimited, recs[0].Action)
	require.Equal(t, "user:vera", recs[0].Actor)
	require.Equal(t, "principal", recs[0].Details["limit"])
	// Other principals and the bootstrap identity are not affected.
	status, _, _ := h.send("olga", "GET", "/v1/namespaces", nil)
	require.Equal(t, http.StatusOK, status)
	for range 30 {
		status, _, _ = h.send("bootstrap", "GET", "/v1/namespaces", nil)
		require.Equal(t, http.StatusOK, status)
	}
	// The bucket refills.
	h.clock.advance(2 * time.Second)
	status, _, _ = h.send("vera", "GET", "/v1/namespaces", nil)
	require.Equal(t, http.StatusOK, status)
	// The next window's first refusal is recorded with the count since.
	h.clock.advance(time.Minute)
	for range 7 {
		h.send("vera", "GET", "/v1/namespaces", nil)
	}
	recs = h.audit()[before:]
	require.Len(t, recs, 2)
	require.Equal(t, "1", recs[0].Details["refused"], "the first refusal is recorded at once")
	require.Equal(t, "20", recs[1].Details["refused"], "the next record stands for the 19 folded refusals and itself")

	// Failed authentications lock the source out: even a valid token is
	// answered 429 until the bucket refills.
	for range 3 {
		status, _, _ = h.send("not-a-token", "GET", "/v1/namespaces", nil)
		require.Equal(t, http.StatusUnauthorized, status)
	}
	status, body, hdr := h.send("olga", "GET", "/v1/namespaces", nil)
	require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	require.Equal(t, "2", hdr.Get("Retry-After"))
	h.clock.advance(2 * time.Second)
	status, _, _ = h.send("olga", "GET", "/v1/namespaces", nil)
	require.Equal(t, http.StatusOK, status)
}

// TestTokenMintsBounded: a user may mint its own tokens up to the bound;
// the next is refused 409 and nothing more is stored.
func TestTokenMintsBounded(t *testing.T) {
	h := newHostile(t, api.RateLimits{PrincipalRate: -1})
	for i := range state.MaxUsableTokens - 1 { // mallory already holds one
		status, body, _ := h.send("mallory", "POST", "/v1/tokens", map[string]any{"name": fmt.Sprint(i)})
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}
	digest := h.b.M.DigestWithoutAudit()
	status, body, _ := h.send("mallory", "POST", "/v1/tokens", map[string]any{})
	require.Equal(t, http.StatusConflict, status, "%s", body)
	require.Contains(t, string(body), "revoke one first")
	require.Equal(t, digest, h.b.M.DigestWithoutAudit())
	require.Len(t, h.b.M.Tokens(state.PrincipalUser, "u-mallory"), state.MaxUsableTokens)
}
