package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Deadlines of the real node.
const (
	// NodeStartTimeout bounds the Node becoming Ready after the kubelet starts.
	NodeStartTimeout = 2 * time.Minute
	// ImportTimeout bounds one `ctr images import` (a ~1 GB runtime image
	// takes 13–40 s here).
	ImportTimeout = 5 * time.Minute
	// PodStopGrace is how long teardown gives the Pods still running
	// before it kills what is left in the node's cgroups.
	PodStopGrace = 10 * time.Second
)

// Names of the real node.
const (
	// RealNodeName is the Node the kubelet registers.
	RealNodeName = "oce-node-0"
	// PauseImage is the locally built sandbox image (a static binary that
	// waits for SIGTERM), pinned in containerd.
	PauseImage = "oce.local/k8stest/pause:1"
	// PodbinImage is the harness's test workload image (podbin: serve,
	// probe, held, ready); tests run it with imagePullPolicy Never.
	PodbinImage = "oce.local/k8stest/podbin:1"
	// LocalStorageClass is the default StorageClass of the real node: the
	// harness provisions a local PersistentVolume for each claim once the
	// scheduler has picked the node (WaitForFirstConsumer).
	LocalStorageClass = "oce-local"
	// ClusterDomain is the DNS domain CoreDNS serves (Pods resolve
	// <service>.<namespace>.svc through it, on the node address).
	ClusterDomain = "cluster.local"
	runcBinary    = "/usr/sbin/runc"
	cniBinDir     = "/usr/lib/cni"
)

// Cluster is the test control plane plus one real node: containerd, runc,
// the CNI bridge, kubelet and kube-proxy (iptables) inside a network and a
// mount namespace of its own. Pods run for real from images imported from
// OCI archives (imagePullPolicy Never); nothing is pulled from a registry.
//
// The test process reaches the cluster through Config (its Dial enters the
// node's network namespace); programs run inside with Command. Start it
// once per test binary with ClusterMain, or StartCluster/Stop.
type Cluster struct {
	*Env

	// NodeBinDir holds containerd, ctr, the runc shim and coredns.
	NodeBinDir string
	// PodbinPath is the static podbin binary built for this run.
	PodbinPath string

	// Timings records how long each start phase took, in order.
	Timings []Timing

	kubeconfig string
	cgroupRoot string
	sysctls    map[string]string
	createdDir []string
	lock       *nodeLock
	sock       string // containerd's socket
	provision  context.CancelFunc
	provDone   chan struct{}
}

// Timing is one phase of StartCluster.
type Timing struct {
	Phase    string
	Duration time.Duration
}

// mark records the phase that ends now.
func (c *Cluster) mark(phase string, since *time.Time) {
	now := time.Now()
	c.Timings = append(c.Timings, Timing{phase, now.Sub(*since)})
	*since = now
}

// ClusterMain starts a Cluster, stores it in *c, runs the tests and tears
// it down; it returns the exit code. A start or teardown failure fails the
// run loudly.
func ClusterMain(m *testing.M, c **Cluster) int {
	return runMain(m, "the test cluster", StartCluster, c)
}

// NodeBinaries runs scripts/k8s-testenv/node.sh (apt packages when
// missing; containerd and CoreDNS built once into the shared cache) and
// returns their bin directory.
func NodeBinaries(ctx context.Context) (string, error) {
	bin, stderr, err := runScript(ctx, "node.sh")
	if err != nil {
		return "", err
	}
	if err := requireExecutables(bin, "node.sh", stderr, "containerd", "ctr", "containerd-shim-runc-v2", "coredns",
		"kube-network-policies"); err != nil {
		return "", err
	}
	for _, p := range []string{runcBinary, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")} {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("k8stest: %s missing after node.sh: %w", p, err)
		}
	}
	return bin, nil
}

// buildPodbin compiles the podbin test program (static, CGO off).
func buildPodbin(ctx context.Context, dst string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", dst, "./coordinator/compute/kubernetes/k8stest/podbin")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("k8stest: build podbin: %w: %s", err, out)
	}
	return nil
}

// PodbinArchive writes an OCI archive of a FROM-scratch image holding only
// the podbin binary as /podbin, named name, with entrypoint /podbin.
func (c *Cluster) PodbinArchive(name string, cmd ...string) (string, error) {
	bin, err := os.ReadFile(c.PodbinPath)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(c.Dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(name)+".oci.tar")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	return dst, WriteOCIArchive(dst, Image{Name: name, Files: map[string]ImageFile{"/podbin": {Mode: 0o755, Data: bin}},
		Entrypoint: []string{"/podbin"}, Cmd: cmd})
}

// StartCluster builds what is missing and starts the cluster: it takes the
// machine's node lock (one real node at a time), repairs a killed run's
// leftovers, records the host sysctls, creates the namespaces and a private
// cgroup root, starts the control plane bound on the node address, then
// containerd, the kubelet and kube-proxy, imports the pause and podbin
// images and waits for the Node to be Ready.
func StartCluster(ctx context.Context) (_ *Cluster, err error) {
	at := time.Now()
	bin, err := Binaries(ctx)
	if err != nil {
		return nil, err
	}
	nodeBin, err := NodeBinaries(ctx)
	if err != nil {
		return nil, err
	}
	lock, err := lockNode()
	if err != nil {
		return nil, fmt.Errorf("k8stest: node lock: %w", err)
	}
	if err := repairStale(); err != nil {
		lock.unlock()
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oce-k8snode-")
	if err != nil {
		lock.unlock()
		return nil, err
	}
	c := &Cluster{Env: &Env{Dir: dir, BinDir: bin}, NodeBinDir: nodeBin, lock: lock,
		cgroupRoot: "/" + filepath.Base(dir), sysctls: ReadSysctls(HostSysctls)}
	c.mark("binaries and node lock", &at)
	defer func() {
		if err != nil {
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w (teardown: %v)", err, serr)
			}
		}
	}()
	c.PodbinPath = filepath.Join(dir, "podbin")
	if err := buildPodbin(ctx, c.PodbinPath); err != nil {
		return nil, err
	}
	c.mark("podbin build", &at)
	// Hard-coded runtime paths get a tmpfs inside the private mount
	// namespace; a directory the host lacked is created for the mount point
	// and removed at teardown.
	hardcoded := []string{"/var/lib/kubelet", "/run/containerd"}
	for _, d := range hardcoded {
		created, err := ensureDir(d)
		if err != nil {
			return nil, err
		}
		if created {
			c.createdDir = append(c.createdDir, d)
		}
	}
	if err := saveState(nodeState{Sysctls: c.sysctls, CgroupRoot: c.cgroupRoot, CreatedDir: c.createdDir, RunDir: dir}); err != nil {
		return nil, err
	}
	if err := makeCgroup(c.cgroupRoot); err != nil {
		return nil, fmt.Errorf("k8stest: cgroup root: %w", err)
	}
	if err := makeCgroup(c.cgroupRoot + "/shims"); err != nil {
		return nil, fmt.Errorf("k8stest: shim cgroup: %w", err)
	}
	ns, err := newNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	c.ns = ns
	for _, d := range hardcoded {
		if out, err := ns.run(ctx, "mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d); err != nil {
			return nil, fmt.Errorf("k8stest: private %s: %w: %s", d, err, out)
		}
	}
	p, err := makePKI(dir, net.ParseIP(NodeIP))
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	kcCert, kcKey, err := p.issue("apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client",
		Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	c.kubeconfig, err = c.startControlPlane(ctx, p, controlPlane{bind: "0.0.0.0", advertise: NodeIP,
		etcdClient: 2379, etcdPeer: 2380, api: apiServicePort, kcm: 10257, sched: 10259, dial: ns.dial,
		apiserverArgs: []string{"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate=" + kcCert, "--kubelet-client-key=" + kcKey,
			"--kubelet-certificate-authority=" + p.CACert, "--kubelet-preferred-address-types=InternalIP"}})
	if err != nil {
		return nil, err
	}
	c.mark("namespaces and control plane", &at)
	if err := c.startContainerd(ctx); err != nil {
		return nil, err
	}
	pause, err := c.PodbinArchive(PauseImage, "pause")
	if err != nil {
		return nil, err
	}
	podbin, err := c.PodbinArchive(PodbinImage, "serve")
	if err != nil {
		return nil, err
	}
	for _, a := range []string{pause, podbin} {
		if _, err := c.ImportImage(ctx, a); err != nil {
			return nil, err
		}
	}
	c.mark("containerd and image import", &at)
	if err := c.startKubelet(ctx, p); err != nil {
		return nil, err
	}
	c.mark("kubelet to Node Ready", &at)
	if err := c.startKubeProxy(ctx, p); err != nil {
		return nil, err
	}
	if err := c.startCoreDNS(ctx); err != nil {
		return nil, err
	}
	if err := c.startNetworkPolicies(ctx); err != nil {
		return nil, err
	}
	if err := c.startProvisioner(ctx); err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	c.mark("kube-proxy, CoreDNS, NetworkPolicy enforcer, storage", &at)
	return c, nil
}

// Kubeconfig is the admin kubeconfig's path; its server address is valid
// inside the node's network namespace (use it with Command or Kubectl).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// DialContext opens a connection from inside the node's network namespace
// (Pod and Service addresses, the API server); use it as an HTTP
// transport's DialContext to reach Pods from the test process. A host name
// is resolved by the cluster's CoreDNS (a name ending in ".svc" gets the
// cluster domain), so Service URLs such as http://web.ns.svc:80 work.
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) == nil {
		ips, err := c.LookupHost(ctx, host)
		if err != nil {
			return nil, err
		}
		addr = net.JoinHostPort(ips[0], port)
	}
	return c.ns.dial(ctx, network, addr)
}

// LookupHost resolves a cluster name (Services, Pods) through the
// cluster's CoreDNS; "x.ns.svc" gets the cluster domain.
func (c *Cluster) LookupHost(ctx context.Context, host string) ([]string, error) {
	if strings.HasSuffix(host, ".svc") {
		host += "." + ClusterDomain
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return c.ns.dial(ctx, network, net.JoinHostPort(NodeIP, "53"))
	}}
	return r.LookupHost(ctx, host+".")
}

// Command returns an unstarted command that runs name inside the node's
// network and mount namespaces (with the cluster's KUBECONFIG), in the
// mount namespace's root directory: entering a mount namespace resets the
// working directory, so the returned command's Dir has no effect on it —
// use CommandIn for a working directory.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return c.CommandIn(ctx, "", name, args...)
}

// CommandIn is Command run in the working directory dir (a path as the
// node's mount namespace sees it; "" is its root).
func (c *Cluster) CommandIn(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := c.ns.commandIn(ctx, dir, append([]string{name}, args...)...)
	cmd.Env = append(cmd.Env, "KUBECONFIG="+c.kubeconfig)
	return cmd
}

// Kubectl runs the pinned kubectl inside the node's namespaces and returns
// its stdout; stderr is in the error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := c.Command(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig=" + c.kubeconfig}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// Exec runs argv in a container of a running Pod (kubectl exec) and
// returns its stdout; a non-zero exit is an error carrying stderr.
func (c *Cluster) Exec(ctx context.Context, namespace, pod, container string, argv ...string) (string, error) {
	args := []string{"exec", "-n", namespace, pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	return c.Kubectl(ctx, append(append(args, "--"), argv...)...)
}

// Logs returns a container's log (the current instance's, or the previous
// one's with previous set).
func (c *Cluster) Logs(ctx context.Context, namespace, pod, container string, previous bool) (string, error) {
	b, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
	return string(b), err
}

// ReadinessFailures counts kubelet's failed readiness probes of a Pod
// (its "Unhealthy" Events' counts).
func (c *Cluster) ReadinessFailures(ctx context.Context, p *corev1.Pod) (int32, error) {
	l, err := c.Client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(p.UID) + ",reason=Unhealthy"})
	if err != nil {
		return 0, err
	}
	var n int32
	for _, e := range l.Items {
		if strings.HasPrefix(e.Message, "Readiness probe failed") {
			n += max(e.Count, 1)
		}
	}
	return n, nil
}

// FollowLogs streams a container's log until it exits or ctx ends.
func (c *Cluster) FollowLogs(ctx context.Context, namespace, pod, container string) (io.ReadCloser, error) {
	return c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
}

// MaxLogLine is the longest log line LogLines reads.
const MaxLogLine = 16 << 20

// LogLines follows a container's log from now on; wait blocks until the
// container exits (or ctx ends) and returns every line, so a test can stop
// a Pod and then read what the program logged on its way out (SIGTERM).
func (c *Cluster) LogLines(ctx context.Context, namespace, pod, container string) (wait func() []string, err error) {
	rc, err := c.FollowLogs(ctx, namespace, pod, container)
	if err != nil {
		return nil, err
	}
	done := make(chan []string, 1)
	go func() {
		lines := scanLines(rc)
		// kubelet can end a follow when it sees the container exit, before
		// the last lines written on the way out reached it: read the whole
		// log once more (complete now) and keep the longer account
		if full, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod,
			&corev1.PodLogOptions{Container: container}).Stream(ctx); err == nil {
			if again := scanLines(full); len(again) > len(lines) {
				lines = again
			}
		}
		done <- lines
	}()
	return func() []string { return <-done }, nil
}

// scanLines reads every line of rc and closes it. A runtime's line can be
// long (a child's output, a config dump): the default 64 KiB token limit
// would end the scan early and lose the records written on the way out.
func scanLines(rc io.ReadCloser) []string {
	defer rc.Close()
	var lines []string
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLogLine)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		lines = append(lines, "k8stest: log stream: "+err.Error())
	}
	return lines
}

var importedRe = regexp.MustCompile(`(?m)^unpacking (\S+) \(sha256:[0-9a-f]+\)`)

// ImportImage imports an OCI (or docker) image archive into the node's
// containerd ("k8s.io" namespace, unpacked for the overlayfs snapshotter)
// and returns the image names it holds; Pods use them with
// imagePullPolicy Never.
func (c *Cluster) ImportImage(ctx context.Context, archive string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, ImportTimeout)
	defer cancel()
	out, err := c.ctr(ctx, "images", "import", "--local", archive)
	if err != nil {
		return nil, fmt.Errorf("k8stest: import %s: %w", archive, err)
	}
	var names []string
	for _, m := range importedRe.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("k8stest: import %s: no named image in the archive (ctr said %q)", archive, tail(out, 500))
	}
	sort.Strings(names)
	return names, nil
}

// Images lists the image names the node's containerd holds.
func (c *Cluster) Images(ctx context.Context) ([]string, error) {
	out, err := c.ctr(ctx, "images", "list", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := c.ns.command(ctx, append([]string{filepath.Join(c.NodeBinDir, "ctr"), "--address", c.sock, "--namespace", "k8s.io"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return out.String(), nil
}

// NodePIDs returns every process of the node that runs now: the
// components (by name) and, under "cgroup", the shims and containers in the
// node's cgroup root.
func (c *Cluster) NodePIDs() map[string][]int {
	out := map[string][]int{}
	for n, p := range c.PIDs() {
		out[n] = []int{p}
	}
	if c.ns != nil {
		out["namespace-holder"] = []int{c.ns.pid()}
	}
	out["cgroup"] = cgroupPIDs(c.cgroupRoot)
	return out
}

// CgroupRoot is the node's private cgroup root (kubepods and the shims live
// below it).
func (c *Cluster) CgroupRoot() string { return c.cgroupRoot }

// Stop tears the cluster down completely, whatever state a test left: it
// deletes every Pod (PodStopGrace), stops kube-proxy, the kubelet and
// containerd, kills whatever is left in the node's cgroups (shims,
// containers), stops the control plane, ends the namespaces (their mounts
// go with them), removes the cgroups and directories it created, restores
// the host sysctls and releases the node lock.
func (c *Cluster) Stop() error {
	var errs []error
	c.stopNetworkPolicies()
	if c.Client != nil && c.procByName("kubelet") != nil {
		errs = append(errs, c.drainPods())
	}
	if c.provision != nil {
		c.provision()
		<-c.provDone
		c.provision = nil
	}
	// Node components first (newest first), then what they left.
	for _, name := range []string{"kube-proxy", "kubelet", "containerd"} {
		errs = append(errs, c.stopProc(name))
	}
	if c.cgroupRoot != "" {
		killCgroupTree(c.cgroupRoot)
	}
	errs = append(errs, c.Env.stopProcs())
	if c.ns != nil {
		c.ns.close()
	}
	if c.cgroupRoot != "" {
		errs = append(errs, removeCgroupTree(c.cgroupRoot, 10*time.Second))
	}
	errs = append(errs, writeSysctls(c.sysctls))
	for _, d := range c.createdDir {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err == nil {
		_ = os.Remove(statePath())
	}
	if c.Dir != "" {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	c.lock.unlock()
	return errors.Join(errs...)
}

// drainPods deletes every Pod with PodStopGrace and waits (bounded) for
// the kubelet to stop them, so containers end through SIGTERM.
func (c *Cluster) drainPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), PodStopGrace+20*time.Second)
	defer cancel()
	nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil // the apiserver is gone: the cgroup kill does the rest
	}
	grace := int64(PodStopGrace / time.Second)
	for _, n := range nss.Items {
		_ = c.Client.CoreV1().Pods(n.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // what is left is killed through its cgroup
		case <-tick.C:
		}
	}
}

func (c *Cluster) procByName(name string) *proc {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// stopProc stops one component (SIGTERM, SIGKILL after StopGrace).
func (c *Cluster) stopProc(name string) error {
	p := c.procByName(name)
	if p == nil {
		return nil
	}
	return p.stop()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// processGone reports whether pid no longer exists (or is a zombie
// nobody reaps, which holds no resources).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}

// ProcessGone reports whether pid has exited.
func ProcessGone(pid int) bool { return processGone(pid) }
