package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"oce.dev/oce/coordinator/api/wire"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
)

// Team is the oce Namespace the tests' Agents live in.
const Team = "team"

var teamOnce sync.Once

// team creates the oce Namespace once, with its credential source
// ModelSecret holding the model keys (KeyGood, KeyBad, KeyUpfrontOnly),
// created through occ from 0600 files: the Secret lives in the Namespace's
// own Kubernetes namespace, nowhere else.
func team(t testing.TB) {
	t.Helper()
	teamOnce.Do(func() {
		mustOcc(t, "namespace", "create", Team)
		dir := t.TempDir()
		args := []string{"-n", Team, "credential", "create", ModelSecret}
		for k, v := range modelKeys() {
			p := filepath.Join(dir, k)
			require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o600))
			args = append(args, "--from-file", k+"="+p)
		}
		mustOcc(t, args...)
	})
}

// occTeam runs occ in the team Namespace and requires exit 0.
func occTeam(t testing.TB, args ...string) string {
	t.Helper()
	return mustOcc(t, append([]string{"-n", Team}, args...)...)
}

// demoFile is a configuration document of scripts/demo.
func demoFile(t testing.TB, name string) string {
	t.Helper()
	root, err := k8stest.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, "scripts", "demo", name)
}

// authRef names a key of the team's model credential source (harnessAuth
// sourceRef).
func authRef(key string) string { return "credential:" + ModelSecret + "#" + key }

func getAgent(t testing.TB, name string) wire.Agent {
	t.Helper()
	var a wire.Agent
	occJSON(t, &a, "-n", Team, "agent", "get", name)
	return a
}

// servingAgent reads the Agent until a member answers it serving.
func servingAgent(t testing.TB, name string) wire.Agent {
	t.Helper()
	return agentIn(t, name, wire.AgentServing)
}

// agentIn reads the Agent until a member answers it in state (each occ
// call may reach another member through the API Service; default reads
// are bounded-stale, docs/API.md), for at most 15 s after a deploy --wait
// saw it so on one member.
func agentIn(t testing.TB, name, state string) wire.Agent {
	t.Helper()
	var a wire.Agent
	require.Eventually(t, func() bool {
		a = getAgent(t, name)
		return a.Status != nil && a.Status.State == state
	}, 15*time.Second, 200*time.Millisecond, "the Agent %s: %+v", state, &a)
	return a
}

// latestRevision is the Agent's highest-numbered revision.
func latestRevision(t testing.TB, name string) wire.Revision {
	t.Helper()
	var revs []wire.Revision
	occJSON(t, &revs, "-n", Team, "revisions", name)
	require.NotEmpty(t, revs)
	last := revs[0]
	for _, r := range revs {
		if r.Number > last.Number {
			last = r
		}
	}
	occJSON(t, &last, "-n", Team, "revisions", name, last.ID)
	return last
}

// activations counts the Agent's activate audit records per revision.
func activations(t testing.TB, agentID string) map[string]int {
	t.Helper()
	var recs []wire.AuditRecord
	occJSON(t, &recs, "audit", "--limit", "1000")
	out := map[string]int{}
	for _, r := range recs {
		if r.Action == wire.AuditActivate && r.AgentID == agentID {
			out[r.RevisionID]++
		}
	}
	return out
}

// send runs `occ agent send` and returns what it printed.
func send(t testing.TB, agent, msg string) string {
	t.Helper()
	return occTeam(t, "agent", "send", agent, msg, "--timeout", "8m")
}

// providerRequests counts the fake provider's request records (its Pod
// log: one JSON record per request) in total and answered 401.
func providerRequests(t testing.TB) (total, unauthorized int) {
	t.Helper()
	ctx := context.Background()
	l, err := cluster.Client.CoreV1().Pods(ProviderNS).List(ctx, metav1.ListOptions{LabelSelector: "app=fake-provider"})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	logs, err := cluster.Logs(ctx, ProviderNS, l.Items[0].Name, "fake-provider", false)
	require.NoError(t, err)
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var r struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Msg != "fakeprovider.request" {
			continue
		}
		total++
		if r.Status == 401 {
			unauthorized++
		}
	}
	return total, unauthorized
}

// agentObjects lists, by kind, every object labelled with the Agent in
// any namespace.
func agentObjects(t testing.TB, agentID string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: kdriver.LabelAgent + "=" + agentID}
	c := cluster.Client
	lists := map[string]func() (runtime.Object, error){
		"deployments":            func() (runtime.Object, error) { return c.AppsV1().Deployments("").List(ctx, opts) },
		"pods":                   func() (runtime.Object, error) { return c.CoreV1().Pods("").List(ctx, opts) },
		"services":               func() (runtime.Object, error) { return c.CoreV1().Services("").List(ctx, opts) },
		"secrets":                func() (runtime.Object, error) { return c.CoreV1().Secrets("").List(ctx, opts) },
		"configmaps":             func() (runtime.Object, error) { return c.CoreV1().ConfigMaps("").List(ctx, opts) },
		"serviceaccounts":        func() (runtime.Object, error) { return c.CoreV1().ServiceAccounts("").List(ctx, opts) },
		"networkpolicies":        func() (runtime.Object, error) { return c.NetworkingV1().NetworkPolicies("").List(ctx, opts) },
		"persistentvolumeclaims": func() (runtime.Object, error) { return c.CoreV1().PersistentVolumeClaims("").List(ctx, opts) },
	}
	out := map[string][]string{}
	for kind, list := range lists {
		l, err := list()
		require.NoError(t, err)
		var names []string
		require.NoError(t, meta.EachListItem(l, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				names = append(names, m.GetNamespace()+"/"+m.GetName())
			}
			return err
		}))
		if len(names) > 0 {
			sort.Strings(names)
			out[kind] = names
		}
	}
	return out
}

// claimDir is the local volume directory behind the Agent's claim of a
// workload role (gateway: the gateway-state claim; agent: the Harness
// workspace claim).
func claimDir(t testing.TB, agentID, role string) string {
	t.Helper()
	ctx := context.Background()
	l, err := cluster.Client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{
		LabelSelector: kdriver.LabelAgent + "=" + agentID})
	require.NoError(t, err)
	for _, c := range l.Items {
		isGateway := strings.Contains(c.Name, "gateway")
		if (role == kdriver.RoleGateway) != isGateway || c.Spec.VolumeName == "" {
			continue
		}
		pv, err := cluster.Client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, pv.Spec.Local, "a local volume of the test node")
		return pv.Spec.Local.Path
	}
	require.FailNow(t, "no bound claim", "agent %s role %s: %+v", agentID, role, l.Items)
	return ""
}

// findFile walks dir for a file named name and returns its paths.
func findFile(dir, name string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// livePods are the Agent's Pods of a role that are not being deleted.
func livePods(t testing.TB, agentID, role string) []corev1.Pod {
	t.Helper()
	l, err := cluster.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{
		LabelSelector: kdriver.LabelAgent + "=" + agentID + "," + kdriver.LabelRole + "=" + role})
	require.NoError(t, err)
	var live []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// readyPodOf is the single live, Ready Pod of the Agent's role.
func readyPodOf(t testing.TB, agentID, role string) *corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	for _, p := range livePods(t, agentID, role) {
		if podReady(&p) {
			ready = append(ready, p)
		}
	}
	require.Len(t, ready, 1, "one Ready %s Pod of %s", role, agentID)
	return &ready[0]
}

// logRecords parses a container's JSON log lines.
func logRecords(lines []string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		var r map[string]any
		if json.Unmarshal([]byte(l), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// record finds the first log record with msg.
func record(recs []map[string]any, msg string) map[string]any {
	for _, r := range recs {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// figures collects the suite's measurements for the report TestMain prints
// (docs/PERFORMANCE.md, "The real node end to end").
var figures struct {
	mu    sync.Mutex
	lines []string
}

func figure(t testing.TB, name string, d time.Duration) {
	t.Helper()
	t.Logf("figure %-55s %7.1fs", name, d.Seconds())
	figures.mu.Lock()
	figures.lines = append(figures.lines, name+"\t"+d.Round(100*time.Millisecond).String())
	figures.mu.Unlock()
}

// envOf maps a container's literal environment.
func envOf(env []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		out[e.Name] = e.Value
	}
	return out
}

// jsonInto decodes occ's JSON output, reporting success.
func jsonInto(out string, v any) bool { return json.Unmarshal([]byte(out), v) == nil }

// supervisors are oce's own programs in the Pods; the pause sandbox is the
// harness's podbin; everything else is the runtime they supervise.
var supervisors = map[string]bool{"tini": true, "gatewayd": true, "harnessd": true, "nodehost": true, "coordinator": true}

// podMemory logs and records a Pod's resident memory: oce's supervisors
// beside the runtime (OpenClaw on Node, Codex), the sandbox apart.
func podMemory(t testing.TB, what string, p *corev1.Pod) (supervisor, runtime int64) {
	t.Helper()
	procs, err := cluster.PodProcesses(p.UID)
	require.NoError(t, err)
	var names []string
	for _, pr := range procs {
		switch {
		case pr.Name == "podbin":
		case supervisors[pr.Name]:
			supervisor += pr.RSS
		default:
			runtime += pr.RSS
		}
		names = append(names, fmt.Sprintf("%s %.1f MiB", pr.Name, float64(pr.RSS)/(1<<20)))
	}
	t.Logf("memory %s: %s", what, strings.Join(names, ", "))
	memFigure(t, what+": supervisors", supervisor)
	memFigure(t, what+": runtime", runtime)
	// The cgroup's peak since the Pod started (its start included, page
	// cache too): what the memory limit must leave room for.
	if peak, err := cluster.PodMemoryPeak(p.UID); err == nil {
		memFigure(t, what+": cgroup peak (RSS + page cache)", peak)
	}
	return supervisor, runtime
}

func memFigure(t testing.TB, name string, bytes int64) {
	t.Helper()
	figures.mu.Lock()
	figures.lines = append(figures.lines, fmt.Sprintf("%s\t%.1f MiB", name, float64(bytes)/(1<<20)))
	figures.mu.Unlock()
}
