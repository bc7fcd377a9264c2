package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
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
			sustained(b, cl, names)
		})
	}
}

// BenchmarkSecurityOverhead: the sustained deploy rate of 3 nodes with
// transport security and authorization off (--insecure --authorization off,
// the bootstrap token) and on (TLS on the API, mutual TLS between members,
// Cedar authorization of a deployer's minted token, reauthorization of
// every claim). Both clusters run in the same process tree and take turns,
// round after round, so the shared machine's load falls on both alike; the
// medians and their ratio go to docs/PERFORMANCE.md.
func BenchmarkSecurityOverhead(b *testing.B) {
	const agents, rounds = 1000, 3
	ctx := context.Background()
	off := startCluster(b, clusterOpts{size: 3, ipBase: 130, insecure: true, args: []string{"--authorization", "off"}})
	on := startCluster(b, clusterOpts{size: 3, ipBase: 140})
	offNames := off.setupWorkload(ctx, b, agents)
	onNames := on.setupWorkload(ctx, b, agents)
	offCl := off.client(off.waitLeader(off.Nodes))
	onCl := on.deployerClient(ctx, b, on.waitLeader(on.Nodes))
	var offRates, onRates, offCPU, onCPU []float64
	round := func(c *cluster, cl *client.Client, names []string, rates, cpu *[]float64) {
		before := c.cpuTime(b)
		*rates = append(*rates, deployAll(b, cl, names))
		*cpu = append(*cpu, float64((c.cpuTime(b)-before).Microseconds())/1e3/float64(len(names)))
	}
	b.ResetTimer()
	for range b.N {
		for range rounds {
			round(off, offCl, offNames, &offRates, &offCPU)
			round(on, onCl, onNames, &onRates, &onCPU)
		}
	}
	b.StopTimer()
	for _, cl := range []*client.Client{offCl, onCl} {
		failed, err := cl.Work(ctx, client.WorkFilter{State: wire.WorkFailed})
		require.NoError(b, err)
		require.Empty(b, failed, "every deploy activated (none failed reauthorization)")
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(offRates), "off-deploys/s")
	b.ReportMetric(med(onRates), "on-deploys/s")
	b.ReportMetric(100*med(onRates)/med(offRates), "on/off-%")
	// CPU time of the three members per deploy does not depend on what else
	// the machine runs: the cost of security itself.
	b.ReportMetric(med(offCPU), "off-cpu-ms/deploy")
	b.ReportMetric(med(onCPU), "on-cpu-ms/deploy")
	b.ReportMetric(0, "ns/op")
}

// cpuTime sums the user and system CPU time of the members' processes
// (/proc/<pid>/stat), so a round's cost is measured apart from the load of
// everything else on the machine.
func (c *cluster) cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ticks int64
	for _, n := range c.Nodes {
		n.mu.Lock()
		cmd := n.cmd
		n.mu.Unlock()
		require.NotNil(t, cmd, "member %s runs", n.ID)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		require.NoError(t, err)
		// Fields after the parenthesized command name: utime and stime are
		// the 12th and 13th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		for _, i := range []int{11, 12} {
			v, err := strconv.ParseInt(f[i], 10, 64)
			require.NoError(t, err)
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

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

// sustained deploys every named Agent from 32 clients per iteration and
// reports the slowest iteration's rate.
func sustained(b *testing.B, cl *client.Client, names []string) {
	var rate []float64
	b.ResetTimer()
	for range b.N {
		rate = append(rate, deployAll(b, cl, names))
	}
	b.StopTimer()
	failed, err := cl.Work(context.Background(), client.WorkFilter{State: wire.WorkFailed})
	require.NoError(b, err)
	require.Empty(b, failed, "every deploy activated")
	b.ReportMetric(slices.Min(rate), "deploys/s")
	b.ReportMetric(0, "ns/op")
}

// deployAll deploys every named Agent from 32 clients and returns the rate
// from the first request until every activation completed.
func deployAll(b *testing.B, cl *client.Client, names []string) float64 {
	const clients = 32
	ctx := context.Background()
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
	b.ReportMetric(float64(len(names))/admitted.Seconds(), "admits/s")
	return float64(len(names)) / time.Since(start).Seconds()
}
