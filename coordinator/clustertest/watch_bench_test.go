package clustertest

import (
	"context"
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
)

// BenchmarkBlockingQueryWake: watchers block on GET /v1/index?index=N&wait=1m
// (client.WaitIndex) on the leader and on a follower while a writer deploys
// through the leader, one deploy at a time. The metrics: from the deploy
// request until each watcher wakes, against the deploy's own answer; a
// watcher polling every occ.DefaultPollInterval (500 ms) would notice after
// 250 ms on average.
func BenchmarkBlockingQueryWake(b *testing.B) {
	const writes = 100
	c := startCluster(b, clusterOpts{size: 3, ipBase: 200})
	ctx := context.Background()
	names := c.setupWorkload(ctx, b, 8)
	leader := c.waitMembers(c.Nodes)
	follower := c.followerOf(leader)
	c.converged(c.Nodes)
	var answer, leaderWake, followerWake []time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range writes {
			// Quiet first: the previous deploy's activation has completed
			// and every member applied it, so nothing but the next deploy
			// moves the index.
			c.converged(c.Nodes)
			at, err := c.client(follower).WaitIndex(ctx, 0, time.Minute)
			require.NoError(b, err)
			// Both watchers wait on the follower's current index, so the
			// leader's watcher cannot be woken by an older entry.
			type wake struct {
				leader bool
				at     time.Time
			}
			woke := make(chan wake, 2)
			for _, w := range []struct {
				n      *node
				leader bool
			}{{leader, true}, {follower, false}} {
				go func() {
					_, err := c.client(w.n).WaitIndex(ctx, at, time.Minute)
					if err == nil {
						woke <- wake{w.leader, time.Now()}
					}
				}()
			}
			// Let both watchers park on the server (a blocking query answers
			// at once when the state already moved past at).
			time.Sleep(20 * time.Millisecond)
			start := time.Now()
			res, err := c.client(leader).Deploy(ctx, workloadNS, names[i%len(names)], wire.Deploy{})
			require.NoError(b, err)
			answer = append(answer, time.Since(start))
			for range 2 {
				select {
				case w := <-woke:
					if w.leader {
						leaderWake = append(leaderWake, w.at.Sub(start))
					} else {
						followerWake = append(followerWake, w.at.Sub(start))
					}
				case <-time.After(clusterWait):
					b.Fatal("a watcher did not wake")
				}
			}
			wctx, cancel := context.WithTimeout(ctx, clusterWait)
			_, err = waitWork(wctx, c.client(leader), res.WorkID)
			cancel()
			require.NoError(b, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(answer, 0.5)), "deploy-answer-p50-ms")
	b.ReportMetric(ms(percentile(leaderWake, 0.5)), "leader-wake-p50-ms")
	b.ReportMetric(ms(percentile(leaderWake, 0.99)), "leader-wake-p99-ms")
	b.ReportMetric(ms(percentile(followerWake, 0.5)), "follower-wake-p50-ms")
	b.ReportMetric(ms(percentile(followerWake, 0.99)), "follower-wake-p99-ms")
	b.ReportMetric(0, "ns/op")
}
