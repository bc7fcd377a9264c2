package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

const token = "tok"

func serve(t *testing.T, b *apitest.Backend, forward bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry(), ForwardWrites: forward}, b))
	t.Cleanup(srv.Close)
	return srv
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	c := client.New(serve(t, b, false).URL, token)

	ns, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	nss, err := c.Namespaces(ctx)
	require.NoError(t, err)
	require.Equal(t, []wire.Namespace{ns}, nss)
	got, err := c.Namespace(ctx, ns.ID)
	require.NoError(t, err)
	require.Equal(t, ns, got)

	// the credential source the Agent names: its value goes in, only metadata comes out
	src, err := c.CreateCredentialSource(ctx, "team", wire.CreateCredentialSource{Name: "k", Values: map[string]string{"key": "client-test-value"}})
	require.NoError(t, err)
	require.Equal(t, []string{"credential:k"}, src.References)
	rot, err := c.RotateCredentialSource(ctx, "team", "k", wire.RotateCredentialSource{Values: map[string]string{"key": "client-test-value-2"}})
	require.NoError(t, err)
	require.EqualValues(t, 2, rot.Version)
	srcs, err := c.CredentialSources(ctx, "team")
	require.NoError(t, err)
	require.Len(t, srcs, 1)
	one, err := c.CredentialSource(ctx, "team", src.ID)
	require.NoError(t, err)
	require.Equal(t, rot, one)

	cf, err := c.CreateConfiguration(ctx, "team", "cfg", json.RawMessage(admission.ExampleEmbeddedAnthropic))
	require.NoError(t, err)
	require.EqualValues(t, 1, cf.Generation)
	cf2, err := c.UpdateConfiguration(ctx, "team", "cfg", json.RawMessage(admission.ExampleEmbeddedOpenAI))
	require.NoError(t, err)
	require.EqualValues(t, 2, cf2.Generation)
	cf3, err := c.Configuration(ctx, "team", cf.ID)
	require.NoError(t, err)
	require.Equal(t, cf2, cf3)
	cfs, err := c.Configurations(ctx, "team")
	require.NoError(t, err)
	require.Len(t, cfs, 1)

	ag, err := c.CreateAgent(ctx, "team", wire.CreateAgent{Name: "bot", Configuration: "cfg",
		HarnessAuth: &wire.HarnessAuth{Method: "api_key", SourceRef: "secret://team/k#key"}})
	require.NoError(t, err)
	require.Equal(t, wire.ModeEmbedded, ag.ExecutionMode)
	mode := wire.ModeDedicated
	ag2, err := c.UpdateAgent(ctx, "team", "bot", wire.UpdateAgent{ExecutionMode: &mode})
	require.NoError(t, err)
	require.Equal(t, mode, ag2.ExecutionMode)
	embedded := wire.ModeEmbedded
	_, err = c.UpdateAgent(ctx, "team", "bot", wire.UpdateAgent{ExecutionMode: &embedded})
	require.NoError(t, err)
	ags, err := c.Agents(ctx, "team")
	require.NoError(t, err)
	require.Len(t, ags, 1)

	dep, err := c.Deploy(ctx, "team", "bot", wire.Deploy{})
	require.NoError(t, err)
	require.EqualValues(t, 1, dep.Number)
	require.NotEmpty(t, dep.WorkID)
	rev, err := c.Revision(ctx, "team", "bot", "1")
	require.NoError(t, err)
	require.Equal(t, dep.Revision, rev)
	revs, err := c.Revisions(ctx, "team", "bot")
	require.NoError(t, err)
	require.Equal(t, []wire.Revision{rev}, revs)
	aw, err := c.AgentWork(ctx, "team", "bot")
	require.NoError(t, err)
	require.Len(t, aw, 1)
	wk, err := c.WorkItem(ctx, dep.WorkID)
	require.NoError(t, err)
	require.Equal(t, aw[0], wk)
	ws, err := c.Work(ctx, client.WorkFilter{State: wire.WorkQueued, Kind: wire.WorkActivate, AgentID: ag.ID})
	require.NoError(t, err)
	require.Len(t, ws, 1)

	stop, err := c.StopAgent(ctx, "team", "bot")
	require.NoError(t, err)
	require.Equal(t, wire.WorkStop, stop.Kind)
	audit, err := c.Audit(ctx, 0, 20)
	require.NoError(t, err)
	require.NotEmpty(t, audit)
	require.Equal(t, "oce.namespaces.create", audit[0].Action)
	deploys, err := c.AuditQuery(ctx, client.AuditFilter{Action: wire.AuditDeploy, Namespace: "team"})
	require.NoError(t, err)
	require.Len(t, deploys, 1)
	require.Equal(t, `Agent::"team/bot"`, deploys[0].Resource)
	more, err := c.Audit(ctx, audit[len(audit)-1].Seq, 0)
	require.NoError(t, err)
	require.Empty(t, more)
	newest, err := c.AuditQuery(ctx, client.AuditFilter{Newest: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{audit[len(audit)-1].Seq, audit[len(audit)-2].Seq}, []int64{newest[0].Seq, newest[1].Seq})
	back, err := c.AuditQuery(ctx, client.AuditFilter{Newest: true, Limit: 1, Before: newest[1].Seq})
	require.NoError(t, err)
	require.Equal(t, audit[len(audit)-3].Seq, back[0].Seq, "before= pages back")

	inst, err := c.Installation(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{wire.ModeEmbedded}, inst.Capabilities.OpenClaw.ExecutionModes)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Agents, 1)
	require.Equal(t, "team", st.Agents[0].Namespace)

	info, err := c.Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, b.M.Digest(), info.Digest)
	_, err = c.Join(ctx, "n2", "127.0.0.1:1", "127.0.0.1:2")
	require.NoError(t, err)
	_, err = c.Transfer(ctx, "n2")
	require.NoError(t, err)
	_, err = c.Remove(ctx, "n2")
	require.NoError(t, err)

	var snap bytes.Buffer
	n, err := c.SnapshotSave(ctx, &snap)
	require.NoError(t, err)
	require.EqualValues(t, snap.Len(), n)
	saved := b.M.Digest()
	del, err := c.DeleteAgent(ctx, "team", "bot")
	require.NoError(t, err)
	require.Equal(t, wire.WorkDelete, del.Kind)
	require.NotEqual(t, saved, b.M.Digest())
	_, err = c.SnapshotRestore(ctx, bytes.NewReader(snap.Bytes()))
	require.NoError(t, err)
	// The saved state, plus the restore's own audit record.
	require.NotEqual(t, saved, b.M.Digest())
	a, err := c.Agent(ctx, "team", "bot")
	require.NoError(t, err)
	require.False(t, a.Deleting)
	au := b.M.Audit(0, 0)
	require.Equal(t, "oce.cluster.restore", au[len(au)-1].Action)
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	srv := serve(t, apitest.New(), false)
	_, err := client.New(srv.URL, "wrong").Namespaces(ctx)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 401, ae.Status)
	require.Equal(t, codes.Unauthorized, ae.Code)

	c := client.New(srv.URL, token)
	_, err = c.Namespace(ctx, "none")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, codes.NotFound, ae.Code)
	_, err = c.CreateNamespace(ctx, "Bad Name")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, codes.InvalidRequest, ae.Code)
	require.Contains(t, ae.Message, "DNS label")
}

func TestFollowsNotLeader(t *testing.T) {
	ctx := context.Background()
	leader := apitest.New()
	lsrv := serve(t, leader, false)
	follower := apitest.New()
	follower.SetFollower(lsrv.URL)
	fsrv := serve(t, follower, false)

	c := client.New(fsrv.URL, token)
	ns, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	_, ok := leader.M.Namespace(ns.ID)
	require.True(t, ok, "the client followed NOT_LEADER to the leader")
	_, ok = follower.M.Namespace(ns.ID)
	require.False(t, ok)

	// Restore is redirected too; the body is rewound for the second hop.
	var snap bytes.Buffer
	_, err = client.New(lsrv.URL, token).SnapshotSave(ctx, &snap)
	require.NoError(t, err)
	_, err = c.CreateNamespace(ctx, "later")
	require.NoError(t, err)
	_, err = c.SnapshotRestore(ctx, bytes.NewReader(snap.Bytes()))
	require.NoError(t, err)
	nss, err := client.New(lsrv.URL, token).Namespaces(ctx)
	require.NoError(t, err)
	require.Len(t, nss, 1)

	// A follower without a leader yields ErrNotLeader once the retries
	// (an election may be under way) are spent.
	follower.SetFollower("")
	_, err = client.New(fsrv.URL, token, fastRetry).CreateNamespace(ctx, "x")
	require.True(t, errors.Is(err, client.ErrNotLeader), "%v", err)

	// Redirect loops end after a bounded number of hops.
	a, bb := apitest.New(), apitest.New()
	asrv, bsrv := serve(t, a, false), serve(t, bb, false)
	a.SetFollower(bsrv.URL)
	bb.SetFollower(asrv.URL)
	_, err = client.New(asrv.URL, token).CreateNamespace(ctx, "loop")
	require.True(t, errors.Is(err, client.ErrNotLeader), "%v", err)
}

func TestForwardingFollower(t *testing.T) {
	ctx := context.Background()
	leader := apitest.New()
	lsrv := serve(t, leader, false)
	follower := apitest.New()
	follower.SetFollower(lsrv.URL)
	c := client.New(serve(t, follower, true).URL, token)
	ns, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	_, ok := leader.M.Namespace(ns.ID)
	require.True(t, ok)
}

// fastRetry keeps the retries of error-path tests short.
var fastRetry = client.WithRetry(client.Retry{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond})

// TestOutcomeUnknownIsRetriedWithItsKey: a write whose outcome is unknown is
// sent again with the same Idempotency-Key; once the retries are spent the
// error is ErrOutcomeUnknown, not ErrNotLeader.
func TestOutcomeUnknownIsRetriedWithItsKey(t *testing.T) {
	b := apitest.New()
	var keys []string
	srv := httptest.NewServer(recordKeys(&keys, api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, b)))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, token, fastRetry)
	fails := 2
	b.ProposeHook = func(string) error {
		if fails > 0 {
			fails--
			return errors.New("store: not the leader; outcome unknown")
		}
		return nil
	}
	ns, err := c.CreateNamespace(context.Background(), "team")
	require.NoError(t, err)
	require.Len(t, keys, 3)
	require.NotEmpty(t, keys[0])
	require.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "one key for every attempt")
	require.Len(t, b.M.Namespaces(), 1)
	require.Equal(t, ns.ID, b.M.Namespaces()[0].ID)

	b.ProposeHook = func(string) error { return errors.New("store: not the leader; outcome unknown") }
	first := keys[0]
	keys = nil
	_, err = c.CreateNamespace(context.Background(), "other")
	require.ErrorIs(t, err, client.ErrOutcomeUnknown)
	require.NotErrorIs(t, err, client.ErrNotLeader)
	require.Len(t, keys, 4, "the first attempt and three retries")
	require.NotEqual(t, first, keys[0], "a new call has a new key")

	b.ProposeHook = func(string) error { return &apitest.NotLeaderError{} }
	_, err = c.CreateNamespace(context.Background(), "team")
	require.ErrorIs(t, err, client.ErrNotLeader)
	require.NotErrorIs(t, err, client.ErrOutcomeUnknown)
}

// recordKeys notes the Idempotency-Key of every request.
func recordKeys(keys *[]string, h http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			mu.Lock()
			*keys = append(*keys, r.Header.Get(client.IdempotencyKeyHeader))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// dropFirstAnswer serves h but, for the first write, discards h's answer
// and breaks the connection: the write took effect, the client never
// learns it (the reproduction, between client and coordinator).
func dropFirstAnswer(h http.Handler) http.Handler {
	var dropped atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || dropped.Swap(true) {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		panic(http.ErrAbortHandler)
	})
}

// TestLostAnswerTakesEffectOnce: the answer of a deploy is lost after the
// revision was admitted; the client's retry carries the same key and gets
// the original answer back: one revision, not two.
func TestLostAnswerTakesEffectOnce(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	srv := httptest.NewServer(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, b))
	t.Cleanup(srv.Close)
	seedAgent(t, client.New(srv.URL, token))
	lossy := httptest.NewServer(dropFirstAnswer(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, b)))
	t.Cleanup(lossy.Close)

	var m client.Meta
	dep, err := client.New(lossy.URL, token, fastRetry).Deploy(client.WithMeta(ctx, &m), "team", "bot", wire.Deploy{})
	require.NoError(t, err)
	require.True(t, m.Replayed, "the retry was answered from the record")
	revs := b.M.Revisions(b.M.Agents("")[0].ID)
	require.Len(t, revs, 1, "exactly one revision")
	require.Equal(t, revs[0].ID, dep.ID)
	require.EqualValues(t, 1, dep.Number)

	// Without a key the same loss would have admitted a second revision:
	// the key is what makes the retry safe.
	lossy2 := httptest.NewServer(dropFirstAnswer(stripKeys(api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, b))))
	t.Cleanup(lossy2.Close)
	_, err = client.New(lossy2.URL, token, fastRetry).Deploy(ctx, "team", "bot", wire.Deploy{})
	require.NoError(t, err)
	require.Len(t, b.M.Revisions(revs[0].AgentID), 3)
}

func stripKeys(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(client.IdempotencyKeyHeader)
		h.ServeHTTP(w, r)
	})
}

func seedAgent(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CreateNamespace(ctx, "team")
	require.NoError(t, err)
	_, err = c.CreateConfiguration(ctx, "team", "cfg", json.RawMessage(admission.ExampleEmbeddedAnthropic))
	require.NoError(t, err)
	_, err = c.CreateCredentialSource(ctx, "team", wire.CreateCredentialSource{Name: "k", Values: map[string]string{"key": "client-test-value"}})
	require.NoError(t, err)
	_, err = c.CreateAgent(ctx, "team", wire.CreateAgent{Name: "bot", Configuration: "cfg",
		HarnessAuth: &wire.HarnessAuth{Method: "api_key", SourceRef: "secret://team/k#key"}})
	require.NoError(t, err)
}

// TestIndexesAndBlockingReads: answers carry the applied index, monotonic
// reads ask for the highest one seen, and WaitIndex / WatchAgent block
// until a write moves the state.
func TestIndexesAndBlockingReads(t *testing.T) {
	ctx := context.Background()
	b := apitest.New()
	var queries []string
	var mu sync.Mutex
	h := api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, token, client.WithMonotonicReads())
	seedAgent(t, c)
	at := c.Index()
	require.Equal(t, b.M.Applied(), at, "a write's answer names its index")
	_, err := c.Agent(ctx, "team", "bot")
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, "index="+strconv.FormatUint(at, 10), queries[len(queries)-1])
	mu.Unlock()

	got, err := c.WaitIndex(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.Equal(t, at, got, "index 0 answers at once")
	woke := make(chan uint64, 1)
	go func() {
		i, err := c.WaitIndex(ctx, at, time.Minute)
		assert.NoError(t, err)
		woke <- i
	}()
	select {
	case i := <-woke:
		t.Fatalf("woke at %d without a write", i)
	case <-time.After(50 * time.Millisecond):
	}
	_, err = c.Deploy(ctx, "team", "bot", wire.Deploy{})
	require.NoError(t, err)
	require.Greater(t, <-woke, at)

	a, idx, err := c.WatchAgent(ctx, "team", "bot", 0, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, a.RevisionCount)
	require.Equal(t, b.M.Applied(), idx)

	// A wait that times out answers the unchanged state.
	_, idx2, err := c.WatchAgent(ctx, "team", "bot", idx, 20*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, idx, idx2)
}

// TestUnixSocketServer: unix:///path reaches a coordinator's API socket.
func TestUnixSocketServer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, apitest.New())}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := client.New("unix://"+sock, token)
	require.NoError(t, c.Ready(t.Context()))
	ns, err := c.CreateNamespace(t.Context(), "over-unix")
	require.NoError(t, err)
	require.Equal(t, "over-unix", ns.Name)
	require.Error(t, client.New("unix://"+sock+".absent", token).Ready(t.Context()))
}

// TestRateLimitedIsRetriedAfterItsWait: a 429 with a short Retry-After is
// waited out and sent again (with the same key); a long one is the
// caller's.
func TestRateLimitedIsRetriedAfterItsWait(t *testing.T) {
	var mu sync.Mutex
	limited, wait := 1, 1
	var keys []string
	inner := api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry()}, apitest.New())
	srv := httptest.NewServer(recordKeys(&keys, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := limited > 0
		limited--
		mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", fmt.Sprint(wait))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":{"code":"RATE_LIMITED","message":"slow down","details":{"limit":"principal","retryAfterSeconds":%d}}}`, wait)
			return
		}
		inner.ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, token, fastRetry)
	start := time.Now()
	_, err := c.CreateNamespace(context.Background(), "team")
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "the client waited as asked")
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1], "one key for both attempts")

	mu.Lock()
	limited, wait = 1, 60
	mu.Unlock()
	_, err = c.CreateNamespace(context.Background(), "other")
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, codes.RateLimited, ae.Code, "a long lockout is not waited out")
}
