package k8stest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkPolicy enforcement on the real node: kube-network-policies
// (sigs.k8s.io, built by node.sh from the Go module proxy, its own cmd
// unchanged) runs as a hostNetwork Pod in kube-system, as its upstream
// DaemonSet does. It judges the first packet of every connection that
// involves a Pod address in user space (NFQUEUE) against the
// NetworkPolicies: an accepted connection proceeds, a denied one is dropped
// (a client sees its connect time out, not a reset).
//
// This kernel lacks nftables' queue expression (CONFIG_NFT_QUEUE), so the
// enforcer's own nftables table is refused (it logs the failed sync); the
// harness installs the equivalent hook itself with iptables' NFQUEUE target
// (xtables, which the kernel has): in mangle POSTROUTING — after
// kube-proxy's DNAT, so a Service connection is judged by the Pod it
// reaches, before its masquerade, so by the Pod it comes from — every new
// connection from or to the Pod network, except packets of established
// connections and those root sends from the node itself (kubelet's probes,
// the test process: the enforcer's own exemption). Without --queue-bypass
// the hook fails closed: while the enforcer is not listening, no new Pod
// connection is accepted.
const (
	// NetpolImage is the enforcer's FROM-scratch image.
	NetpolImage = "oce.local/k8stest/kube-network-policies:v0.8.0"
	// NetpolNamespace and NetpolPod name the enforcer's Pod.
	NetpolNamespace = "kube-system"
	NetpolPod       = "kube-network-policies"
	// netpolQueue is the NFQUEUE number the hook and the enforcer share.
	netpolQueue = 100
	// netpolChain is the harness's iptables chain (mangle table).
	netpolChain = "OCE-NETPOL"
	// NetpolMetricsAddr is where the enforcer serves its Prometheus metrics
	// (inside the node's network namespace: reach it with DialContext).
	NetpolMetricsAddr = "127.0.0.1:9080"
)

// netpolHook is the iptables hook sending new Pod connections to the
// enforcer's queue.
func netpolHook() [][]string {
	ipt := func(args ...string) []string { return append([]string{"iptables", "-w", "-t", "mangle"}, args...) }
	q := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(netpolQueue)}
	return [][]string{
		ipt("-N", netpolChain),
		ipt("-A", netpolChain, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"),
		ipt("-A", netpolChain, "-m", "owner", "--uid-owner", "0", "-j", "RETURN"),
		ipt(append([]string{"-A", netpolChain, "-s", PodSubnet}, q...)...),
		ipt(append([]string{"-A", netpolChain, "-d", PodSubnet}, q...)...),
		ipt("-A", "POSTROUTING", "-j", netpolChain),
	}
}

// startNetworkPolicies installs the hook, imports the enforcer's image,
// grants its ServiceAccount what it watches (Pods, Namespaces,
// NetworkPolicies; the Events it records) and runs its Pod, then waits
// until it listens on the queue (the kernel lists the queue's peer).
func (c *Cluster) startNetworkPolicies(ctx context.Context) error {
	for _, argv := range netpolHook() {
		if out, err := c.ns.run(ctx, argv...); err != nil {
			return fmt.Errorf("k8stest: %s: %w: %s", strings.Join(argv, " "), err, out)
		}
	}
	bin, err := os.ReadFile(filepath.Join(c.NodeBinDir, "kube-network-policies"))
	if err != nil {
		return fmt.Errorf("k8stest: the enforcer (node.sh builds it): %w", err)
	}
	archive := filepath.Join(c.Dir, "images", "kube-network-policies.oci.tar")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	if err := WriteOCIArchive(archive, Image{Name: NetpolImage, Files: map[string]ImageFile{"/kube-network-policies": {Mode: 0o755, Data: bin}},
		Entrypoint: []string{"/kube-network-policies"}}); err != nil {
		return err
	}
	if _, err := c.ImportImage(ctx, archive); err != nil {
		return err
	}
	if err := c.netpolRBAC(ctx); err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Pods(NetpolNamespace).Create(ctx, netpolPod(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("k8stest: the enforcer's Pod: %w", err)
	}
	return c.waitFor(ctx, "the NetworkPolicy enforcer on its queue", func(ctx context.Context) (bool, error) {
		return c.netpolListening(ctx), nil
	})
}

// netpolListening reports whether a program listens on the enforcer's
// queue (/proc/net/netfilter/nfnetlink_queue of the node's namespace).
func (c *Cluster) netpolListening(ctx context.Context) bool {
	out, err := c.ns.run(ctx, "cat", "/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == strconv.Itoa(netpolQueue) {
			return true
		}
	}
	return false
}

func (c *Cluster) netpolRBAC(ctx context.Context) error {
	rb := c.Client.RbacV1()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: NetpolPod, Namespace: NetpolNamespace}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: NetpolPod}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: NetpolPod},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NetpolPod},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: NetpolPod, Namespace: NetpolNamespace}}}
	for _, err := range []error{
		ignoreExists(c.Client.CoreV1().ServiceAccounts(NetpolNamespace).Create(ctx, sa, metav1.CreateOptions{})),
		ignoreExists(rb.ClusterRoles().Create(ctx, role, metav1.CreateOptions{})),
		ignoreExists(rb.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})),
	} {
		if err != nil {
			return fmt.Errorf("k8stest: the enforcer's RBAC: %w", err)
		}
	}
	return nil
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// netpolPod is the enforcer: on the node's network (its rules live
// there), root with NET_ADMIN only (the queue), placed on the node directly.
func netpolPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: NetpolPod, Namespace: NetpolNamespace, Labels: map[string]string{"app": NetpolPod}},
		Spec: corev1.PodSpec{
			NodeName: RealNodeName, HostNetwork: true, ServiceAccountName: NetpolPod, PriorityClassName: "system-node-critical",
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptrTo(int64(2)),
			Containers: []corev1.Container{{
				Name: NetpolPod, Image: NetpolImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"--hostname-override=" + RealNodeName, "--nfqueue-id=" + strconv.Itoa(netpolQueue),
					"--metrics-bind-address=" + NetpolMetricsAddr,
					// containerd runs without NRI here; kernel 6.18 has the
					// conntrack fix the DNS workaround is for.
					"--disable-nri", "--netfilter-bug-1766-fix=false"},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptrTo(int64(0)), RunAsNonRoot: ptrTo(false),
					AllowPrivilegeEscalation: ptrTo(false), ReadOnlyRootFilesystem: ptrTo(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}}},
			}},
		},
	}
}

// stopNetworkPolicies removes the hook before the Pods are drained, so the
// enforcer's own end does not blackhole the others' last packets.
func (c *Cluster) stopNetworkPolicies() {
	if c.ns == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.ns.run(ctx, "iptables", "-w", "-t", "mangle", "-D", "POSTROUTING", "-j", netpolChain)
}
