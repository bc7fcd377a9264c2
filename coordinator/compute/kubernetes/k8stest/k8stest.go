// Package k8stest starts real Kubernetes for tests, built from the Go
// module proxy by scripts/k8s-testenv (no registry, nothing pulled).
//
// Env (Start, Main) is the control plane — etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler — on free 127.0.0.1 ports with
// Go-generated PKI, plus kwok (a fake kubelet), one fake Node and kwok's
// StorageClass: Pods become Ready without running. It is the fast path for
// render/observe/ordering tables.
//
// Cluster (StartCluster, ClusterMain) is the same control plane plus one
// real node — containerd (v2.4.2, from the proxy), Debian's runc and CNI
// bridge, kubelet and kube-proxy (iptables) v1.37.2, CoreDNS — all inside
// a network and a mount namespace the harness creates (no link to the host,
// no default route). Pods run for real from images imported from OCI
// archives (ImportImage; imagePullPolicy Never); claims of the default
// class get local volumes. The test process reaches the API through
// Config/Client (their Dial enters the node's namespace), Pods and Services
// through DialContext and LookupHost, and runs programs inside with
// Command, Kubectl and Exec; Logs and FollowLogs read containers. The
// kubelet's host sysctls are recorded and restored, and Stop leaves no
// process, mount, cgroup or directory behind, even after a failed test.
// One real node runs per machine at a time (a lock in the shared cache).
//
// Both record the PID of every process they start and stop exactly those.
// Start one per test binary from TestMain and share it.
package k8stest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Deadlines of the harness.
const (
	// BuildTimeout bounds build.sh (a cold build takes ~15 min on 2 cores).
	BuildTimeout = 40 * time.Minute
	// StartTimeout bounds each readiness wait after the binaries exist.
	StartTimeout = 90 * time.Second
	// StopGrace is how long a component gets after SIGTERM before SIGKILL.
	StopGrace = 10 * time.Second
	// NodeLeaseSeconds is the fake Node's lease duration (a kubelet's
	// default is 40 s).
	NodeLeaseSeconds = 40
	// FakeServiceSubnet is the kwok cluster's Service range: nothing
	// routes it, and a fleet benchmark needs a Service per Agent (the real
	// node's /24 holds 254).
	FakeServiceSubnet = "10.0.0.0/16"
	// NodeName is the fake Node kwok manages.
	NodeName = "kwok-node-0"
	// StorageClassName is kwok's fake StorageClass (the default class).
	StorageClassName = "kwok-volume"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as an admin (system:masters).
	Config *rest.Config
	// Client is a clientset over Config.
	Client kubernetes.Interface
	// Dir holds PKI, data and one log file per component.
	Dir    string
	BinDir string

	procs       []*proc
	ns          *namespaces  // the real node's namespaces; nil with kwok
	coordinator *rest.Config // CoordinatorConfig (audit.go); nil on the real node
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// PIDs returns the PID of every process the harness started, by name.
func (e *Env) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range e.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

// RepoRoot finds the oce module root (the directory with
// scripts/k8s-testenv/build.sh) from the working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "k8s-testenv", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("k8stest: scripts/k8s-testenv/build.sh not found above the working directory")
		}
		dir = parent
	}
}

// runScript runs scripts/k8s-testenv/<name> (bounded by BuildTimeout) and
// returns the bin directory it prints last and its stderr.
func runScript(ctx context.Context, name string) (bin, stderr string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "k8s-testenv", name))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", errb.String(), fmt.Errorf("k8stest: %s failed: %w\n%s", name, err, tail(errb.String(), 4000))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), errb.String(), nil
}

// requireExecutables fails unless every named program is in bin.
func requireExecutables(bin, script, stderr string, names ...string) error {
	for _, b := range names {
		if st, err := os.Stat(filepath.Join(bin, b)); err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("k8stest: %s missing in %q after %s (stderr: %s)", b, bin, script, tail(stderr, 2000))
		}
	}
	return nil
}

// Binaries runs build.sh (a no-op when the cached build matches) and
// returns the bin directory, failing when any binary is missing.
func Binaries(ctx context.Context) (string, error) {
	bin, stderr, err := runScript(ctx, "build.sh")
	if err != nil {
		return "", err
	}
	if err := requireExecutables(bin, "build.sh", stderr, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
		"kwok", "kubelet", "kube-proxy", "kubectl"); err != nil {
		return "", err
	}
	for _, f := range []string{"stages.yaml", "storage-class.yaml"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "kwok", f)); err != nil {
			return "", fmt.Errorf("k8stest: kwok/%s missing next to %s: %w", f, bin, err)
		}
	}
	return bin, nil
}

// Main starts the control plane, stores it in *env, runs the tests and
// stops it; it returns the exit code. A start failure is fatal and loud.
func Main(m *testing.M, env **Env) int { return runMain(m, "the Kubernetes control plane", Start, env) }

// runMain starts one environment, stores it in *out, runs the tests and
// stops it; a start or stop failure fails the run loudly.
func runMain[T interface{ Stop() error }](m *testing.M, what string, start func(context.Context) (T, error), out *T) int {
	e, err := start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "k8stest: cannot start %s: %v\n", what, err)
		return 1
	}
	*out = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "k8stest: stop %s: %v\n", what, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start builds (if needed) and starts the control plane with kwok's fake
// node, all on free 127.0.0.1 ports of the host.
func Start(ctx context.Context) (_ *Env, err error) {
	bin, err := Binaries(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oce-k8stest-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, BinDir: bin}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	p, err := makePKI(dir)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	audit, err := auditArgs(dir)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := e.startControlPlane(ctx, p, controlPlane{bind: "127.0.0.1", advertise: "127.0.0.1",
		etcdClient: ports[0], etcdPeer: ports[1], api: ports[2], kcm: ports[3], sched: ports[4], services: FakeServiceSubnet,
		apiserverArgs: audit})
	if err != nil {
		return nil, err
	}
	if err := e.issueCoordinator(p); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	kwokDir := filepath.Join(filepath.Dir(bin), "kwok")
	stages, err := wffcStages(filepath.Join(kwokDir, "stages.yaml"), filepath.Join(dir, "kwok-stages.yaml"))
	if err != nil {
		return nil, err
	}
	// Node leases, as a kubelet keeps them: without one, kwok's node status
	// updates (about a minute apart) outlast the controller manager's node
	// grace period, the Node flaps NotReady and every Pod on it is marked
	// not ready — for good, since kwok's stages only make Pending Pods ready.
	if err := e.start("kwok", "--kubeconfig="+kubeconfig, "--manage-all-nodes=true",
		"--config="+stages, "--node-port=0", "--server-address=",
		fmt.Sprintf("--node-lease-duration-seconds=%d", NodeLeaseSeconds),
		"--cidr=10.244.0.1/16", "--node-ip=10.1.0.1"); err != nil {
		return nil, err
	}
	if err := e.bootstrap(ctx, filepath.Join(kwokDir, "storage-class.yaml")); err != nil {
		return nil, err
	}
	return e, nil
}

// controlPlane is where the control plane's components listen.
type controlPlane struct {
	bind                                  string // apiserver bind address
	advertise                             string // apiserver advertise address (the kubernetes Service endpoint)
	etcdClient, etcdPeer, api, kcm, sched int
	// services is the Service IP range (default ServiceSubnet, which
	// the real node's kube-proxy routes).
	services string
	// apiserverArgs are added to kube-apiserver's (the real node's
	// authorizer, admission and kubelet client).
	apiserverArgs []string
	// dial, when set, reaches the apiserver (inside the node's namespace).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// The test cluster's own controllers (controller manager, scheduler) are
// not under test: their default client limits (20 and 50 requests/s) would
// make them, not the coordinator, the bound of a fleet benchmark (10,000
// Deployments → ReplicaSets → Pods → bindings).
const (
	controllerQPS   = "--kube-api-qps=500"
	controllerBurst = "--kube-api-burst=1000"
)

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, sets e.Config and e.Client, and returns the admin
// kubeconfig path.
func (e *Env) startControlPlane(ctx context.Context, p *pki, cp controlPlane) (string, error) {
	dir := e.Dir
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cp.etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", cp.etcdPeer)
	if err := e.start("etcd", "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return "", err
	}
	args := []string{"--etcd-servers=" + etcdURL,
		"--bind-address=" + cp.bind, fmt.Sprintf("--secure-port=%d", cp.api), "--advertise-address=" + cp.advertise,
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + p.ServerCert, "--tls-private-key-file=" + p.ServerKey, "--client-ca-file=" + p.CACert,
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey, "--service-cluster-ip-range=" + cmp.Or(cp.services, ServiceSubnet),
		"--enable-priority-and-fairness=false", "--allow-privileged=false", "--profiling=false", "--v=0"}
	if cp.advertise == "127.0.0.1" {
		// The apiserver refuses a loopback advertise address with an
		// endpoint reconciler.
		args = append(args, "--endpoint-reconciler-type=none", "--authorization-mode=RBAC")
	}
	if err := e.start("kube-apiserver", append(args, cp.apiserverArgs...)...); err != nil {
		return "", err
	}
	host := fmt.Sprintf("https://%s", net.JoinHostPort(cp.advertise, strconv.Itoa(cp.api)))
	e.Config = &rest.Config{Host: host, QPS: 500, Burst: 1000, Dial: cp.dial,
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.CACert, CertFile: p.AdminCert, KeyFile: p.AdminKey}}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return "", err
	}
	e.Client = cs
	if err := e.waitFor(ctx, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	}); err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(kubeconfig, host, p.CACert, "admin", p.AdminCert, p.AdminKey); err != nil {
		return "", err
	}
	if err := e.start("kube-controller-manager", "--kubeconfig="+kubeconfig, "--leader-elect=false",
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.kcm),
		"--service-account-private-key-file="+p.SAKey, "--root-ca-file="+p.CACert,
		"--use-service-account-credentials=false", "--cert-dir="+filepath.Join(dir, "kcm-certs"),
		controllerQPS, controllerBurst, "--v=0"); err != nil {
		return "", err
	}
	if err := e.start("kube-scheduler", "--kubeconfig="+kubeconfig, "--leader-elect=false",
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.sched),
		"--cert-dir="+filepath.Join(dir, "sched-certs"), controllerQPS, controllerBurst, "--v=0"); err != nil {
		return "", err
	}
	return kubeconfig, nil
}

// bootstrap creates kwok's StorageClass and the fake Node, then waits for
// the Node to be Ready and the default ServiceAccount to exist.
func (e *Env) bootstrap(ctx context.Context, scPath string) error {
	raw, err := os.ReadFile(scPath)
	if err != nil {
		return err
	}
	var sc storagev1.StorageClass
	if err := yaml.Unmarshal(raw, &sc); err != nil {
		return fmt.Errorf("storage class: %w", err)
	}
	// WaitForFirstConsumer, as production classes commonly are: a claim stays
	// Pending until its first Pod is scheduled, so a driver that waited for
	// Bound before creating the Pod would deadlock (kwok provisions it then).
	sc.VolumeBindingMode = ptrTo(storagev1.VolumeBindingWaitForFirstConsumer)
	if _, err := e.Client.StorageV1().StorageClasses().Create(ctx, &sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storage class: %w", err)
	}
	// Large enough for the scale benchmark's 10,000 Agents and then some
	// (kwok runs nothing: the figures are the scheduler's bookkeeping
	// only). An embedded Gateway requests 250m CPU and 1792Mi: 2,000 CPUs
	// held only 8,000 of them, and the rest stayed Pending.
	caps := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4000"), corev1.ResourceMemory: resource.MustParse("32Ti"),
		corev1.ResourcePods: resource.MustParse("20000"), corev1.ResourceEphemeralStorage: resource.MustParse("1Pi")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok"}},
		Status: corev1.NodeStatus{Capacity: caps, Allocatable: caps},
	}
	if _, err := e.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("node: %w", err)
	}
	return e.waitFor(ctx, "fake node Ready and default ServiceAccount", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return false, nil
		}
		_, err = e.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// start launches one of the built components (BinDir/name).
func (e *Env) start(name string, args ...string) error {
	return e.startBin(name, filepath.Join(e.BinDir, name), args...)
}

// startBin launches a program with its output in Dir/<name>.log, inside
// the node's namespaces when there is a node.
func (e *Env) startBin(name, path string, args ...string) error {
	logPath := filepath.Join(e.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	argv := append([]string{path}, args...)
	if e.ns != nil {
		argv = e.ns.wrap(e.Dir, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = e.Dir
	// kwok reads ~/.kwok: keep it and every component's home private.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(e.Dir, "home-"+name))
	if e.ns != nil {
		cmd.Env = append(nodeEnv(), "HOME="+filepath.Join(e.Dir, "home-"+name))
	}
	// The components die with the test binary even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	e.procs = append(e.procs, p)
	return nil
}

// waitFor polls cond until it holds, a component exits, or StartTimeout.
func (e *Env) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	return e.waitForTimeout(ctx, StartTimeout, what, cond)
}

// waitForTimeout is waitFor with its own limit.
func (e *Env) waitForTimeout(ctx context.Context, limit time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range e.procs {
			select {
			case <-p.done:
				return fmt.Errorf("k8stest: %s exited (%v) while waiting for %s:\n%s", p.name, p.err, what, tailFile(p.log))
			default:
			}
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := cond(rctx)
		rcancel()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			var logs strings.Builder
			for _, p := range e.procs {
				fmt.Fprintf(&logs, "--- %s\n%s\n", p.name, tailFile(p.log))
			}
			return fmt.Errorf("k8stest: timed out waiting for %s\n%s", what, logs.String())
		case <-tick.C:
		}
	}
}

// Stop terminates exactly the processes Start launched, newest first
// (SIGTERM, then SIGKILL after StopGrace), and removes Dir.
func (e *Env) Stop() error {
	errs := []error{e.stopProcs()}
	if e.Dir != "" {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopProcs stops every process still running, newest first.
func (e *Env) stopProcs() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		errs = append(errs, e.procs[i].stop())
	}
	e.procs = nil
	return errors.Join(errs...)
}

// stop sends SIGTERM and waits; after StopGrace it kills the process and
// reports that it needed SIGKILL.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(StopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s (pid %d) needed SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeKubeconfig(path, host, caCert, user, cert, key string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: k8stest
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: k8stest
  context: {cluster: k8stest, user: %s}
current-context: k8stest
`, host, caCert, user, cert, key, user)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), 3000)
}

func ptrTo[T any](v T) *T { return &v }

// selectedNodeCEL restricts kwok's claim provisioning to claims the
// scheduler has chosen a node for, as a real WaitForFirstConsumer
// provisioner behaves (kwok's stage would provision at once otherwise).
const selectedNodeCEL = `    - cel:
        expression: >-
          has(self.metadata.annotations) && 'volume.kubernetes.io/selected-node' in self.metadata.annotations
`

// wffcStages writes a copy of kwok's stages with the pvc-provision stage
// gated on the scheduler's selected-node annotation.
func wffcStages(src, dst string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.Index(s, "name: pvc-provision")
	if i < 0 {
		return "", fmt.Errorf("k8stest: no pvc-provision stage in %s", src)
	}
	const me = "matchExpressions:\n"
	j := strings.Index(s[i:], me)
	if j < 0 {
		return "", fmt.Errorf("k8stest: pvc-provision stage without matchExpressions in %s", src)
	}
	at := i + j + len(me)
	s = s[:at] + selectedNodeCEL + s[at:]
	return dst, os.WriteFile(dst, []byte(s), 0o600)
}
