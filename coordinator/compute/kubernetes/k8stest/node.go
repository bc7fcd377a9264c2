package k8stest

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startContainerd writes containerd's configuration (every path private to
// the run; restrict_oom_score_adj, without which no sandbox starts here;
// Debian's runc with a private state root; the shims in the node's cgroup;
// the locally built pause image pinned; CNI bridge from Debian's plugins)
// and starts it, waiting for its socket.
func (c *Cluster) startContainerd(ctx context.Context) error {
	base := filepath.Join(c.Dir, "containerd")
	cniConf := filepath.Join(c.Dir, "cni", "net.d")
	for _, d := range []string{base, cniConf, filepath.Join(c.Dir, "runc")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	c.sock = filepath.Join(base, "containerd.sock")
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %q

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    disable_apparmor = true
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %q
          Root = %q
          SystemdCgroup = false
          ShimCgroup = %q
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%q]
      conf_dir = %q
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.nri.v1.nri']
    disable = true
`, filepath.Join(base, "root"), filepath.Join(base, "state"), c.sock, c.sock+".ttrpc", PauseImage,
		runcBinary, filepath.Join(c.Dir, "runc"), c.cgroupRoot+"/shims", cniBinDir, cniConf)
	cfgPath := filepath.Join(base, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	// One bridge for every Pod (host-local addresses from PodSubnet, the
	// bridge as their gateway), plus loopback.
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "oce-k8stest",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}},
    {"type": "loopback"}
  ]
}
`, PodSubnet, filepath.Join(c.Dir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(cniConf, "10-oce.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	if err := c.startBin("containerd", filepath.Join(c.NodeBinDir, "containerd"), "--config", cfgPath, "--log-level", "warn"); err != nil {
		return err
	}
	return c.waitFor(ctx, "containerd socket", func(ctx context.Context) (bool, error) {
		_, err := c.ctr(ctx, "version")
		return err == nil, nil
	})
}

// startKubelet issues the node's certificates (client: system:node:<name>;
// serving: the node address), writes its KubeletConfiguration (cgroupfs
// under the private cgroup root, cgroup v1 allowed, no swap check, every
// directory private) and starts it, waiting for the Node to be Ready.
func (c *Cluster) startKubelet(ctx context.Context, p *pki) error {
	cert, key, err := p.issue("kubelet-client", pkix.Name{CommonName: "system:node:" + RealNodeName,
		Organization: []string{"system:nodes"}}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	srvCert, srvKey, err := p.issue("kubelet-serving", pkix.Name{CommonName: RealNodeName}, x509.ExtKeyUsageServerAuth,
		[]string{RealNodeName}, []net.IP{net.ParseIP(NodeIP)})
	if err != nil {
		return err
	}
	kc := filepath.Join(c.Dir, "kubelet.kubeconfig")
	if err := writeKubeconfig(kc, c.Config.Host, p.CACert, "system:node:"+RealNodeName, cert, key); err != nil {
		return err
	}
	resolv := filepath.Join(c.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %q
tlsPrivateKeyFile: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
containerRuntimeEndpoint: %q
podLogsDir: %q
volumePluginDir: %q
resolvConf: %q
clusterDomain: %s
clusterDNS: [%q]
registerNode: true
rotateCertificates: false
serverTLSBootstrap: false
syncFrequency: 10s
maxPods: 110
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%"}
`, NodeIP, srvCert, srvKey, p.CACert, c.cgroupRoot, "unix://"+c.sock, filepath.Join(c.Dir, "pod-logs"),
		filepath.Join(c.Dir, "kubelet-plugins"), resolv, ClusterDomain, NodeIP)
	cfgPath := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := c.start("kubelet", "--config="+cfgPath, "--kubeconfig="+kc, "--hostname-override="+RealNodeName,
		"--node-ip="+NodeIP, "--root-dir="+filepath.Join(c.Dir, "kubelet"), "--cert-dir="+filepath.Join(c.Dir, "kubelet-pki"),
		"--v=1"); err != nil {
		return err
	}
	return c.waitForTimeout(ctx, NodeStartTimeout, "real node Ready", func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// startKubeProxy starts kube-proxy in iptables mode (rules live in the
// node's namespace) with its own identity (system:kube-proxy, bound to
// system:node-proxier by default). It leaves the host-global conntrack
// sysctls alone and masquerades all Service traffic, so a Pod reaching a
// Service backed by a Pod on the same bridge gets its replies back.
func (c *Cluster) startKubeProxy(ctx context.Context, p *pki) error {
	cert, key, err := p.issue("kube-proxy", pkix.Name{CommonName: "system:kube-proxy"}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	kc := filepath.Join(c.Dir, "kube-proxy.kubeconfig")
	if err := writeKubeconfig(kc, c.Config.Host, p.CACert, "system:kube-proxy", cert, key); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
hostnameOverride: %q
bindAddress: %q
clusterCIDR: %q
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {masqueradeAll: true, syncPeriod: 30s, minSyncPeriod: 0s}
`, kc, RealNodeName, NodeIP, PodSubnet)
	cfgPath := filepath.Join(c.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := c.start("kube-proxy", "--config="+cfgPath, "--v=0"); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-proxy healthz", func(ctx context.Context) (bool, error) {
		conn, err := c.ns.dial(ctx, "tcp", "127.0.0.1:10256")
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
}

// startCoreDNS serves the cluster domain from the API server on the node
// address (port 53), which every Pod reaches through the bridge; there is
// no upstream: names outside the cluster do not resolve.
func (c *Cluster) startCoreDNS(ctx context.Context) error {
	corefile := fmt.Sprintf(`.:53 {
    bind %s
    errors
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s k8stest
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
`, NodeIP, ClusterDomain, c.kubeconfig)
	path := filepath.Join(c.Dir, "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o600); err != nil {
		return err
	}
	if err := c.startBin("coredns", filepath.Join(c.NodeBinDir, "coredns"), "-conf", path); err != nil {
		return err
	}
	return c.waitFor(ctx, "CoreDNS answering", func(ctx context.Context) (bool, error) {
		ips, err := c.LookupHost(ctx, "kubernetes.default.svc")
		return err == nil && len(ips) > 0, nil
	})
}
