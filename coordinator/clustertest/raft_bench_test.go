package clustertest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
)

// Benchmarks that justify the Raft timings and pre-vote
// (docs/PERFORMANCE.md): how often a healthy but busy cluster elects a new
// leader with shorter timeouts, and what a member cut off and back does to
// the leader with and without pre-vote.

// workers runs k goroutines, the i-th calling f(i), f(i+k), … until stop is
// closed or f returns false; the returned func waits for them.
func workers(k int, stop <-chan struct{}, f func(j int) bool) (wait func()) {
	var wg sync.WaitGroup
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; ; j += k {
				select {
				case <-stop:
					return
				default:
				}
				if !f(j) {
					return
				}
			}
		}()
	}
	return wg.Wait
}

// steadyDeploys deploys through every member (followers forward) with k
// clients until stop is closed; it returns a func that waits for them and
// reports how many deploys failed.
func (c *cluster) steadyDeploys(ctx context.Context, names []string, k int, stop <-chan struct{}) func() int64 {
	var failed atomic.Int64
	wait := workers(k, stop, func(j int) bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.client(c.Nodes[j%len(c.Nodes)]).Deploy(rctx, workloadNS, names[j%len(names)], wire.Deploy{}); err != nil {
			failed.Add(1)
		}
		return true
	})
	return func() int64 { wait(); return failed.Load() }
}

// BenchmarkLeaderStability: a three-member cluster under a steady deploy
// load on this shared machine for a fixed window; the metric is elections
// (term changes) per minute, which a too short heartbeat timeout raises.
func BenchmarkLeaderStability(b *testing.B) {
	const window = 30 * time.Second
	for _, tc := range timingVariants {
		b.Run(tc.name, func(b *testing.B) {
			c := startCluster(b, clusterOpts{size: 3, ipBase: 170, args: tc.args})
			ctx := context.Background()
			names := c.setupWorkload(ctx, b, 32)
			var elections, minutes float64
			b.ResetTimer()
			for range b.N {
				leader := c.waitMembers(c.Nodes)
				before, err := c.info(ctx, leader)
				require.NoError(b, err)
				stop := make(chan struct{})
				wait := c.steadyDeploys(ctx, names, 4, stop)
				<-time.After(window)
				close(stop)
				wait()
				leader = c.waitMembers(c.Nodes)
				after, err := c.info(ctx, leader)
				require.NoError(b, err)
				elections += float64(after.Term - before.Term)
				minutes += window.Minutes()
			}
			b.ReportMetric(elections/minutes, "elections/min")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkFollowerRejoin: a follower is cut off for three election
// timeouts (it campaigns in vain), then healed, under a steady deploy load.
// Without pre-vote its raised term deposes the healthy leader; with it the
// leader stays. Metrics per rejoin: leader changes, and the longest gap
// between acknowledged deploys around the heal.
func BenchmarkFollowerRejoin(b *testing.B) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"prevote=on", nil},
		{"prevote=off", []string{"--raft-prevote=false"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const rounds = 3
			c := startCluster(b, clusterOpts{size: 3, proxied: true, ipBase: 180, args: tc.args})
			ctx := context.Background()
			names := c.setupWorkload(ctx, b, 16)
			var changes float64
			var worstGap time.Duration
			b.ResetTimer()
			for range b.N {
				for range rounds {
					leader := c.waitMembers(c.Nodes)
					follower := c.followerOf(leader)
					before, err := c.info(ctx, leader)
					require.NoError(b, err)
					c.isolate(follower)
					// Long enough for the cut-off follower to time out and
					// campaign several times.
					<-time.After(3 * time.Second)
					gap := c.gapAroundHeal(ctx, leader, names)
					worstGap = max(worstGap, gap)
					now := c.waitMembers(c.Nodes)
					after, err := c.info(ctx, now)
					require.NoError(b, err)
					if now != leader || after.Term != before.Term {
						changes++
					}
				}
			}
			b.ReportMetric(changes/float64(rounds*b.N), "leader-changes/rejoin")
			b.ReportMetric(ms(worstGap), "max-write-gap-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// gapAroundHeal heals the partition while one client deploys back to back
// through the leader's member, and returns the longest time between two
// acknowledged deploys within the two seconds after the heal.
func (c *cluster) gapAroundHeal(ctx context.Context, leader *node, names []string) time.Duration {
	stop := time.Now().Add(2 * time.Second)
	last := time.Now()
	var gap time.Duration
	c.heal()
	for i := 0; time.Now().Before(stop); i++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.client(leader).Deploy(rctx, workloadNS, names[i%len(names)], wire.Deploy{})
		cancel()
		if err == nil {
			gap = max(gap, time.Since(last))
			last = time.Now()
		}
	}
	return max(gap, time.Since(last))
}
