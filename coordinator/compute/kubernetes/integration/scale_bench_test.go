package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/state"
)

// scaleSizes are BenchmarkScale's fleet sizes: OCE_SCALE_AGENTS (comma
// separated), else 1,000 — 10,000 takes hours to deploy at the production
// client rate (one activation a second; docs/PERFORMANCE.md).
func scaleSizes(b *testing.B) []int {
	v := os.Getenv("OCE_SCALE_AGENTS")
	if v == "" {
		return []int{1000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "OCE_SCALE_AGENTS")
		out = append(out, n)
	}
	return out
}

// cpuTime is the CPU time this process (engine and driver; the control
// plane runs in processes of its own) has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// restWindow is what the process spent over one window at rest: its CPU time
// (the kernel's account) and the Go runtime's estimate of the part the
// garbage collector took, with the collections that ran and the heap they
// left live.
type restWindow struct {
	from, to    time.Time
	cpu, gc     time.Duration
	cycles      uint64
	liveHeapMiB float64
}

// measureRest waits out window at rest (a rate over a window: nothing to
// wait for) and accounts for it.
func measureRest(b *testing.B, window time.Duration) restWindow {
	samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"}}
	metrics.Read(samples)
	gc0, cycles0 := samples[0].Value.Float64(), samples[1].Value.Uint64()
	r := restWindow{from: time.Now()}
	cpu0 := cpuTime(b)
	time.Sleep(window)
	r.cpu, r.to = cpuTime(b)-cpu0, time.Now()
	metrics.Read(samples)
	r.gc = time.Duration((samples[0].Value.Float64() - gc0) * float64(time.Second))
	r.cycles = samples[1].Value.Uint64() - cycles0
	r.liveHeapMiB = float64(samples[2].Value.Uint64()) / (1 << 20)
	return r
}

func (r restWindow) cpuPercent() float64 { return 100 * r.cpu.Seconds() / r.to.Sub(r.from).Seconds() }
func (r restWindow) gcPercent() float64  { return 100 * r.gc.Seconds() / r.to.Sub(r.from).Seconds() }

func (r restWindow) String() string {
	return fmt.Sprintf("cpu %v (%.2f %%), of it the collector ~%v (%.2f %%) in %d cycles, live heap %.0f MiB",
		r.cpu.Round(time.Millisecond), r.cpuPercent(), r.gc.Round(time.Millisecond), r.gcPercent(), r.cycles, r.liveHeapMiB)
}

// rss is this process's resident set in bytes.
func rss(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			require.NoError(b, err)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// scaleDeployQPS is the client rate of the leader that deploys the fleet:
// OCE_SCALE_DEPLOY_QPS, else production's (server.DefaultKubeQPS). A test
// setting: at production's rate 10,000 Agents take ~2.5 hours to deploy (one
// activation a second, by design); everything measured after the deploy is
// measured at production settings by a new leader.
func scaleDeployQPS(b *testing.B) float32 {
	v := os.Getenv("OCE_SCALE_DEPLOY_QPS")
	if v == "" {
		return server.DefaultKubeQPS
	}
	q, err := strconv.ParseFloat(v, 32)
	require.NoError(b, err, "OCE_SCALE_DEPLOY_QPS")
	return float32(q)
}

// BenchmarkScale is issue 27's scale benchmark: N embedded Agents across
// 100 Namespaces deployed at once through the engine (admission, watch-fed
// caches; the client at scaleDeployQPS) on the real API server with kwok;
// then two leader changes at production settings (client 50/s burst 100):
// to a leader in a fresh process (its caches list everything), and to a
// follower whose standby kept its caches warm, as a cluster's members do —
// the time until each is current (its caches warm and one whole round
// observed every Agent, nothing to record); then, of the second, at rest
// the requests/s it sends — counted by its client and by the API
// server's audit log of its user — its CPU (share of one core; in the first
// minute after current and in the second, each with the garbage
// collector's part) and resident set, and for five more deploys in turn (medians) the time to
// the Pod created and to active. With OCE_SCALE_PROFILE_DIR set, the new
// leader's way to current and its first minute at rest are CPU-profiled
// there (the profiler's own cost, ~1 % of a core, then counts in that
// minute's CPU figure), and its live heap is written after. Last, the
// baseline: a fresh process filling its caches by streaming lists.
func BenchmarkScale(b *testing.B) {
	deployQPS := scaleDeployQPS(b)
	coordinator := env.CoordinatorConfig()
	require.NotNil(b, coordinator)
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			// a benchmark's log is printed when it ends; a run of an hour
			// also says each figure as it is measured
			say := func(format string, args ...any) {
				b.Helper()
				b.Logf(format, args...)
				fmt.Fprintf(os.Stderr, "scale: "+format+"\n", args...)
			}
			for range b.N {
				requireRoomFor(b, n+2*oneMoreSamples) // and as many of the baseline
				f := fleetState(b, n, min(100, n))
				d, rec := observingDriverAt(b, true, deployQPS, 2*int(deployQPS), coordinator)
				f.lead(b, d, rec)
				took, failed := f.deployAll(b)
				say("N=%d: deploy all %v at %v requests/s, %d failed", n, took, deployQPS, failed) // kept should a later step fail
				require.Zero(b, failed, "deploys failed")
				require.True(b, assertEventually(f.allObservedReady, 10*time.Minute), "every Agent observed ready")

				// a leader change: a new leader at production settings
				stopProfile := scaleProfile(b, fmt.Sprintf("new-leader-%d", n))
				cold := f.leaderChange(b, coordinator, coldList)
				stopProfile()
				say("N=%d new leader in a fresh process: current in %v, %d requests; the API server's watch cache kept requests waiting for freshness %v in all",
					n, cold.current, cold.requests, cold.freshWait)
				// a leader change as a cluster makes it: a follower, kept
				// warm by its standby, is elected
				warm := f.leaderChange(b, coordinator, warmFollower)
				say("N=%d new leader, a warm follower: current in %v, %d requests (it was warm in %v, %d requests, while the other led)",
					n, warm.current, warm.requests, warm.warming, warm.warmingRequests)
				rec = warm.rec

				// Two windows at rest: the first minute after the leader is
				// current (its takeover's garbage still collected in it),
				// and the second, as it stays.
				const window = 60 * time.Second
				rec.reset()
				stopProfile = scaleProfile(b, fmt.Sprintf("at-rest-%d", n))
				first := measureRest(b, window)
				stopProfile()
				second := measureRest(b, window)
				reqs := rec.count()
				t0, t1 := first.from, second.to
				wall := t1.Sub(t0)
				mem := rss(b)
				// The deploying leader ran in this process: what its heap
				// freed may still be resident. A new leader's own process
				// would not hold it, so the figure that counts is after a
				// collection returns freed memory to the OS.
				debug.FreeOSMemory()
				memLive := rss(b)
				scaleHeapProfile(b, fmt.Sprintf("heap-%d", n))
				served, err := env.CoordinatorRequests(t0, t1)
				require.NoError(b, err)
				notReady := 0
				for _, id := range f.agents {
					if h, ok := f.m.Health(id); !ok || !h.Ready {
						notReady++
					}
				}
				say("N=%d at rest: %d requests sent (%s), %d served by the API server, in %v; first minute %s; second minute %s; rss %.0f MiB (%.0f MiB after freed memory is returned), %d not ready",
					n, reqs, rec.breakdown(), served, wall, first, second, mem/(1<<20), memLive/(1<<20), notReady)
				require.Zero(b, notReady, "no Agent reported not ready at rest")

				// one more in turn with the baseline, interleaved: the
				// Gateway Service created before the Gateway
				var more, serviceFirst oneMoreRuns
				for i := range oneMoreSamples {
					more.add(f.oneMore(b, 2*i))
					f.d.SetPrepareServiceFirst(true)
					serviceFirst.add(f.oneMore(b, 2*i+1))
					f.d.SetPrepareServiceFirst(false)
				}
				say("N=%d one more, %d in turn: %s", n, oneMoreSamples, more)
				say("N=%d one more, the Service first (baseline), %d in turn: %s", n, oneMoreSamples, serviceFirst)

				// the baseline, in the same run: a leader change whose
				// caches fill by streaming lists (client-go's default)
				streamed := f.leaderChange(b, coordinator, coldStreaming)
				say("N=%d new leader with streaming lists: current in %v, %d requests; watch cache freshness waits %v in all",
					n, streamed.current, streamed.requests, streamed.freshWait)

				b.ReportMetric(took.Seconds(), "s-deploy-all")
				b.ReportMetric(float64(reqs)/wall.Seconds(), "requests/s-at-rest")
				b.ReportMetric(float64(served)/wall.Seconds(), "apiserver-requests/s-at-rest")
				b.ReportMetric(first.cpuPercent(), "%cpu-at-rest")
				b.ReportMetric(first.gcPercent(), "%cpu-gc-at-rest")
				b.ReportMetric(second.cpuPercent(), "%cpu-at-rest-2nd-minute")
				b.ReportMetric(second.gcPercent(), "%cpu-gc-at-rest-2nd-minute")
				b.ReportMetric(mem/(1<<20), "MiB-rss")
				b.ReportMetric(memLive/(1<<20), "MiB-rss-live")
				b.ReportMetric(float64(p50(more.pod).Milliseconds()), "ms-one-more-pod-created-p50")
				b.ReportMetric(float64(p50(more.deployment).Milliseconds()), "ms-one-more-deployment-created-p50")
				b.ReportMetric(float64(p50(serviceFirst.pod).Milliseconds()), "ms-one-more-pod-created-service-first-p50")
				b.ReportMetric(float64(p50(more.pod))/float64(p50(serviceFirst.pod)), "ratio-pod-created-vs-service-first")
				b.ReportMetric(p50(more.active).Seconds(), "s-one-more-active-p50")
				b.ReportMetric(p50(more.afterReady).Seconds(), "s-one-more-active-after-ready-p50")
				b.ReportMetric(warm.current.Seconds(), "s-new-leader-current")
				b.ReportMetric(float64(warm.requests), "new-leader-requests")
				b.ReportMetric(warm.warming.Seconds(), "s-follower-warm")
				b.ReportMetric(cold.current.Seconds(), "s-new-leader-current-fresh-process")
				b.ReportMetric(float64(cold.requests), "new-leader-requests-fresh-process")
				b.ReportMetric(streamed.current.Seconds(), "s-new-leader-current-streaming-lists")
			}
		})
	}
}

// How a leader change's new leader got its caches.
type takeover int

const (
	coldList      takeover = iota // a fresh process: list from the watch cache, then watch
	coldStreaming                 // a fresh process with client-go's streaming lists (the baseline)
	warmFollower                  // a follower whose standby kept its caches (the default)
)

// leaderChanged is what a leader change measured: the time until the new
// leader was current, the requests it sent on the way, and how long
// requests waited in all, on the way, for the API server's watch cache to
// be fresh; for a warm follower also its warming (before the change) and
// the requests that took.
type leaderChanged struct {
	current, freshWait, warming time.Duration
	requests, warmingRequests   int
	rec                         *recorder // the new leader's requests from then on
}

// leaderChange ends the fleet's leadership and starts a new leader at
// production settings (client 50/s burst 100) that got its caches as how
// says. For warmFollower the follower is warm before the old leader stops
// (its warming is not in the time).
func (f *fleet) leaderChange(b *testing.B, coordinator *rest.Config, how takeover) leaderChanged {
	d, rec := observingDriverAt(b, true, server.DefaultKubeQPS, server.DefaultKubeBurst, coordinator,
		func(c *kdriver.Config) { c.StreamingLists = how == coldStreaming })
	var out leaderChanged
	elected := func() {}
	if how == warmFollower {
		start := time.Now()
		elected = f.follow(b, d)
		out.warming, out.warmingRequests = time.Since(start), rec.count()
		rec.reset()
	}
	f.stop()
	elected()
	wait0 := watchCacheWait(b)
	start := time.Now()
	f.lead(b, d, rec)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(b, f.e.WaitQuiescent(ctx), "the new leader current")
	out.current = time.Since(start)
	out.requests, out.freshWait, out.rec = rec.count(), watchCacheWait(b)-wait0, rec
	return out
}

// watchCacheWait is the time requests have waited in all for the API
// server's watch cache to be as fresh as they asked
// (apiserver_watch_cache_read_wait_seconds, every resource).
func watchCacheWait(b *testing.B) time.Duration {
	raw, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(b, err)
	var sum float64
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[0], "apiserver_watch_cache_read_wait_seconds_sum") {
			v, err := strconv.ParseFloat(f[1], 64)
			require.NoError(b, err, l)
			sum += v
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// scaleProfile starts a CPU profile of one phase into
// $OCE_SCALE_PROFILE_DIR/<name>.pprof when that is set (what the leader
// spends at rest or while it becomes current, for `go tool pprof`), and
// returns what ends it; without it, nothing.
func scaleProfile(b *testing.B, name string) (stop func()) {
	f, ok := profileFile(b, name)
	if !ok {
		return func() {}
	}
	require.NoError(b, pprof.StartCPUProfile(f))
	return func() {
		pprof.StopCPUProfile()
		require.NoError(b, f.Close())
	}
}

// scaleHeapProfile writes what the heap holds live into
// $OCE_SCALE_PROFILE_DIR/<name>.pprof when that is set.
func scaleHeapProfile(b *testing.B, name string) {
	f, ok := profileFile(b, name)
	if !ok {
		return
	}
	require.NoError(b, pprof.Lookup("heap").WriteTo(f, 0))
	require.NoError(b, f.Close())
}

// profileFile creates $OCE_SCALE_PROFILE_DIR/<name>.pprof; ok is false
// when that is not set.
func profileFile(b *testing.B, name string) (*os.File, bool) {
	dir := os.Getenv("OCE_SCALE_PROFILE_DIR")
	if dir == "" {
		return nil, false
	}
	require.NoError(b, os.MkdirAll(dir, 0o755))
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	require.NoError(b, err)
	return f, true
}

// requireRoomFor fails at once when the kwok node cannot schedule n
// embedded Gateways at their requests (250m CPU, 1792Mi each), rather than
// an hour later with Pods Pending.
func requireRoomFor(b *testing.B, n int) {
	node, err := env.Client.CoreV1().Nodes().Get(context.Background(), k8stest.NodeName, metav1.GetOptions{})
	require.NoError(b, err)
	cpu, mem := node.Status.Allocatable.Cpu().MilliValue(), node.Status.Allocatable.Memory().Value()
	require.GreaterOrEqual(b, cpu/250, int64(n), "the kwok node's CPU holds %d Gateways", cpu/250)
	require.GreaterOrEqual(b, mem/(1792<<20), int64(n), "the kwok node's memory holds %d Gateways", mem/(1792<<20))
}

// allObservedReady: every active Agent's health is ready.
func (f *fleet) allObservedReady() bool {
	for _, id := range f.agents {
		if a, _ := f.m.Agent(id); a.ActiveRevisionID == "" {
			return false
		}
		if h, ok := f.m.Health(id); !ok || !h.Ready {
			return false
		}
	}
	return true
}

// oneMoreSamples is how many more Agents BenchmarkScale deploys in turn
// at N, for the medians.
const oneMoreSamples = 5

// p50 is the median of ds (the lower one of an even count).
func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// oneMore deploys one more Agent (the i-th) into one of the fleet's
// Namespaces and returns its times (oneMoreTimes; creations and Ready as
// the API server's watches tell them; kwok makes the Pod Ready).
func (f *fleet) oneMore(b *testing.B, i int) oneMoreTimes {
	ctx := context.Background()
	ns := f.nss[i%len(f.nss)]
	id := uid("a")
	_, err := f.p.Propose(ctx, state.CmdCreateAgent.Name(), state.CreateAgent{ID: id, NamespaceID: ns, Name: fmt.Sprintf("one-more-%d", i), ConfigurationID: "c-" + ns,
		ExecutionMode: state.ModeEmbedded, ComputeID: kdriver.Name,
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://x/m#k"}})
	require.NoError(b, err)
	// an embedded Gateway's namespace, as the API server's watches tell it
	sel := metav1.ListOptions{LabelSelector: kdriver.LabelAgent + "=" + id}
	pods, err := env.Client.CoreV1().Pods(kdriver.DataPlaneNamespace(ns)).Watch(ctx, sel)
	require.NoError(b, err)
	defer pods.Stop()
	deps, err := env.Client.AppsV1().Deployments(kdriver.DataPlaneNamespace(ns)).Watch(ctx, sel)
	require.NoError(b, err)
	defer deps.Stop()
	cf, _ := f.m.Configuration("c-" + ns)
	rev := revision(ns, id, uid("r"), state.ModeEmbedded)
	rev.ConfigurationID, rev.ConfigurationGeneration, rev.ComputeID = cf.ID, cf.Generation, kdriver.Name
	start := time.Now()
	_, err = f.p.Propose(ctx, state.CmdAdmitRevision.Name(), state.AdmitRevision{Revision: rev, WorkID: "w-" + rev.ID, MaxAttempts: 10})
	require.NoError(b, err)
	f.e.Notify()
	var t oneMoreTimes
	var readyAt time.Time
	depEvents := deps.ResultChan()
	for readyAt.IsZero() || t.deployment == 0 {
		select {
		case ev := <-depEvents:
			require.Equal(b, watch.Added, ev.Type)
			t.deployment = time.Since(start)
			depEvents = nil // its first event is all it tells; a closed watch must not spin the loop
		case ev := <-pods.ResultChan():
			pod, ok := ev.Object.(*corev1.Pod)
			require.True(b, ok, "%v", ev.Type)
			if t.pod == 0 {
				require.Equal(b, watch.Added, ev.Type)
				t.pod = time.Since(start)
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && readyAt.IsZero() {
					readyAt = time.Now()
				}
			}
		case <-time.After(5 * time.Minute):
			b.Fatal("the Gateway Deployment and Pod were not created and Ready")
		}
	}
	require.True(b, assertEventually(func() bool { a, _ := f.m.Agent(id); return a.ActiveRevisionID == rev.ID }, 5*time.Minute), "one more active")
	t.active, t.afterReady = time.Since(start), time.Since(readyAt)
	return t
}

// oneMoreTimes are one more deploy's times from its admission: to its
// Gateway Deployment created (the driver's part), to its Pod created (and
// the controller manager's), to active, and from the Pod Ready to active.
type oneMoreTimes struct {
	deployment, pod, active, afterReady time.Duration
}

// oneMoreRuns are the times of several more deploys, field by field.
type oneMoreRuns struct {
	deployment, pod, active, afterReady []time.Duration
}

func (r *oneMoreRuns) add(t oneMoreTimes) {
	r.deployment, r.pod = append(r.deployment, t.deployment), append(r.pod, t.pod)
	r.active, r.afterReady = append(r.active, t.active), append(r.afterReady, t.afterReady)
}

func (r oneMoreRuns) String() string {
	return fmt.Sprintf("Deployment created %v (p50 %v), Pod created %v (p50 %v), active %v (p50 %v), after Ready %v (p50 %v)",
		r.deployment, p50(r.deployment), r.pod, p50(r.pod), r.active, p50(r.active), r.afterReady, p50(r.afterReady))
}
