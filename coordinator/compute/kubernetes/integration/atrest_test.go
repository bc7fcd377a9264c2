package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/state"
)

// activeAgents deploys n embedded Agents across namespaces Namespaces
// (kwok makes their Pods Ready) through a preparing driver and returns
// their active revisions.
func activeAgents(t testing.TB, n, namespaces int) []state.Revision {
	t.Helper()
	ctx := context.Background()
	prep := newDriver(t, env.Client)
	var nss []string
	for range namespaces {
		id := uid("ns-rest")
		require.NoError(t, prep.EnsureNamespace(ctx, state.Namespace{ID: id}))
		nss = append(nss, id)
	}
	revs := make([]state.Revision, n)
	for i := range revs {
		revs[i] = revision(nss[i%namespaces], uid("a"), uid("r"), state.ModeEmbedded)
		require.NoError(t, prep.PrepareRevision(ctx, revs[i]))
	}
	for _, rev := range revs {
		prepareUntilReady(t, prep, rev)
		require.NoError(t, prep.ActivateRevision(ctx, rev))
	}
	return revs
}

// observingDriver observes through a client that records its requests,
// rate-limited as production's coordinator is (server.DefaultKubeQPS and
// DefaultKubeBurst, not the suite's 500/s), with or without the cache.
func observingDriver(t testing.TB, cache bool) (*kdriver.Driver, *recorder) {
	return observingDriverAt(t, cache, server.DefaultKubeQPS, server.DefaultKubeBurst, env.Config)
}

// observingDriverAt is observingDriver with the client's rate limit and
// identity given (base: whose credentials the clients use).
func observingDriverAt(t testing.TB, cache bool, qps float32, burst int, base *rest.Config, opts ...func(*kdriver.Config)) (*kdriver.Driver, *recorder) {
	t.Helper()
	r := &recorder{}
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.rt = rt; return r })
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	c := driverConfig(newFakeGateway(true))
	c.ObserveCache = cache
	c.ClientQPS = float64(cfg.QPS) // as the server sets it
	// and the caches' client as the server derives it (recorded too)
	c.WatchClient, err = kubernetes.NewForConfig(kdriver.WatchClientConfig(cfg))
	require.NoError(t, err)
	for _, o := range opts {
		o(&c)
	}
	d, err := kdriver.New(c, cs)
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d, r
}

// pass observes every revision once, as one health-watcher pass does, and
// requires each ready.
func pass(t testing.TB, d *kdriver.Driver, revs []state.Revision) {
	t.Helper()
	for _, rev := range revs {
		obs, err := d.ObserveRevision(context.Background(), rev)
		require.NoError(t, err)
		require.True(t, obs.Ready, "%s: %s", rev.ID, obs.Reason)
	}
}

// TestObserveAtRestFromCaches: against the real API server, Agents at rest
// are observed Ready without a request once the caches synced — and
// without them, with two requests per Agent per pass.
func TestObserveAtRestFromCaches(t *testing.T) {
	revs := activeAgents(t, 6, 2)
	off, offReq := observingDriver(t, false)
	on, onReq := observingDriver(t, true)
	pass(t, off, revs)
	pass(t, on, revs) // starts the caches of both namespaces
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.True(t, on.WaitForCaches(ctx))
	// a cache is current once its watch delivered what the list began:
	// wait for the one pass that needs no request
	require.Eventually(t, func() bool {
		onReq.reset()
		pass(t, on, revs)
		return onReq.count() == 0
	}, 10*time.Second, 50*time.Millisecond, "requests of a cached pass: %v", onReq.snapshot())
	for range 3 {
		onReq.reset()
		pass(t, on, revs)
		require.Zero(t, onReq.count(), "cached passes stay request-free: %v", onReq.snapshot())
	}
	offReq.reset()
	pass(t, off, revs)
	require.Equal(t, 2*len(revs), offReq.count(), "uncached: a Deployment GET and a Pod LIST per Agent")
}

// TestCachesListThenWatch: against the real API server, a new leader's
// caches list each kind once from the API server's watch cache and then
// watch from there; with StreamingLists, they ask a watch for the initial
// objects instead. Either way they then answer a pass without a request.
func TestCachesListThenWatch(t *testing.T) {
	revs := activeAgents(t, 2, 1)
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			d, rec := observingDriverAt(t, true, server.DefaultKubeQPS, server.DefaultKubeBurst, env.Config,
				func(c *kdriver.Config) { c.StreamingLists = streaming })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.True(t, d.WarmUp(ctx, revs))
			var lists, initial int
			for _, c := range rec.snapshot() {
				if !strings.HasSuffix(c.Path, "/pods") {
					continue
				}
				switch {
				case c.Watch && strings.Contains(c.Query, "sendInitialEvents=true"):
					initial++
				case !c.Watch && c.Method == http.MethodGet:
					lists++
				}
			}
			if streaming {
				require.Equal(t, []int{0, 1}, []int{lists, initial}, "streaming: the watch sends the Pods: %v", rec.snapshot())
			} else {
				require.Equal(t, []int{1, 0}, []int{lists, initial}, "a list, then a watch from it: %v", rec.snapshot())
			}
			require.Eventually(t, func() bool {
				rec.reset()
				pass(t, d, revs)
				return rec.count() == 0
			}, 10*time.Second, 50*time.Millisecond, "a pass from the caches: %v", rec.snapshot())
		})
	}
}

// BenchmarkObserveAtRest measures one health-watcher pass over N active
// embedded Agents (kwok) at production client settings: API requests and
// wall time, without and with the observation cache, in the same run.
func BenchmarkObserveAtRest(b *testing.B) {
	for _, n := range []int{20, 100} {
		revs := activeAgents(b, n, 10)
		for _, cache := range []bool{false, true} {
			b.Run(fmt.Sprintf("agents=%d/cache=%v", n, cache), func(b *testing.B) {
				d, rec := observingDriver(b, cache)
				pass(b, d, revs)
				if cache {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					require.True(b, d.WaitForCaches(ctx))
					pass(b, d, revs)
				}
				rec.reset()
				b.ResetTimer()
				for range b.N {
					pass(b, d, revs)
				}
				b.StopTimer()
				b.ReportMetric(float64(rec.count())/float64(b.N), "requests/pass")
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
			})
		}
	}
}

// The API server's audit log counts exactly the requests made as the
// coordinator's user (k8stest.CoordinatorRequests, BenchmarkScale's
// server-side figure): not the admin's, not another window's.
func TestAPIServerCountsCoordinatorRequests(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.CoordinatorConfig())
	require.NoError(t, err)
	from := time.Now()
	for range 3 {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err)
	}
	_, err = env.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}) // admin
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := env.CoordinatorRequests(from, time.Now())
		return err == nil && n == 3
	}, 10*time.Second, 20*time.Millisecond, "three requests served to the coordinator's user")
	n, err := env.CoordinatorRequests(from.Add(-time.Hour), from)
	require.NoError(t, err)
	require.Zero(t, n, "none before")
}
