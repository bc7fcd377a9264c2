package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/api/wire"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
)

// BenchmarkRealNode measures oce on the real node, per topology: deploy →
// Pods Running → Ready → first reply, the redeploy outage, the resident
// memory of each Pod (supervisors beside the runtime), and how long after
// the coordinator leader's Pod is deleted the next activation serves. The
// baseline is the local driver in the same run: the e2e package's
// benchmarks (`occ dev up` in a loopback-only namespace) run right after,
// and their figures are reported here with a "local-" prefix.
func BenchmarkRealNode(b *testing.B) {
	team(b)
	occTeam(b, "config", "create", "bench-emb-cfg", "-f", demoFile(b, "embedded.json"))
	occTeam(b, "config", "create", "bench-codex-cfg", "-f", demoFile(b, "dedicated-codex.json"))
	for i := 0; i < b.N; i++ {
		benchEmbedded(b, fmt.Sprintf("bench-emb-%d", i))
		benchDedicated(b, fmt.Sprintf("bench-codex-%d", i))
	}
	b.StopTimer()
	for name, v := range localBaseline(b) {
		b.ReportMetric(v, name)
	}
}

// deployed is what one deploy --wait and the reply after it took.
type deployed struct {
	rev                                 string
	start                               time.Time
	created, running, ready, served, re time.Duration
}

// deployAndReply deploys the Agent, waits for it to serve and answer, and
// reads its role's first Pod of the new revision from the watcher.
func deployAndReply(tb testing.TB, pods *podWatch, agent, role string) deployed {
	tb.Helper()
	t0 := time.Now()
	occTeam(tb, "agent", "deploy", agent, "--wait", "--timeout", "15m")
	served := time.Since(t0)
	rev := getAgent(tb, agent).ActiveRevisionID
	require.Contains(tb, send(tb, agent, "hello from the benchmark"), FakeReply)
	d := deployed{rev: rev, start: t0, served: served, re: time.Since(t0)}
	ps := pods.of(role, rev)
	require.NotEmpty(tb, ps)
	d.created, d.running, d.ready = ps[0].Created.Sub(t0), ps[0].Running.Sub(t0), ps[0].Ready.Sub(t0)
	return d
}

// outage is the time the Agent had no Ready Gateway across a redeploy:
// from its last old Gateway Pod leaving readiness to the new one's Ready.
func outage(pods *podWatch, oldRev, newRev string) time.Duration {
	old := pods.of(kdriver.RoleGateway, oldRev)
	return readyTime(pods.of(kdriver.RoleGateway, newRev)).Sub(old[len(old)-1].NotReady)
}

func benchEmbedded(b *testing.B, name string) {
	var a wire.Agent
	occJSON(b, &a, "-n", Team, "agent", "create", name, "--config", "bench-emb-cfg", "--auth-method", "api_key",
		"--auth-ref", authRef(KeyGood))
	pods := watchAgentPods(b, a.ID)
	d := deployAndReply(b, pods, name, kdriver.RoleGateway)
	b.ReportMetric(d.running.Seconds(), "s-emb-pod-running")
	b.ReportMetric(d.ready.Seconds(), "s-emb-pod-ready")
	b.ReportMetric(d.served.Seconds(), "s-emb-serving")
	b.ReportMetric(d.re.Seconds(), "s-emb-first-reply")
	sup, rt := podMemory(b, "embedded Gateway Pod", readyPodOf(b, a.ID, kdriver.RoleGateway))
	b.ReportMetric(float64(sup)/(1<<20), "MiB-emb-supervisors")
	b.ReportMetric(float64(rt)/(1<<20), "MiB-emb-runtime")

	t0 := time.Now()
	d2 := deployAndReply(b, pods, name, kdriver.RoleGateway)
	b.ReportMetric(outage(pods, d.rev, d2.rev).Seconds(), "s-emb-redeploy-outage")
	b.ReportMetric(time.Since(t0).Seconds(), "s-emb-redeploy-next-reply")

	// The leader's Pod is deleted and a deploy asked at once: how long
	// until that activation serves (election, the work's lease, the
	// cutover and the new gateway's start).
	ctx := b.Context()
	c, err := clusterView(ctx)
	require.NoError(b, err)
	del := time.Now()
	require.NoError(b, cluster.Client.CoreV1().Pods(SystemNS).Delete(ctx, c.LeaderID, metav1.DeleteOptions{}))
	var rev wire.Revision
	require.Eventually(b, func() bool {
		out, code := runOcc(ctx, "-n", Team, "-o", "json", "agent", "deploy", name)
		return code == 0 && jsonInto(out, &rev)
	}, 3*time.Minute, 250*time.Millisecond, "the deploy is admitted by the new leader")
	require.Eventually(b, func() bool {
		var ag wire.Agent
		out, code := runOcc(ctx, "-n", Team, "-o", "json", "agent", "get", name)
		return code == 0 && jsonInto(out, &ag) && ag.ActiveRevisionID == rev.ID && ag.Status != nil &&
			ag.Status.State == wire.AgentServing
	}, 15*time.Minute, 500*time.Millisecond)
	b.ReportMetric(time.Since(del).Seconds(), "s-leader-deleted-to-activation")
	require.NoError(b, oce.waitMembers(ctx))
	deleteAgent(b, name, a.ID)
}

func benchDedicated(b *testing.B, name string) {
	var a wire.Agent
	occJSON(b, &a, "-n", Team, "agent", "create", name, "--config", "bench-codex-cfg", "--mode", "dedicated",
		"--auth-method", "api_key", "--auth-ref", authRef(KeyGood))
	pods := watchAgentPods(b, a.ID)
	d := deployAndReply(b, pods, name, kdriver.RoleAgent)
	b.ReportMetric(d.running.Seconds(), "s-ded-harness-running")
	b.ReportMetric(d.ready.Seconds(), "s-ded-harness-ready")
	b.ReportMetric(readyTime(pods.of(kdriver.RoleGateway, d.rev)).Sub(d.start).Seconds(), "s-ded-gateway-ready")
	b.ReportMetric(d.served.Seconds(), "s-ded-serving")
	b.ReportMetric(d.re.Seconds(), "s-ded-first-reply")
	sup, rt := podMemory(b, "dedicated Gateway Pod", readyPodOf(b, a.ID, kdriver.RoleGateway))
	b.ReportMetric(float64(sup)/(1<<20), "MiB-ded-gateway-supervisors")
	b.ReportMetric(float64(rt)/(1<<20), "MiB-ded-gateway-runtime")
	sup, rt = podMemory(b, "dedicated Harness Pod", readyPodOf(b, a.ID, kdriver.RoleAgent))
	b.ReportMetric(float64(sup)/(1<<20), "MiB-ded-harness-supervisors")
	b.ReportMetric(float64(rt)/(1<<20), "MiB-ded-harness-runtime")

	t0 := time.Now()
	d2 := deployAndReply(b, pods, name, kdriver.RoleAgent)
	b.ReportMetric(outage(pods, d.rev, d2.rev).Seconds(), "s-ded-redeploy-outage")
	b.ReportMetric(time.Since(t0).Seconds(), "s-ded-redeploy-next-reply")
	deleteAgent(b, name, a.ID)
}

// deleteAgent deletes an Agent and waits until nothing of it is left.
func deleteAgent(tb testing.TB, name, id string) {
	tb.Helper()
	occTeam(tb, "agent", "delete", name)
	require.Eventually(tb, func() bool {
		_, code := runOcc(context.Background(), "-n", Team, "agent", "get", name)
		return code != 0 && len(agentObjects(tb, id)) == 0
	}, 10*time.Minute, time.Second)
}

// localBenchmarks are the e2e package's (local driver) benchmarks the
// baseline runs.
const localBenchmarks = "^(BenchmarkColdDevUpToFirstReply|BenchmarkWarmRedeploy|BenchmarkResidentMemory)$"

// localBaseline builds the e2e test binary and runs its benchmarks (each
// inside its own loopback-only namespace, `occ dev up` with the local
// driver), returning their custom metrics as "local-<benchmark>-<unit>".
func localBaseline(tb testing.TB) map[string]float64 {
	tb.Helper()
	root, err := k8stest.RepoRoot()
	require.NoError(tb, err)
	bin := filepath.Join(tb.TempDir(), "e2e.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "./e2e")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(tb, err, "%s", out)
	run := exec.Command(bin, "-test.run", "^$", "-test.bench", localBenchmarks, "-test.benchtime", "1x", "-test.timeout", "60m")
	run.Dir = filepath.Join(root, "e2e")
	var stdout bytes.Buffer
	run.Stdout, run.Stderr = &stdout, os.Stderr
	require.NoError(tb, run.Run(), "%s", stdout.String())
	return parseBenchMetrics(tb, stdout.String())
}

// parseBenchMetrics reads the custom metrics of `go test -bench` output
// lines ("BenchmarkX-2  1  123 ns/op  4.5 s-unit …").
func parseBenchMetrics(tb testing.TB, out string) map[string]float64 {
	tb.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		for j := 2; j+1 < len(f); j += 2 {
			if f[j+1] == "ns/op" {
				continue
			}
			v, err := strconv.ParseFloat(f[j], 64)
			if err == nil {
				m["local-"+name+"-"+f[j+1]] = v
			}
		}
	}
	require.NotEmpty(tb, m, "no metric in the local benchmarks' output:\n%s", out)
	return m
}
