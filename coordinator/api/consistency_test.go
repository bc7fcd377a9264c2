package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/state"
)

// unfresh is a member that must not serve default reads (cut off from the
// leader, replaying, or behind), knowing no fresh commit index.
type unfresh struct{ *apitest.Backend }

func (unfresh) Fresh() error                 { return errors.New("store: not ready: replaying the log") }
func (unfresh) LeaderCommit() (uint64, bool) { return 0, false }

func index(t *testing.T, r resp) uint64 {
	t.Helper()
	i, err := strconv.ParseUint(r.header.Get(api.IndexHeader), 10, 64)
	require.NoError(t, err, "answer without %s", api.IndexHeader)
	return i
}

func TestEveryAnswerNamesItsIndex(t *testing.T) {
	e := newEnv(t)
	e.seed()
	w := e.send("POST", "/v1/namespaces/team/agents/bot/deploy", nil, nil)
	require.Equal(t, 202, w.status)
	require.Equal(t, e.b.M.Applied(), index(t, w), "a write names the index its entry applied at")
	for _, path := range []string{"/v1/namespaces", "/v1/namespaces/team/agents/bot", "/v1/work", "/v1/audit",
		"/v1/status", "/v1/cluster", "/v1/index"} {
		r := e.send("GET", path, nil, nil)
		require.Equal(t, 200, r.status, path)
		require.Equal(t, e.b.M.Applied(), index(t, r), path)
	}
	r := e.send("GET", "/v1/index", nil, nil)
	require.Equal(t, float64(e.b.M.Applied()), r.json(t)["index"])
	// A 404 names the index at which the thing did not exist.
	r = e.send("GET", "/v1/namespaces/team/agents/nobody", nil, nil)
	require.Equal(t, 404, r.status)
	require.Equal(t, e.b.M.Applied(), index(t, r))
}

func TestReadModeParameters(t *testing.T) {
	e := newEnv(t)
	e.seed()
	at := strconv.FormatUint(e.b.M.Applied(), 10)
	for _, q := range []string{"index=x", "index=-1", "index=1&index=2", "wait=1s", "index=1&wait=x",
		"index=1&wait=-1s", "consistent&stale", "consistent&index=1", "consistent=no", "stale=1",
		"index=" + strconv.FormatUint(e.b.M.Applied()+1, 10)} {
		r := e.send("GET", "/v1/namespaces/team/agents?"+q, nil, nil)
		require.Equal(t, 400, r.status, "%s: %s", q, r.body)
		require.Equal(t, "INVALID_REQUEST", r.errCode(t))
	}
	for _, q := range []string{"index=" + at, "index=1", "consistent", "consistent=true", "stale"} {
		r := e.send("GET", "/v1/namespaces/team/agents?"+q, nil, nil)
		require.Equal(t, 200, r.status, "%s: %s", q, r.body)
	}
	// The modes' parameters never reach the route's own parameter checks.
	r := e.send("GET", "/v1/work?state=queued&index="+at, nil, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.send("GET", "/v1/work?bogus=1&index="+at, nil, nil)
	require.Equal(t, 400, r.status)
}

func TestBlockingQuery(t *testing.T) {
	e := newEnv(t)
	e.seed()
	at := e.b.M.Applied()
	done := make(chan resp, 1)
	go func() {
		done <- e.send("GET", "/v1/namespaces/team/agents/bot?index="+strconv.FormatUint(at, 10)+"&wait=1m", nil, nil)
	}()
	select {
	case r := <-done:
		t.Fatalf("a blocking query answered without a change: %s", r.body)
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, 202, e.send("POST", "/v1/namespaces/team/agents/bot/deploy", nil, nil).status)
	r := <-done
	require.Equal(t, 200, r.status)
	require.Greater(t, index(t, r), at)
	require.EqualValues(t, 1, r.json(t)["revisionCount"], "woken by the deploy, it shows it")

	// The wait expires with the unchanged state; a wait beyond the cap is
	// clamped and says so.
	now := e.b.M.Applied()
	r = e.send("GET", "/v1/index?index="+strconv.FormatUint(now, 10)+"&wait=30ms", nil, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, now, index(t, r))
	require.Empty(t, r.header.Get(api.WaitClampedHeader))
	go func() {
		done <- e.send("GET", "/v1/index?index="+strconv.FormatUint(now, 10)+"&wait=1h", nil, nil)
	}()
	require.Equal(t, 202, e.send("POST", "/v1/namespaces/team/agents/bot/stop", nil, nil).status)
	r = <-done
	require.Equal(t, api.MaxWait.String(), r.header.Get(api.WaitClampedHeader))
}

// TestUnfreshMemberRefusesDefaultReads: a member that must not serve
// default reads answers NOT_READY (retryable), serves ?stale, and refuses a
// ?index it cannot place instead of calling it the future.
func TestUnfreshMemberRefusesDefaultReads(t *testing.T) {
	b := apitest.New()
	srv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, unfresh{b}))
	t.Cleanup(srv.Close)
	e := &env{t: t, b: b, srv: srv}
	e.seed()
	r := e.send("GET", "/v1/namespaces/team/agents/bot", nil, nil)
	require.Equal(t, 503, r.status)
	require.Equal(t, "NOT_READY", r.errCode(t))
	require.Equal(t, true, r.json(t)["error"].(map[string]any)["details"].(map[string]any)["retryable"])
	require.Equal(t, 200, e.send("GET", "/v1/namespaces/team/agents/bot?stale", nil, nil).status)
	require.Equal(t, 200, e.send("GET", "/v1/cluster", nil, nil).status, "cluster diagnostics are always served")
	// An index it has applied is served; one beyond its log cannot be
	// placed without the leader's commit index: NOT_READY, not 400.
	at := b.M.Applied()
	require.Equal(t, 200, e.send("GET", "/v1/namespaces/team/agents/bot?index="+strconv.FormatUint(at, 10), nil, nil).status)
	r = e.send("GET", "/v1/namespaces/team/agents/bot?index="+strconv.FormatUint(at+5, 10), nil, nil)
	require.Equal(t, 503, r.status)
	require.Equal(t, "NOT_READY", r.errCode(t))
}

func TestConsistentReadOnFollower(t *testing.T) {
	leader := apitest.New()
	lsrv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, leader))
	t.Cleanup(lsrv.Close)
	le := &env{t: t, b: leader, srv: lsrv}
	le.seed()

	b := apitest.New()
	b.SetFollower(lsrv.Listener.Addr().String())
	plain := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, b))
	t.Cleanup(plain.Close)
	r := (&env{t: t, b: b, srv: plain}).send("GET", "/v1/namespaces/team/agents/bot?consistent", nil, nil)
	require.Equal(t, 421, r.status)
	require.Equal(t, "NOT_LEADER", r.errCode(t))

	fwd := httptest.NewServer(api.New(api.Config{Token: testToken, ForwardWrites: true, Metrics: prometheus.NewRegistry()}, b))
	t.Cleanup(fwd.Close)
	r = (&env{t: t, b: b, srv: fwd}).send("GET", "/v1/namespaces/team/agents/bot?consistent", nil, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "bot", r.json(t)["name"], "served by the leader, which has the Agent")
	require.Equal(t, leader.M.Applied(), index(t, r))
}

// catchingUp is a follower whose state trails the leader's commit index by
// one entry, which arrives when it waits for that index (WaitApplied) — an
// Agent the leader has, or, on a busy member, one more entry each time.
type catchingUp struct {
	*apitest.Backend
	arrive func()
}

func (c catchingUp) LeaderCommit() (uint64, bool) { return c.M.Applied() + 1, true }
func (c catchingUp) WaitApplied(ctx context.Context, n uint64) (uint64, error) {
	c.arrive()
	return c.Backend.WaitApplied(ctx, n)
}

// TestFollowerCatchesUpBeforeNotFound: a lookup that misses on a member
// behind the leader's commit index waits for it before answering 404, so a
// member catching up never reports as missing what the cluster has; ?stale
// answers from the state as it is.
func TestFollowerCatchesUpBeforeNotFound(t *testing.T) {
	b := apitest.New()
	e := &env{t: t, b: b}
	srv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()},
		catchingUp{Backend: b, arrive: func() {
			if _, ok := b.M.AgentByName(b.M.Namespaces()[0].ID, "late"); !ok {
				e.send("POST", "/v1/namespaces/team/agents", map[string]any{"name": "late", "configuration": "cfg"}, nil)
			}
		}}))
	t.Cleanup(srv.Close)
	plain := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, b))
	t.Cleanup(plain.Close)
	e.srv = plain
	e.seed()
	direct := &env{t: t, b: b, srv: srv}
	r := direct.send("GET", "/v1/namespaces/team/agents/late?stale", nil, nil)
	require.Equal(t, 404, r.status, "a stale read answers from the state as it is")
	r = direct.send("GET", "/v1/namespaces/team/agents/late", nil, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "late", r.json(t)["name"])
}

// noLeaderKnown is a member that may serve reads but knows no leader commit
// index (a partition, a restart before the leader's first contact).
type noLeaderKnown struct{ *apitest.Backend }

func (noLeaderKnown) LeaderCommit() (uint64, bool) { return 0, false }

// TestCannotTellIsNotNotFound: a member that cannot know whether it is
// current answers a miss with NOT_READY (retryable elsewhere), never
// NOT_FOUND for what the cluster may hold — reads and writes alike; ?stale
// asked for its state as it is.
func TestCannotTellIsNotNotFound(t *testing.T) {
	b := apitest.New()
	srv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, noLeaderKnown{b}))
	t.Cleanup(srv.Close)
	e := &env{t: t, b: b, srv: srv}
	e.seed()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/namespaces/team/agents/nobody"},
		{"GET", "/v1/namespaces/elsewhere/agents/bot"},
		{"POST", "/v1/namespaces/elsewhere/agents/bot/deploy"},
	} {
		r := e.send(tc.method, tc.path, map[string]any{}, nil)
		require.Equal(t, 503, r.status, "%s %s: %s", tc.method, tc.path, r.body)
		require.Equal(t, "NOT_READY", r.errCode(t))
	}
	require.Equal(t, 404, e.send("GET", "/v1/namespaces/team/agents/nobody?stale", nil, nil).status)
	require.Equal(t, 200, e.send("GET", "/v1/namespaces/team/agents/bot", nil, nil).status, "what it holds it serves")
}

// behindForGood is a member that knows the leader's commit index but cannot
// apply up to it (replaying a long log, just demoted).
type behindForGood struct{ *apitest.Backend }

func (b behindForGood) LeaderCommit() (uint64, bool) { return b.M.Applied() + 5, true }
func (behindForGood) WaitApplied(ctx context.Context, n uint64) (uint64, error) {
	return 0, context.DeadlineExceeded
}

// TestBehindIsNotNotFound: a member behind the commit index it knows
// answers a miss NOT_READY, not NOT_FOUND, when it cannot catch up.
func TestBehindIsNotNotFound(t *testing.T) {
	b := apitest.New()
	srv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, behindForGood{b}))
	t.Cleanup(srv.Close)
	e := &env{t: t, b: b, srv: srv}
	e.seed()
	r := e.send("GET", "/v1/namespaces/team/agents/nobody", nil, nil)
	require.Equal(t, 503, r.status, "%s", r.body)
	require.Equal(t, "NOT_READY", r.errCode(t))
	require.Equal(t, 404, e.send("GET", "/v1/namespaces/team/agents/nobody?stale", nil, nil).status)
}

// newLeader is a leader just elected: what the previous leader committed
// and acknowledged (an Agent) is applied here only once it is leading, or
// between a lookup's miss and its reading of the commit index.
type newLeader struct {
	*apitest.Backend
	arrive  func()
	current bool // false: it never gets there (WaitLeading times out)
}

func (n newLeader) WaitLeading(ctx context.Context) error {
	if !n.current {
		return context.DeadlineExceeded
	}
	n.arrive()
	return nil
}

func (n newLeader) LeaderCommit() (uint64, bool) {
	if !n.current {
		return 0, false
	}
	n.arrive()
	return n.M.Applied(), true
}

// TestNewLeaderDecidesOnCurrentState: a new leader decides a write only
// once it holds what earlier terms committed, and a lookup whose state moved
// between its miss and the catch-up looks again — neither answers NOT_FOUND
// for what the cluster has. A leader that cannot get there answers
// NOT_READY (retryable) and changes nothing.
func TestNewLeaderDecidesOnCurrentState(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		current            bool
		status             int
	}{
		{"a write waits for the barrier", "POST", "/v1/namespaces/team/agents/late/deploy", true, 202},
		{"a read's miss looks again", "GET", "/v1/namespaces/team/agents/late", true, 200},
		{"a consistent read too", "GET", "/v1/namespaces/team/agents/late?consistent", true, 200},
		{"a write on a leader never current", "POST", "/v1/namespaces/team/agents/bot/deploy", false, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := seededEnv(t)
			b := e.b
			arrived := 0
			leader := e.through(newLeader{Backend: b, current: tc.current, arrive: func() {
				if arrived == 0 {
					arrived++
					e.expect(201, "POST", "/v1/namespaces/team/agents", map[string]any{"name": "late", "configuration": "cfg",
						"harnessAuth": map[string]any{"method": "api_key", "credentialKind": "secret", "sourceRef": "secret://team/anthropic#key"}})
				}
			}})
			before := b.M.Applied()
			r := leader.send(tc.method, tc.path, nil, nil)
			require.Equal(t, tc.status, r.status, "%s", r.body)
			if tc.status == 503 {
				require.Equal(t, "NOT_READY", r.errCode(t))
				require.Equal(t, before, b.M.Applied(), "a refused write changes nothing")
				require.Empty(t, b.M.WorkItems(state.WorkFilter{}))
			}
		})
	}
}

// TestBusyMemberAnswersNotFound: on a member whose state keeps moving, a
// name that does not exist is still NOT_FOUND (once the state has reached
// the commit index known after the miss), not NOT_READY retried for ever.
func TestBusyMemberAnswersNotFound(t *testing.T) {
	e := seededEnv(t)
	n := 0
	r := e.through(catchingUp{Backend: e.b, arrive: func() {
		n++
		e.expect(201, "POST", "/v1/namespaces", map[string]any{"name": "other-" + strconv.Itoa(n)})
	}}).send("GET", "/v1/namespaces/team/agents/nobody", nil, nil)
	require.Equal(t, 404, r.status, "%s", r.body)
	require.Equal(t, "NOT_FOUND", r.errCode(t))
	require.Positive(t, n, "the member waited for the commit index it knew")
}

// seededEnv is an env over a fresh backend, seeded through a plain API.
func seededEnv(t *testing.T) *env {
	b := apitest.New()
	srv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, b))
	t.Cleanup(srv.Close)
	e := &env{t: t, b: b, srv: srv}
	e.seed()
	return e
}

// through is an env whose API serves e's state through view (a member in a
// given position: catching up, newly elected…).
func (e *env) through(view api.Backend) *env {
	srv := httptest.NewServer(api.New(api.Config{Token: testToken, Metrics: prometheus.NewRegistry()}, view))
	e.t.Cleanup(srv.Close)
	return &env{t: e.t, b: e.b, srv: srv}
}
