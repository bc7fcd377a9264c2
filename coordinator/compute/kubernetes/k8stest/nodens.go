package k8stest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The private network of a Cluster: a node address on a veth pair whose
// both ends live in the cluster's own network namespace (no link to the
// host, no default route), Pods on a CNI bridge, Services on a virtual
// range kube-proxy translates. None of these addresses exist outside the
// namespace.
const (
	NodeIP         = "10.231.0.2"
	nodeCIDR       = NodeIP + "/24"
	PodSubnet      = "10.232.0.0/24"
	ServiceSubnet  = "10.0.0.0/24"
	apiServicePort = 6443
	nodeLink       = "oce-node"
	nodePeer       = "oce-peer"
)

// namespaces holds a network and a mount namespace open through one
// sleeping process and runs commands inside them with nsenter (which execs
// in place without --pid, so a command's PID is the program's own).
type namespaces struct {
	holder *exec.Cmd
	done   chan struct{}
	netFD  int // /proc/<holder>/ns/net, for dialing from this process
}

// newNamespaces starts the holder in fresh network and mount namespaces,
// makes every mount in it private (nothing it mounts reaches the host),
// brings up lo and the node's veth pair and the Service route.
func newNamespaces(ctx context.Context) (_ *namespaces, err error) {
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("k8stest: start the namespace holder: %w", err)
	}
	ns := &namespaces{holder: cmd, done: make(chan struct{}), netFD: -1}
	go func() { _ = cmd.Wait(); close(ns.done) }()
	defer func() {
		if err != nil {
			ns.close()
		}
	}()
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("k8stest: open the node network namespace: %w", err)
	}
	ns.netFD = fd
	for _, c := range [][]string{
		{"mount", "--make-rprivate", "/"},
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", nodeLink, "type", "veth", "peer", "name", nodePeer},
		{"ip", "addr", "add", nodeCIDR, "dev", nodeLink},
		{"ip", "link", "set", nodePeer, "up"},
		{"ip", "link", "set", nodeLink, "up"},
		// Locally generated traffic to a Service address needs a route
		// before kube-proxy's DNAT rewrites it to a Pod on the bridge.
		{"ip", "route", "add", ServiceSubnet, "dev", nodeLink},
		{"sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
	} {
		if out, err := ns.run(ctx, c...); err != nil {
			return nil, fmt.Errorf("k8stest: %s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return ns, nil
}

// pid is the holder's PID.
func (ns *namespaces) pid() int { return ns.holder.Process.Pid }

// wrap prefixes argv so it runs inside the namespaces, in dir.
func (ns *namespaces) wrap(dir string, argv ...string) []string {
	p := ns.pid()
	out := []string{"nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", p), fmt.Sprintf("--mount=/proc/%d/ns/mnt", p)}
	if dir != "" {
		out = append(out, "--wd="+dir)
	}
	return append(append(out, "--"), argv...)
}

// command returns an unstarted command running argv inside the namespaces.
func (ns *namespaces) command(ctx context.Context, argv ...string) *exec.Cmd {
	return ns.commandIn(ctx, "", argv...)
}

// commandIn is command with the working directory dir ("" is the mount
// namespace's root, where entering it leaves a process).
func (ns *namespaces) commandIn(ctx context.Context, dir string, argv ...string) *exec.Cmd {
	w := ns.wrap(dir, argv...)
	cmd := exec.CommandContext(ctx, w[0], w[1:]...)
	cmd.Env = nodeEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// nodeEnv is the environment of the node's programs: this process's, with
// the sbin directories on PATH (ip, mount helpers, and the iptables and
// conntrack kube-proxy runs live there; a test runner's PATH may lack them).
func nodeEnv() []string {
	path := os.Getenv("PATH")
	for _, d := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if !strings.Contains(":"+path+":", ":"+d+":") {
			path += ":" + d
		}
	}
	return append(os.Environ(), "PATH="+strings.TrimPrefix(path, ":"))
}

// run runs argv inside the namespaces and returns its combined output.
func (ns *namespaces) run(ctx context.Context, argv ...string) (string, error) {
	cmd := ns.command(ctx, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// dial opens a connection from inside the node's network namespace: the
// socket is created on an OS thread switched into it (a socket keeps its
// namespace for life), and the thread is switched back before it is
// released. A thread that cannot be switched back stays locked and exits
// with its goroutine. (Threads must not simply exit: a child started from
// one gets its parent-death signal when that thread ends.)
func (ns *namespaces) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("k8stest: open this thread's network namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(ns.netFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("k8stest: enter the node network namespace: %w", err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// close kills the holder (the namespaces end when their last process has
// exited) and closes the namespace handle.
func (ns *namespaces) close() {
	if ns.netFD >= 0 {
		_ = unix.Close(ns.netFD)
		ns.netFD = -1
	}
	if ns.holder != nil && ns.holder.Process != nil {
		_ = ns.holder.Process.Kill()
		<-ns.done
	}
}

// ensureDir creates dir when it is missing and reports whether it did.
func ensureDir(dir string) (bool, error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	return true, nil
}
