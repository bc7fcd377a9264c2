package k8stest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"oce.dev/oce/internal/poll"
)

// podbinPod is a Pod of two podbin containers: "web" with an exec
// readiness probe, "side" with an httpGet one, both as uid 1000 on a
// read-only root, the first writing to a claim from the local class.
func podbinPod(ns, name string, labels map[string]string) *corev1.Pod {
	sc := &corev1.SecurityContext{RunAsUser: ptrTo(int64(1000)), RunAsGroup: ptrTo(int64(1000)), RunAsNonRoot: ptrTo(true),
		ReadOnlyRootFilesystem: ptrTo(true), AllowPrivilegeEscalation: ptrTo(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptrTo(int64(10)),
			SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptrTo(int64(1000))},
			Containers: []corev1.Container{{
				Name: "web", Image: PodbinImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"/podbin", "probe", "http://127.0.0.1:8080/healthz"}}}, PeriodSeconds: 1},
				SecurityContext: sc,
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}, {
				Name: "side", Image: PodbinImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve"},
				Env: []corev1.EnvVar{{Name: "PORT", Value: "8081"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromInt(8081)}}, PeriodSeconds: 1},
				SecurityContext: sc,
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-data"}}}},
		},
	}
}

// waitPod watches one Pod until cond holds for it.
func waitPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	for {
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		require.NoError(t, err)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && cond(p) {
				w.Stop()
				return p
			}
		}
		require.NoError(t, ctx.Err(), "waiting for pod %s/%s", ns, name)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestClusterRunsRealPods starts the real node, runs a podbin Pod (exec
// and httpGet readiness, a local claim written as uid 1000 through
// fsGroup), reaches it through a Service virtual IP that kube-proxy
// translates, deletes it and sees SIGTERM reach the program, then tears
// the cluster down and checks nothing is left: no process, cgroup, mount
// or directory, and the kubelet's host sysctls restored.
func TestClusterRunsRealPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// A run killed before its teardown is repaired first, so "before" is
	// the host's own state.
	require.NoError(t, RepairHost())
	mountsBefore, err := HostMounts()
	require.NoError(t, err)
	sysctlsBefore := ReadSysctls(HostSysctls)
	_, kubeletDirBefore := os.Stat("/var/lib/kubelet")

	startAt := time.Now()
	c, err := StartCluster(ctx)
	require.NoError(t, err)
	t.Logf("cluster started (node Ready) in %v", time.Since(startAt).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			require.NoError(t, c.Stop())
		}
	}()
	cs := c.Client
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, "v1.37.2", v.GitVersion)
	imgs, err := c.Images(ctx)
	require.NoError(t, err)
	require.Contains(t, imgs, PauseImage)
	require.Contains(t, imgs, PodbinImage)
	require.NotEqual(t, sysctlsBefore["vm.overcommit_memory"], "", "the sysctl is readable")

	const ns = "podtest"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 50*time.Millisecond)
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "web-data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	labels := map[string]string{"app": "web"}
	created := time.Now()
	_, err = cs.CoreV1().Pods(ns).Create(ctx, podbinPod(ns, "web", labels), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPod(ctx, t, cs, ns, "web", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	running := time.Since(created)
	pod := waitPod(ctx, t, cs, ns, "web", podReady)
	t.Logf("pod create → Running %v → Ready %v", running.Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	require.Equal(t, RealNodeName, pod.Spec.NodeName)
	require.True(t, strings.HasPrefix(pod.Status.PodIP, "10.232.0."), "pod IP %q on the CNI bridge", pod.Status.PodIP)

	// exec into the running container; the claim is writable by uid 1000.
	out, err := c.Exec(ctx, ns, "web", "web", "/podbin", "write", "/data/hello", "hi")
	require.NoError(t, err)
	require.Contains(t, out, "as uid 1000 gid 1000")
	_, err = c.Exec(ctx, ns, "web", "web", "/podbin", "write", "/hello", "hi")
	require.Error(t, err, "the root filesystem is read-only")
	logs, err := c.Logs(ctx, ns, "web", "web", false)
	require.NoError(t, err)
	require.Contains(t, logs, "serving on :8080 as pid 1 uid 1000")

	// A Service virtual IP answers through kube-proxy's rules once the
	// endpoint is programmed.
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: c.DialContext, DisableKeepAlives: true}}
	vip := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	var body string
	require.Eventually(t, func() bool {
		resp, err := hc.Get(vip)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, "podbin web\n", body)
	// By name too: from a Pod (its resolv.conf names the cluster's CoreDNS;
	// Pod → Service → the same Pod, through the bridge's hairpin) and from
	// the test process.
	out, err = c.Exec(ctx, ns, "web", "side", "/podbin", "resolve", "web.podtest.svc.cluster.local")
	require.NoError(t, err)
	require.Equal(t, svc.Spec.ClusterIP, strings.TrimSpace(out))
	_, err = c.Exec(ctx, ns, "web", "side", "/podbin", "probe", "http://web.podtest.svc/healthz")
	require.NoError(t, err, "a Pod reaches a Service by name")
	resp, err := hc.Get("http://web.podtest.svc/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// The Pod's processes, from its cgroup: the sandbox and the two
	// containers, each with its resident memory. The web container's exec
	// probe runs a short-lived process in the same cgroup every second (seen
	// mid-exec as "/", or as a zombie without RSS), so wait for a reading
	// between probes: a lasting extra process never gives one.
	var procs []Process
	poll.Until(t, func() bool {
		procs, err = c.PodProcesses(pod.UID)
		require.NoError(t, err)
		names := map[string]int{}
		for _, p := range procs {
			names[p.Name]++
		}
		return maps.Equal(names, map[string]int{"podbin": 3})
	}, 30*time.Second, 50*time.Millisecond, "pause (podbin), web and side; last: %+v", &procs)
	for _, p := range procs {
		require.Positive(t, p.RSS, "%+v", p)
	}
	_, err = c.PodProcesses("no-such-pod")
	require.ErrorIs(t, err, ErrNoPod)

	pids := c.NodePIDs()
	require.NotEmpty(t, pids["cgroup"], "shims and containers live in the node's cgroup root")
	for _, n := range []string{"etcd", "kube-apiserver", "containerd", "kubelet", "kube-proxy", "coredns"} {
		require.Len(t, pids[n], 1, n)
	}

	// Deleting the Pod delivers SIGTERM to the program (PID 1 of its
	// container), which logs it and exits.
	logLines, err := c.LogLines(ctx, ns, "web", "web")
	require.NoError(t, err)
	deleted := time.Now()
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	got := logLines()
	require.Contains(t, got, "podbin: SIGTERM received", "log: %v", got)
	require.Contains(t, got, "podbin: stopped")
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond)
	t.Logf("pod deleted → gone %v", time.Since(deleted).Round(time.Millisecond))

	dir, root := c.Dir, c.CgroupRoot()
	stopAt := time.Now()
	stopped = true
	require.NoError(t, c.Stop())
	t.Logf("cluster stopped in %v", time.Since(stopAt).Round(time.Millisecond))
	for name, ps := range pids {
		for _, p := range ps {
			require.True(t, ProcessGone(p), "%s pid %d still runs", name, p)
		}
	}
	require.False(t, CgroupExists(root), "cgroup root %s left", root)
	mountsAfter, err := HostMounts()
	require.NoError(t, err)
	require.Equal(t, mountsBefore, mountsAfter, "host mounts changed")
	require.Equal(t, sysctlsBefore, ReadSysctls(HostSysctls), "host sysctls restored")
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "cluster dir %s left", dir)
	_, kubeletDirAfter := os.Stat("/var/lib/kubelet")
	require.Equal(t, fmt.Sprint(os.IsNotExist(kubeletDirBefore)), fmt.Sprint(os.IsNotExist(kubeletDirAfter)), "/var/lib/kubelet as before")
}
