package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// Benchmarks of the coordinator as real processes (memory compute driver);
// the numbers go to docs/PERFORMANCE.md, "Coordinator". Each iteration does
// a fixed amount of work, so -benchtime 1x gives meaningful metrics.

// waitWork polls a work item until it completes (1 ms granularity).
func waitWork(ctx context.Context, cl *client.Client, id string) (wire.Work, error) {
	for {
		w, err := cl.WorkItem(ctx, id)
		if err == nil && (w.State == wire.WorkCompleted || w.State == wire.WorkFailed) {
			return w, nil
		}
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkDeployToActive: one deploy at a time through the leader's API,
// from the request until its activate work is observed completed.
func BenchmarkDeployToActive(b *testing.B) {
	const perIter = 100
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			c := startCluster(b, clusterOpts{size: size, ipBase: 80})
			ctx := context.Background()
			names := c.setupWorkload(ctx, b, perIter)
			cl := c.client(c.waitLeader(c.Nodes))
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				for _, name := range names {
					start := time.Now()
					res, err := cl.Deploy(ctx, workloadNS, name, wire.Deploy{})
					require.NoError(b, err)
					wctx, cancel := context.WithTimeout(ctx, clusterWait)
					w, err := waitWork(wctx, cl, res.WorkID)
					cancel()
					require.NoError(b, err)
					require.Equal(b, wire.WorkCompleted, w.State)
					lat = append(lat, time.Since(start))
				}
			}
			b.StopTimer()
			b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSustainedDeploys: 3 nodes, many clients deploying distinct
// Agents; deploys/s from the first request until every activation completed.
func BenchmarkSustainedDeploys(b *testing.B) {
	const agents = 1000
	for _, conc := range []int{0, 64} {
		name := "engine-concurrency=default"
		var args []string
		if conc > 0 {
			name = fmt.Sprintf("engine-concurrency=%d", conc)
			args = []string{"--engine-concurrency", fmt.Sprint(conc)}
		}
		b.Run(name, func(b *testing.B) {
			c := startCluster(b, clusterOpts{size: 3, ipBase: 90, args: args})
			ctx := context.Background()
			names := c.setupWorkload(ctx, b, agents)
			cl := c.client(c.waitLeader(c.Nodes))
			sustained(b, c, cl, names)
		})
	}
}

// BenchmarkSecurityOverhead: the sustained deploy rate of 3 nodes with
// transport security and authorization off (--insecure --authorization off,
// the bootstrap token) and on (TLS on the API, mutual TLS between members,
// Cedar authorization of a deployer's minted token, reauthorization of
// every claim), in the same run. docs/PERFORMANCE.md reports the ratio.
func BenchmarkSecurityOverhead(b *testing.B) {
	const agents = 1000
	for _, tc := range []struct {
		name     string
		insecure bool
		args     []string
	}{
		{"security=off", true, []string{"--authorization", "off"}},
		{"security=on", false, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := startCluster(b, clusterOpts{size: 3, ipBase: 130, insecure: tc.insecure, args: tc.args})
			ctx := context.Background()
			names := c.setupWorkload(ctx, b, agents)
			leader := c.waitLeader(c.Nodes)
			cl := c.client(leader)
			if !tc.insecure {
				cl = c.deployerClient(ctx, b, leader)
			}
			sustained(b, c, cl, names)
		})
	}
}

// deployerClient makes user dan a deployer of the workload namespace and
// returns a client authenticating with a token minted for him.
func (c *cluster) deployerClient(ctx context.Context, t testing.TB, n *node) *client.Client {
	t.Helper()
	admin := c.client(n)
	_, err := admin.CreateUser(ctx, wire.CreateUser{Name: "dan"})
	require.NoError(t, err)
	_, err = admin.CreateRoleBinding(ctx, wire.CreateRoleBinding{Role: wire.RoleDeployer, Namespace: workloadNS,
		Subject: wire.Subject{Kind: wire.PrincipalUser, Name: "dan"}})
	require.NoError(t, err)
	tok, err := admin.CreateToken(ctx, wire.CreateToken{User: "dan", TTL: "1h"})
	require.NoError(t, err)
	dan := c.clientTo(n.HTTPAddr, tok.Token, &http.Client{Timeout: 10 * time.Second})
	who, err := dan.WhoAmI(ctx)
	require.NoError(t, err)
	require.Equal(t, "user:dan", who.Actor)
	return dan
}

// sustained deploys every named Agent from 32 clients and reports the rate
// until every activation completed.
func sustained(b *testing.B, c *cluster, cl *client.Client, names []string) {
	const clients = 32
	ctx := context.Background()
	var rate []float64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var accepted atomic.Int64
		ch := make(chan string)
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range ch {
					if _, err := cl.Deploy(ctx, workloadNS, n, wire.Deploy{}); err == nil {
						accepted.Add(1)
					}
				}
			}()
		}
		for _, n := range names {
			ch <- n
		}
		close(ch)
		wg.Wait()
		admitted := time.Since(start)
		require.EqualValues(b, len(names), accepted.Load())
		require.Eventually(b, func() bool {
			for _, st := range []string{wire.WorkQueued, wire.WorkClaimed} {
				ws, err := cl.Work(ctx, client.WorkFilter{State: st})
				if err != nil || len(ws) > 0 {
					return false
				}
			}
			return true
		}, 5*time.Minute, 100*time.Millisecond)
		el := time.Since(start)
		rate = append(rate, float64(len(names))/el.Seconds())
		b.ReportMetric(float64(len(names))/admitted.Seconds(), "admits/s")
	}
	b.StopTimer()
	failed, err := cl.Work(ctx, client.WorkFilter{State: wire.WorkFailed})
	require.NoError(b, err)
	require.Empty(b, failed, "every deploy activated (none failed reauthorization)")
	b.ReportMetric(slices.Min(rate), "deploys/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLeaderFailover: SIGKILL the leader, then deploy through the
// survivors until one accepts; the time from the kill until that deploy's
// activation completes. The killed node is restarted between rounds. Run
// with hashicorp/raft's default timings and with halved ones.
func BenchmarkLeaderFailover(b *testing.B) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"timeouts=default", nil},
		{"timeouts=500ms", []string{"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms",
			"--raft-leader-lease-timeout", "250ms"}},
	} {
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
					cl := c.clientTo(n.HTTPAddr, c.Token, &http.Client{})
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
