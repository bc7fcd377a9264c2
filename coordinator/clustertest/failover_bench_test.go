package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// BenchmarkDeployAcrossLeaderKill: four clients deploy distinct Agents one
// after another through whichever member answers, each waiting until its
// revision's work completes, while the leader is SIGKILLed at a moment its
// engine holds a claim. The metric is
// deploy request → activation completed for every deploy started from one
// second before the kill until three seconds after it: those in flight at the
// kill (their work possibly claimed by the dead leader's engine) and those
// sent while the cluster elects a new leader.
func BenchmarkDeployAcrossLeaderKill(b *testing.B) {
	for _, tc := range timingVariants {
		b.Run(tc.name, func(b *testing.B) { benchDeployAcrossKill(b, tc.args) })
	}
}

func benchDeployAcrossKill(b *testing.B, args []string) {
	const (
		rounds  = 3
		clients = 4
		agents  = 64
		before  = time.Second
		after   = 3 * time.Second
	)
	c := startCluster(b, clusterOpts{size: 3, ipBase: 150, args: args})
	ctx := context.Background()
	names := c.setupWorkload(ctx, b, agents)
	var window, all []time.Duration
	b.ResetTimer()
	for range b.N {
		for range rounds {
			leader := c.waitMembers(c.Nodes)
			c.converged(c.Nodes)
			var (
				mu      sync.Mutex
				samples []deploySample
				done    atomic.Int64
				stop    = make(chan struct{})
				failed  atomic.Bool
				errs    = make(chan error, clients)
			)
			wait := workers(clients, stop, func(i int) bool {
				start := time.Now()
				if err := c.deployAndWait(ctx, names[i%agents]); err != nil {
					failed.Store(true)
					errs <- err
					return false
				}
				mu.Lock()
				samples = append(samples, deploySample{start: start, took: time.Since(start)})
				mu.Unlock()
				done.Add(1)
				return true
			})
			// Steady state first, then the kill at a moment the leader's
			// engine holds a claim; the round ends once deploys started well
			// after the kill have completed.
			require.Eventually(b, func() bool { return done.Load() >= 20 || failed.Load() }, clusterWait, time.Millisecond)
			lcl := c.client(leader)
			require.Eventually(b, func() bool {
				ws, err := lcl.Work(ctx, client.WorkFilter{State: wire.WorkClaimed})
				return (err == nil && len(ws) > 0) || failed.Load()
			}, clusterWait, time.Millisecond)
			kill := time.Now()
			leader.kill()
			require.Eventually(b, func() bool {
				if failed.Load() {
					return true
				}
				mu.Lock()
				defer mu.Unlock()
				for _, s := range samples {
					if s.start.After(kill.Add(after)) {
						return true
					}
				}
				return false
			}, clusterWait, time.Millisecond)
			close(stop)
			wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			for _, s := range samples {
				all = append(all, s.took)
				if s.start.After(kill.Add(-before)) && s.start.Before(kill.Add(after)) {
					window = append(window, s.took)
				}
			}
			b.StopTimer()
			c.start(leader)
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(window, 0.50)), "window-p50-ms")
	b.ReportMetric(ms(percentile(window, 0.99)), "window-p99-ms")
	b.ReportMetric(ms(slices.Max(window)), "window-max-ms")
	b.ReportMetric(float64(len(window)), "window-deploys")
	b.ReportMetric(ms(percentile(all, 0.50)), "all-p50-ms")
	b.ReportMetric(0, "ns/op")
}

type deploySample struct {
	start time.Time
	took  time.Duration
}

// deployAndWait deploys one Agent through any running member and waits until
// its activate work completes, reading through any running member.
func (c *cluster) deployAndWait(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	var res wire.DeployResult
	if err := c.anyMember(ctx, func(ctx context.Context, cl *client.Client) error {
		var err error
		res, err = cl.Deploy(ctx, workloadNS, name, wire.Deploy{})
		return err
	}); err != nil {
		return fmt.Errorf("deploy %s: %w", name, err)
	}
	for {
		var w wire.Work
		err := c.anyMember(ctx, func(ctx context.Context, cl *client.Client) error {
			var err error
			w, err = cl.WorkItem(ctx, res.WorkID)
			return err
		})
		switch {
		case err != nil:
			return fmt.Errorf("work of %s: %w", name, err)
		case w.State == wire.WorkCompleted:
			return nil
		case w.State == wire.WorkFailed:
			return fmt.Errorf("work of %s failed: %s", name, w.LastCode)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// anyMember runs f against the running members in turn, with short request
// timeouts and no pause between members, until it succeeds or a 4xx other
// than NOT_LEADER / NOT_FOUND answers (a member that has not yet applied the
// deploy answers NOT_FOUND for its work).
func (c *cluster) anyMember(ctx context.Context, f func(context.Context, *client.Client) error) error {
	var last error
	for i := 0; ctx.Err() == nil; i++ {
		n := c.Nodes[i%len(c.Nodes)]
		if !n.running() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(rctx, c.probe(n))
		cancel()
		if err == nil {
			return nil
		}
		var ae *client.Error
		if errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != 404 && !errors.Is(err, client.ErrNotLeader) {
			return err
		}
		last = err
		if i%len(c.Nodes) == len(c.Nodes)-1 {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return fmt.Errorf("no member answered: %w (last: %v)", ctx.Err(), last)
}

// timingVariants are the Raft timings the failover benchmarks compare:
// the binary's defaults and explicit heartbeat = election timeouts with the
// leader lease at half of them (hashicorp/raft's own defaults are 1s).
var timingVariants = []struct {
	name string
	args []string
}{
	{"timeouts=default", nil},
	{"heartbeat=1s", timings("1s", "500ms")},
	{"heartbeat=500ms", timings("500ms", "250ms")},
	{"heartbeat=400ms", timings("400ms", "200ms")},
	{"heartbeat=300ms", timings("300ms", "150ms")},
}

func timings(hb, lease string) []string {
	return []string{"--raft-heartbeat-timeout", hb, "--raft-election-timeout", hb, "--raft-leader-lease-timeout", lease}
}

// BenchmarkLeaderFailover: SIGKILL the leader, then deploy through the
// survivors until one accepts; the time from the kill until that deploy's
// activation completes. The killed node is restarted between rounds.
func BenchmarkLeaderFailover(b *testing.B) {
	for _, tc := range timingVariants {
		b.Run(tc.name, func(b *testing.B) { benchFailover(b, tc.args) })
	}
}

func benchFailover(b *testing.B, args []string) {
	const rounds = 5
	c := startCluster(b, clusterOpts{size: 3, ipBase: 100, args: args})
	ctx := context.Background()
	names := c.setupWorkload(ctx, b, rounds*b.N+1)
	var took []time.Duration
	b.ResetTimer()
	i := 0
	for range b.N {
		for range rounds {
			leader := c.waitMembers(c.Nodes)
			name := names[i]
			i++
			start := time.Now()
			leader.kill()
			var res wire.DeployResult
			var via *client.Client
			require.Eventually(b, func() bool {
				for _, n := range c.Nodes {
					if n == leader {
						continue
					}
					cl := c.probe(n)
					rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					r, err := cl.Deploy(rctx, workloadNS, name, wire.Deploy{})
					cancel()
					if err == nil {
						res, via = r, cl
						return true
					}
				}
				return false
			}, clusterWait, 5*time.Millisecond)
			wctx, cancel := context.WithTimeout(ctx, clusterWait)
			_, err := waitWork(wctx, via, res.WorkID)
			cancel()
			require.NoError(b, err)
			took = append(took, time.Since(start))
			b.StopTimer()
			c.start(leader)
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(took, 0.5)), "p50-ms")
	b.ReportMetric(ms(slices.Max(took)), "max-ms")
	b.ReportMetric(0, "ns/op")
}
