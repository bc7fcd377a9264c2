package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
)

// BenchmarkColdDevUpToFirstReply: from `occ dev up` on an empty data dir to
// the first reply of a freshly deployed embedded OpenClaw Agent.
func BenchmarkColdDevUpToFirstReply(b *testing.B) {
	shared.up(b) // builds the binaries once; its own instance is not measured
	for i := 0; i < b.N; i++ {
		e := &env{bin: shared.bin}
		root, err := os.MkdirTemp("", "oce-bench-")
		require.NoError(b, err)
		e.root = root
		e.addr, err = freeAddr()
		require.NoError(b, err)
		start := time.Now()
		out, code := e.occBin(context.Background(), "dev", "up", "--http-addr", e.addr, "--fake-reply", FakeReply)
		require.Equal(b, 0, code, out)
		up := time.Since(start)
		e.mustOcc(b, "config", "create", "c", "-f", demoFile(b, "embedded.json"))
		e.mustOcc(b, "agent", "create", "a", "--config", "c", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
		e.mustOcc(b, "agent", "deploy", "a", "--wait", "--timeout", "8m")
		active := time.Since(start)
		require.Contains(b, e.send(b, "a", "first"), FakeReply)
		total := time.Since(start)
		b.ReportMetric(up.Seconds(), "s-dev-up")
		b.ReportMetric(active.Seconds(), "s-to-active")
		b.ReportMetric(total.Seconds(), "s-to-first-reply")
		e.teardown()
	}
}

// BenchmarkWarmRedeploy: redeploying an active embedded Agent, to the
// commit (deploy --wait) and to the next reply from the new gateway.
func BenchmarkWarmRedeploy(b *testing.B) {
	e := &shared
	e.up(b)
	e.mustOcc(b, "config", "create", "warm-cfg", "-f", demoFile(b, "embedded.json"))
	e.mustOcc(b, "agent", "create", "warm", "--config", "warm-cfg", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "agent", "deploy", "warm", "--wait", "--timeout", "8m")
	require.Contains(b, e.send(b, "warm", "warm up"), FakeReply)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		e.mustOcc(b, "agent", "deploy", "warm", "--wait", "--timeout", "8m")
		committed := time.Since(start)
		require.Contains(b, e.send(b, "warm", "again"), FakeReply)
		b.ReportMetric(committed.Seconds(), "s-to-active")
		b.ReportMetric(time.Since(start).Seconds(), "s-to-next-reply")
	}
	b.StopTimer()
	e.mustOcc(b, "agent", "delete", "warm")
}

// BenchmarkResidentMemory reports the resident memory of oce's own
// processes (the dev coordinator, fake provider, gatewayd, harnessd,
// nodehost, tini) beside the runtimes they supervise (openclaw on Node,
// codex), with one embedded and one dedicated Codex Agent running.
func BenchmarkResidentMemory(b *testing.B) {
	e := &shared
	e.up(b)
	e.mustOcc(b, "config", "create", "rss-emb", "-f", demoFile(b, "embedded.json"))
	e.mustOcc(b, "agent", "create", "rss-emb", "--config", "rss-emb", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "config", "create", "rss-codex", "-f", demoFile(b, "dedicated-codex.json"))
	e.mustOcc(b, "agent", "create", "rss-codex", "--config", "rss-codex", "--mode", "dedicated",
		"--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "agent", "deploy", "rss-emb", "--wait", "--timeout", "8m")
	e.mustOcc(b, "agent", "deploy", "rss-codex", "--wait", "--timeout", "8m")
	for i := 0; i < b.N; i++ {
		ours, runtimes := rssByKind()
		b.ReportMetric(float64(ours)/(1<<20), "MiB-oce")
		b.ReportMetric(float64(runtimes)/(1<<20), "MiB-runtimes")
	}
	b.StopTimer()
	e.mustOcc(b, "agent", "delete", "rss-emb")
	e.mustOcc(b, "agent", "delete", "rss-codex")
}

// rssByKind sums VmRSS over this namespace's processes, split into oce's
// own binaries and the native runtimes.
func rssByKind() (ours, runtimes int64) {
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var rss int64
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				f := strings.Fields(l)
				if len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					rss = kb << 10
				}
			}
		}
		switch base := filepath.Base(exe); {
		case base == "occ" || base == "coordinator" || base == "gatewayd" || base == "harnessd" || base == "nodehost" || base == "fakeprovider" || base == "tini":
			ours += rss
		case base == "node" || base == "codex" || strings.HasPrefix(base, "codex"):
			runtimes += rss
		}
	}
	return ours, runtimes
}
