package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/engine"
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

// BenchmarkScale is issue 27's scale benchmark: N embedded Agents across
// 100 Namespaces deployed at once through the engine at production
// settings (client 50/s burst 100, admission, watch-fed caches) on the real
// API server with kwok; then, at rest, the requests/s the coordinator sends,
// its CPU (share of one core) and resident set; one more deploy's time to
// its Pod created and to active; and, after the leader's engine stops, the
// time a new leader's driver (caches empty) takes to answer every Agent
// ready again, and the requests that costs.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			for range b.N {
				f := newFleet(b, n, min(100, n), true)
				took, failed := f.deployAll(b)
				b.Logf("N=%d: deploy all %v, %d failed", n, took, failed) // kept should a later step fail
				require.Zero(b, failed, "deploys failed")
				require.True(b, assertEventually(f.allObservedReady, 10*time.Minute), "every Agent observed ready")

				const window = 30 * time.Second
				f.rec.reset()
				cpu0, t0 := cpuTime(b), time.Now()
				time.Sleep(window) // a rate over a window: nothing to wait for
				reqs, cpu, wall := f.rec.count(), cpuTime(b)-cpu0, time.Since(t0)
				mem := rss(b)
				b.Logf("N=%d at rest: %d requests in %v, cpu %v, rss %.0f MiB", n, reqs, wall, cpu, mem/(1<<20))

				created, active := f.oneMore(b)
				b.Logf("N=%d one more: Pod created %v, active %v", n, created, active)

				f.stop()
				current, leaderReqs := f.newLeaderCurrent(b)

				b.ReportMetric(took.Seconds(), "s-deploy-all")
				b.ReportMetric(float64(reqs)/wall.Seconds(), "requests/s-at-rest")
				b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%cpu-at-rest")
				b.ReportMetric(mem/(1<<20), "MiB-rss")
				b.ReportMetric(float64(created.Milliseconds()), "ms-one-more-pod-created")
				b.ReportMetric(active.Seconds(), "s-one-more-active")
				b.ReportMetric(current.Seconds(), "s-new-leader-current")
				b.ReportMetric(float64(leaderReqs), "new-leader-requests")
			}
		})
	}
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

// oneMore deploys one more Agent into the fleet's first Namespace and
// returns the time from admission to its Gateway Pod created (the API
// server's watch) and to its revision active.
func (f *fleet) oneMore(b *testing.B) (created, active time.Duration) {
	ctx := context.Background()
	ns := f.nss[0]
	id := uid("a")
	_, err := f.p.Propose(ctx, state.CmdCreateAgent.Name(), state.CreateAgent{ID: id, NamespaceID: ns, Name: "one-more", ConfigurationID: "c-" + ns,
		ExecutionMode: state.ModeEmbedded, ComputeID: kdriver.Name,
		HarnessAuth: &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://x/m#k"}})
	require.NoError(b, err)
	w, err := env.Client.CoreV1().Pods(kdriver.DataPlaneNamespace(ns)).Watch( // an embedded Gateway's namespace
		ctx, metav1.ListOptions{LabelSelector: kdriver.LabelAgent + "=" + id})
	require.NoError(b, err)
	defer w.Stop()
	cf, _ := f.m.Configuration("c-" + ns)
	rev := revision(ns, id, uid("r"), state.ModeEmbedded)
	rev.ConfigurationID, rev.ConfigurationGeneration, rev.ComputeID = cf.ID, cf.Generation, kdriver.Name
	start := time.Now()
	_, err = f.p.Propose(ctx, state.CmdAdmitRevision.Name(), state.AdmitRevision{Revision: rev, WorkID: "w-" + rev.ID, MaxAttempts: 10})
	require.NoError(b, err)
	f.e.Notify()
	select {
	case ev := <-w.ResultChan():
		require.Equal(b, watch.Added, ev.Type)
		_, ok := ev.Object.(*corev1.Pod)
		require.True(b, ok)
		created = time.Since(start)
	case <-time.After(5 * time.Minute):
		b.Fatal("no Gateway Pod created")
	}
	require.True(b, assertEventually(func() bool { a, _ := f.m.Agent(id); return a.ActiveRevisionID == rev.ID }, 5*time.Minute), "one more active")
	return created, time.Since(start)
}

// newLeaderCurrent starts a new leader's driver (empty caches, as after a
// leader change) and returns the time until it answers every active
// revision ready, and the API requests that took.
func (f *fleet) newLeaderCurrent(b *testing.B) (time.Duration, int) {
	var revs []state.Revision
	for _, id := range f.agents {
		a, _ := f.m.Agent(id)
		r, ok := f.m.Revision(a.ActiveRevisionID)
		require.True(b, ok)
		revs = append(revs, r)
	}
	start := time.Now()
	d, rec := observingDriver(b, true)
	ctx, cancel := context.WithTimeout(context.Background(), engine.WarmUpTimeout)
	defer cancel()
	d.WarmUp(ctx, revs) // as a new leader's engine does first
	ok := assertEventually(func() bool {
		for _, r := range revs {
			obs, err := d.ObserveRevision(context.Background(), r)
			if err != nil || !obs.Ready {
				return false
			}
		}
		return true
	}, 10*time.Minute)
	require.True(b, ok, "the new leader's driver answers every Agent ready")
	return time.Since(start), rec.count()
}
