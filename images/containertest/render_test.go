package containertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/coordinator/compute/kubernetes/fakeapi"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/images/imagestest"
	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/logtest"
	"oce.dev/oce/shared/proc"
)

// rendered is one Pod the driver rendered, with the objects its volumes name.
type rendered struct {
	ns        string
	name      string // Deployment name
	spec      corev1.PodSpec
	objects   imagestest.Objects
	container string
}

// render runs the Kubernetes driver's PrepareRevision against a fake API
// and returns the Deployment of role (kubernetes.RoleGateway or RoleAgent)
// with the Secrets and ConfigMaps of its namespace.
func render(t *testing.T, rev state.Revision, creds map[string][]byte, role string) rendered {
	t.Helper()
	cs := fakeapi.NewClientset()
	prepare(t, cs, rev, creds)
	return renderedOf(t, cs, role)
}

// renderDedicated renders both Pods of a dedicated Codex revision: the
// driver creates the Gateway once the Harness Pod runs, so a running,
// ready Harness Pod is planted between two preparation passes.
func renderDedicated(t *testing.T, rev state.Revision, creds map[string][]byte) (harness, gateway rendered) {
	t.Helper()
	cs := fakeapi.NewClientset()
	prepare(t, cs, rev, creds)
	harness = renderedOf(t, cs, kubernetes.RoleAgent)
	dep, err := cs.AppsV1().Deployments(harness.ns).Get(context.Background(), harness.name, metav1.GetOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: harness.name + "-0", Namespace: harness.ns, Labels: dep.Spec.Template.Labels},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	_, err = cs.CoreV1().Pods(harness.ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	prepare(t, cs, rev, creds)
	return harness, renderedOf(t, cs, kubernetes.RoleGateway)
}

func prepare(t *testing.T, cs *fake.Clientset, rev state.Revision, creds map[string][]byte) {
	t.Helper()
	d, err := kubernetes.New(kubernetes.Config{GatewayImage: images[imagestest.Gateway].Ref, HarnessImage: images[imagestest.Harness].Ref,
		Credentials: kubernetes.CredentialsFunc(func(context.Context, state.Revision) (map[string][]byte, error) { return creds, nil })}, cs)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, d.EnsureNamespace(ctx, state.Namespace{ID: rev.NamespaceID}))
	require.NoError(t, d.PrepareRevision(ctx, rev))
}

func renderedOf(t *testing.T, cs *fake.Clientset, role string) rendered {
	t.Helper()
	ctx := context.Background()
	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelRole + "=" + role})
	require.NoError(t, err)
	require.Len(t, deps.Items, 1, "one %s Deployment", role)
	dep := deps.Items[0]
	r := rendered{ns: dep.Namespace, name: dep.Name, spec: dep.Spec.Template.Spec,
		objects: imagestest.Objects{Secrets: map[string]map[string][]byte{}, ConfigMaps: map[string]map[string]string{}}}
	require.Len(t, r.spec.Containers, 1)
	r.container = r.spec.Containers[0].Name
	secs, err := cs.CoreV1().Secrets(dep.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range secs.Items {
		r.objects.Secrets[s.Name] = s.Data
	}
	cms, err := cs.CoreV1().ConfigMaps(dep.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range cms.Items {
		r.objects.ConfigMaps[c.Name] = c.Data
	}
	return r
}

// secret returns the value of key in any Secret the Pod's volumes name.
func (r rendered) secret(t *testing.T, key string) string {
	t.Helper()
	for _, s := range r.objects.Secrets {
		if v, ok := s[key]; ok {
			return string(v)
		}
	}
	t.Fatalf("no secret key %s", key)
	return ""
}

// claims maps every claim the spec names to a fresh directory.
func (r rendered) claims(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, v := range r.spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out[v.PersistentVolumeClaim.ClaimName] = filepath.Join(t.TempDir(), v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// podOf materializes r as a runc Pod, its init containers run.
func podOf(t *testing.T, r rendered, claims map[string]string, log *logtest.Buffer, extraEnv ...string) *imagestest.Pod {
	t.Helper()
	p, err := imagestest.NewPod(imagestest.PodConfig{Dir: t.TempDir(), Name: r.name + "-0", Namespace: r.ns, UID: "0f0e0d0c-uid",
		Images: unpacked, Objects: r.objects, Claims: claims, ExtraEnv: extraEnv, Log: log}, r.spec)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.RunInit(ctx), "the driver's init container runs in the image: %s", log.String())
	return p
}

func startContainer(t *testing.T, p *imagestest.Pod, name string) *imagestest.Container {
	t.Helper()
	c, err := p.Start(context.Background(), name)
	require.NoError(t, err)
	t.Cleanup(c.Delete)
	return c
}

// waitProbe runs the container's readiness probe at its period until it
// passes (what kubelet does), or fails the test after limit.
func waitProbe(t *testing.T, p *imagestest.Pod, c *imagestest.Container, limit time.Duration) {
	t.Helper()
	spec, _ := p.Spec(c.Name)
	pr := spec.ReadinessProbe
	require.NotNil(t, pr)
	require.NotNil(t, pr.Exec, "the driver renders an exec probe")
	deadline := time.Now().Add(limit)
	for {
		out, code, err := c.Probe(context.Background(), pr)
		require.NoError(t, err)
		if code == 0 {
			return
		}
		if strings.Contains(out, "failed with") {
			t.Fatalf("container %s holds a startup failure: %s\nlogs:\n%s", c.Name, out, p.Logs())
		}
		select {
		case <-c.Done():
			t.Fatalf("container %s exited before ready (probe: %s)", c.Name, out)
		case <-time.After(time.Duration(pr.PeriodSeconds) * time.Second):
		}
		require.True(t, time.Now().Before(deadline), "not ready within %s: %s", limit, out)
	}
}

// startProvider starts the offline fake provider (accepting goodKey) for
// the test.
func startProvider(t *testing.T) *fakeprovider.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fp, err := fakeprovider.Start(ctx, fakeprovider.Options{ValidKeys: []string{goodKey}, Reply: reply})
	require.NoError(t, err)
	t.Cleanup(func() { fp.Close(); cancel() })
	return fp
}

// stopContainer sends SIGTERM to PID 1, as kubelet's stop does, and
// requires exit 0 (tini -e 143 maps the supervisor's SIGTERM exit) within
// budget; it returns how long the stop took.
func stopContainer(t *testing.T, c *imagestest.Container, budget time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, c.Signal(syscall.SIGTERM))
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	code, err := c.Wait(ctx)
	require.NoError(t, err, "stopped within %s", budget)
	require.Equal(t, 0, code)
	return time.Since(start)
}

// procStatus reads one field of /proc/<pid>/status.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}

func cmdline(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// children lists the direct children of pid (host PIDs).
func children(pid int) []int { return proc.Children(pid) }

// requireKubeletShape asserts what the issue asks of every container: tini
// is PID 1 with -s -e 143, the supervisor under it runs as uid/gid 1000 with
// the fsGroup, writing to / fails even for root, every writable mount is
// one of the spec's volumes, and the secrets are kubelet's layout (a
// root-owned, group-readable file behind ..data). It returns the
// supervisor's host PID.
func requireKubeletShape(t *testing.T, p *imagestest.Pod, c *imagestest.Container, supervisor string) int {
	t.Helper()
	pid1, err := c.Pid()
	require.NoError(t, err)
	require.Equal(t, "tini", procStatus(t, pid1, "Name"))
	require.Equal(t, fmt.Sprintf("%d 1", pid1), procStatus(t, pid1, "NSpid"), "tini is PID 1 of the container")
	require.Equal(t, []string{"tini", "-s", "-e", "143", "--", supervisor}, cmdline(pid1))
	kids := children(pid1)
	require.Len(t, kids, 1)
	sup := kids[0]
	require.Equal(t, supervisor, procStatus(t, sup, "Name"))
	require.Equal(t, "1000 1000 1000 1000", procStatus(t, sup, "Uid"))
	require.Equal(t, "1000 1000 1000 1000", procStatus(t, sup, "Gid"))
	require.Equal(t, "1000", procStatus(t, sup, "Groups"), "fsGroup is a supplementary group")
	require.Equal(t, "0000000000000000", procStatus(t, sup, "CapEff"), "no capabilities")
	require.Equal(t, "0000000000000000", procStatus(t, sup, "CapBnd"), "no capabilities")
	require.Equal(t, "1", procStatus(t, sup, "NoNewPrivs"))

	ctx := context.Background()
	out, code, err := c.Exec(ctx, "0:0", "/bin/sh", "-c", "echo x > /oce-write-probe")
	require.NoError(t, err)
	require.NotEqual(t, 0, code, "root cannot write to /")
	require.Contains(t, out, "Read-only file system")
	out, code, err = c.Exec(ctx, "", "/bin/sh", "-c", "echo x > /home/node/.oce-write-probe && rm /home/node/.oce-write-probe")
	require.NoError(t, err)
	require.Equal(t, 0, code, "the home volume is writable: %s", out)

	spec, _ := p.Spec(c.Name)
	volumes := map[string]bool{}
	for _, m := range spec.VolumeMounts {
		if !m.ReadOnly {
			volumes[m.MountPath] = true
		}
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", sup))
	require.NoError(t, err)
	var rootSeen bool
	for _, line := range strings.Split(strings.TrimSpace(string(mi)), "\n") {
		f := strings.Fields(line)
		mnt, opts := f[4], strings.Split(f[5], ",")
		if mnt == "/" {
			rootSeen = true
			require.Contains(t, opts, "ro", "the root file system is read-only")
			continue
		}
		if opts[0] != "rw" || kernelMount(mnt) {
			continue
		}
		require.True(t, volumes[mnt], "writable mount %s is one of the Pod's volumes", mnt)
	}
	require.True(t, rootSeen)

	// the secrets as kubelet delivers them, accepted by the supervisor
	secrets := "/var/run/oce/secrets"
	out, code, err = c.Exec(ctx, "", "/bin/sh", "-c", "ls -a "+secrets+" && readlink "+secrets+"/..data && stat -L -c '%a %u %g' "+secrets+"/*")
	require.NoError(t, err)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "..data")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Count(line, " ") == 2 && !strings.Contains(line, ".") {
			require.Equal(t, "440 0 1000", line, "root-owned, group-readable by the fsGroup")
		}
	}
	return sup
}

// kernelMount: the runtime's own mounts (/proc, /dev, /sys), not image paths.
func kernelMount(mnt string) bool {
	for _, k := range []string{"/proc", "/dev", "/sys"} {
		if mnt == k || strings.HasPrefix(mnt, k+"/") {
			return true
		}
	}
	return false
}

// records are the JSON log records of one component.
func records(log *logtest.Buffer, component string) []map[string]any {
	var out []map[string]any
	for _, r := range log.JSONRecords() {
		if c, _ := r["component"].(string); component == "" || c == component {
			out = append(out, r)
		}
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
