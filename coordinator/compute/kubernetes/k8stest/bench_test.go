package k8stest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rssMiB is a process's resident set size in MiB (0 when it is gone).
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkClusterPod measures the real node: cluster start (to Node
// Ready) and teardown, a one-container podbin Pod create → Running →
// Ready (exec readiness probe, period 1 s), against the baseline of the
// same program started as a plain process in the node's namespace and
// answering its health check, and the resident memory of the node's
// processes with one Pod running.
func BenchmarkClusterPod(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		startAt := time.Now()
		c, err := StartCluster(ctx)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Since(startAt)
		for _, tm := range c.Timings {
			b.Logf("start phase %-30s %v", tm.Phase, tm.Duration.Round(time.Millisecond))
		}
		hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: c.DialContext, DisableKeepAlives: true}}
		healthy := func(url string) bool {
			resp, err := hc.Get(url)
			if err != nil {
				return false
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		const pods = 3
		var running, ready, plain time.Duration
		for i := range pods {
			name := fmt.Sprintf("bench-%d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptrTo(int64(5)), Containers: []corev1.Container{{
					Name: "web", Image: PodbinImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve"},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
						Command: []string{"/podbin", "probe", "http://127.0.0.1:8080/healthz"}}}, PeriodSeconds: 1},
				}}}}
			t0 := time.Now()
			if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			var gotRunning bool
			for {
				p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if !gotRunning && p.Status.Phase == corev1.PodRunning {
					running += time.Since(t0)
					gotRunning = true
				}
				if podReady(p) {
					ready += time.Since(t0)
					break
				}
				if time.Since(t0) > time.Minute {
					b.Fatalf("pod %s not ready", name)
				}
				time.Sleep(20 * time.Millisecond) // polling resolution of the figure
			}
			// Baseline: the same binary as a plain process in the node's
			// network namespace, until its health check answers.
			port := strconv.Itoa(18080 + i)
			t1 := time.Now()
			cmd := c.Command(ctx, c.PodbinPath, "serve")
			cmd.Env = append(cmd.Env, "PORT="+port)
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			for !healthy("http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz") {
				if time.Since(t1) > 30*time.Second {
					b.Fatal("plain podbin never answered")
				}
				time.Sleep(time.Millisecond)
			}
			plain += time.Since(t1)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		pids := c.NodePIDs()
		shims := cgroupPIDs(c.cgroupRoot + "/shims")
		var shimRSS float64
		for _, p := range shims {
			shimRSS += rssMiB(p)
		}
		for _, n := range []string{"kubelet", "containerd", "kube-proxy", "kube-apiserver", "etcd"} {
			if len(pids[n]) == 1 {
				b.ReportMetric(rssMiB(pids[n][0]), strings.ReplaceAll(n, "-", "_")+"_rss_MiB")
			}
		}
		if len(shims) > 0 {
			b.ReportMetric(shimRSS/float64(len(shims)), "shim_rss_MiB")
		}
		stopAt := time.Now()
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(start.Seconds(), "start_s")
		b.ReportMetric(time.Since(stopAt).Seconds(), "stop_s")
		b.ReportMetric(running.Seconds()/pods, "pod_running_s")
		b.ReportMetric(ready.Seconds()/pods, "pod_ready_s")
		b.ReportMetric(plain.Seconds()/pods, "plain_process_ready_s")
		b.ReportMetric(ready.Seconds()/plain.Seconds(), "ready_vs_plain_x")
	}
}
