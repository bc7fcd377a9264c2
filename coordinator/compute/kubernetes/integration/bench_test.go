package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// BenchmarkPrepareToReady measures, per revision, the wall time from the
// first PrepareRevision to a Ready observation (engine-style passes every
// 5 ms) on the real API server with kwok Pods, and the API requests spent.
func BenchmarkPrepareToReady(b *testing.B) {
	for _, mode := range []string{state.ModeEmbedded, state.ModeDedicated} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			cs, rec := recordingClient(b)
			d := newDriver(b, cs)
			nsID := uid("ns-bench")
			require.NoError(b, d.EnsureNamespace(ctx, state.Namespace{ID: nsID}))
			var total time.Duration
			var reqs int
			b.ResetTimer()
			for range b.N {
				rev := revision(nsID, uid("a"), uid("r"), mode)
				rec.reset()
				start := time.Now()
				for {
					require.NoError(b, d.PrepareRevision(ctx, rev))
					obs, err := d.ObserveRevision(ctx, rev)
					require.NoError(b, err)
					if obs.Ready {
						break
					}
					require.Less(b, time.Since(start), 60*time.Second, obs.Reason)
					time.Sleep(5 * time.Millisecond) // the pass interval being measured against
				}
				total += time.Since(start)
				reqs += rec.count()
				b.StopTimer()
				require.NoError(b, d.RetireRevision(ctx, rev))
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-ready/rev")
			b.ReportMetric(float64(reqs)/float64(b.N), "requests/rev")
		})
	}
}

// BenchmarkActivationRequests counts the API requests the activation engine
// makes through this driver per replacement activation (stop predecessor
// for dedicated, ensure namespace, prepare, observe passes, activate,
// retire), and its wall time.
func BenchmarkActivationRequests(b *testing.B) {
	for _, mode := range []string{state.ModeEmbedded, state.ModeDedicated} {
		b.Run(mode, func(b *testing.B) {
			r := newEngineRig(b, mode)
			r.wait(r.deploy(uid("r")))
			r.rec.reset()
			start := time.Now()
			b.ResetTimer()
			for range b.N {
				r.wait(r.deploy(uid("r")))
			}
			b.StopTimer()
			b.ReportMetric(float64(r.rec.count())/float64(b.N), "requests/activation")
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/activation")
		})
	}
}
