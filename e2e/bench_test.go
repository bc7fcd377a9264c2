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

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
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

// BenchmarkConsoleDeployVsOcc: a warm redeploy of an embedded Agent
// clicked in the console until the page shows it serving the new revision,
// beside `occ agent deploy --wait` of the same Agent in the same run.
func BenchmarkConsoleDeployVsOcc(b *testing.B) {
	e := &shared
	e.up(b)
	e.mustOcc(b, "config", "create", "bench-console", "-f", demoFile(b, "embedded.json"))
	e.mustOcc(b, "agent", "create", "bench-web", "--config", "bench-console", "--auth-method", "api_key",
		"--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "agent", "deploy", "bench-web", "--wait", "--timeout", "8m")
	require.Contains(b, e.send(b, "bench-web", "warm up"), FakeReply)
	c := e.console(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := len(e.revisions(b, "bench-web")) + 1
		c.do(chromedp.Navigate(c.base+agentPage("bench-web")), chromedp.WaitVisible(chromedp.ID("deploy")))
		start := time.Now()
		c.do(chromedp.Click(chromedp.ID("deploy")))
		c.waitJS(fmt.Sprintf(`document.getElementById("agent-state").dataset.state === "serving" && `+
			`document.getElementById("active-rev").textContent === "#%d"`, next), 8*time.Minute)
		clicked := time.Since(start)
		require.Contains(b, e.send(b, "bench-web", "after the console deploy"), FakeReply)
		start = time.Now()
		e.mustOcc(b, "agent", "deploy", "bench-web", "--wait", "--timeout", "8m")
		waited := time.Since(start)
		require.Contains(b, e.send(b, "bench-web", "after occ deploy"), FakeReply)
		b.ReportMetric(clicked.Seconds(), "s-console-click-to-serving")
		b.ReportMetric(waited.Seconds(), "s-occ-deploy-wait")
	}
	b.StopTimer()
	e.mustOcc(b, "agent", "delete", "bench-web")
}

// BenchmarkWorkspaceSave: the round trip of one AGENTS.md save through the
// API, the Agent's Gateway and (dedicated) the pinned workspace node, and of
// one read, for an embedded and a dedicated Codex Agent.
func BenchmarkWorkspaceSave(b *testing.B) {
	e := &shared
	e.up(b)
	e.mustOcc(b, "config", "create", "ws-emb", "-f", demoFile(b, "embedded.json"))
	e.mustOcc(b, "agent", "create", "ws-emb", "--config", "ws-emb", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "config", "create", "ws-codex", "-f", demoFile(b, "dedicated-codex.json"))
	e.mustOcc(b, "agent", "create", "ws-codex", "--config", "ws-codex", "--mode", "dedicated",
		"--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "agent", "deploy", "ws-emb", "--wait", "--timeout", "8m")
	e.mustOcc(b, "agent", "deploy", "ws-codex", "--wait", "--timeout", "8m")
	tok, err := os.ReadFile(filepath.Join(e.devDir(), "coordinator", "token"))
	require.NoError(b, err)
	pool, err := client.LoadCA(filepath.Join(e.devDir(), "coordinator", "tls", "ca.crt"))
	require.NoError(b, err)
	cl := client.New("https://"+e.addr, strings.TrimSpace(string(tok)), client.WithCA(pool))
	ctx := context.Background()
	// the first call after activation may wait for the gateway to accept
	// operator connections; warm both up
	for _, a := range []string{"ws-emb", "ws-codex"} {
		require.Eventually(b, func() bool {
			_, err := cl.PutFile(ctx, occ.DefaultNamespace, a, "USER.md", wire.PutWorkspaceFile{Content: "warm", Force: true})
			return err == nil
		}, 5*time.Minute, 500*time.Millisecond)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, a := range []string{"ws-emb", "ws-codex"} {
			cur, err := cl.File(ctx, occ.DefaultNamespace, a, "AGENTS.md")
			require.NoError(b, err)
			ver := cur.SHA256
			if cur.Missing {
				ver = wire.VersionAbsent
			}
			start := time.Now()
			_, err = cl.PutFile(ctx, occ.DefaultNamespace, a, "AGENTS.md",
				wire.PutWorkspaceFile{Content: fmt.Sprintf("# rules %d\n", i), Replaces: ver})
			saved := time.Since(start)
			require.NoError(b, err)
			start = time.Now()
			_, err = cl.File(ctx, occ.DefaultNamespace, a, "AGENTS.md")
			read := time.Since(start)
			require.NoError(b, err)
			kind := "embedded"
			if a == "ws-codex" {
				kind = "dedicated"
			}
			b.ReportMetric(float64(saved.Microseconds())/1000, "ms-save-"+kind)
			b.ReportMetric(float64(read.Microseconds())/1000, "ms-read-"+kind)
		}
	}
	b.StopTimer()
	e.mustOcc(b, "agent", "delete", "ws-emb")
	e.mustOcc(b, "agent", "delete", "ws-codex")
}
