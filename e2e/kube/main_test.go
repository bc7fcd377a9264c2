// Package kube runs oce end to end on a real node (k8stest.Cluster: the test
// control plane plus a real kubelet, containerd, runc and kube-proxy in
// private namespaces): the images `make images` built are imported into the
// node's containerd, the coordinator is installed from the deploy bundle
// (images/deploy: a 3-member StatefulSet with the Kubernetes driver and the
// bundle's RBAC; the token and TLS Secrets generated here), the offline fake
// provider runs as an in-cluster Service, and occ reaches the coordinator
// through its API Service over the node's network namespace. Real OpenClaw
// and Codex run in the Pods the driver renders. One cluster per test binary;
// the tests share it and run one after another (at most two Gateway Pods
// at a time: Node's start is CPU-bound).
package kube

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"oce.dev/oce/shared/netns"

	"oce.dev/oce/coordinator/compute/kubernetes/k8stest"
	"oce.dev/oce/images/imagestest"
)

var (
	cluster *k8stest.Cluster
	oce     *install
)

// TestMain runs the suite in a PID namespace of its own (host network): no
// kubelet, containerd, shim, container or coordinator outlives the binary.
func TestMain(m *testing.M) {
	netns.Main(netns.RunnerFunc(func() int { return run(m) }), netns.Options{HostNetwork: true})
}

// run builds the images (before anything else: the build may install
// Debian packages), starts the cluster, installs oce, runs the tests and
// tears everything down.
func run(m *testing.M) int {
	ctx := context.Background()
	start := time.Now()
	imgs, err := imagestest.Build(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube: %v\n", err)
		return 1
	}
	built := time.Since(start)
	c, err := k8stest.StartCluster(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube: cannot start the cluster: %v\n", err)
		return 1
	}
	cluster = c
	// An interrupted run (Ctrl-C, a CI runner's SIGTERM) still tears the
	// node down: its processes, mounts, cgroups and the host sysctls.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "kube: %v: tearing the cluster down\n", sig)
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kube: stop the cluster: %v\n", err)
		}
		os.Exit(1)
	}()
	code := func() int {
		ictx, cancel := context.WithTimeout(ctx, InstallTimeout)
		defer cancel()
		if _, err := installOCE(ictx, c, imgs); err != nil {
			fmt.Fprintf(os.Stderr, "kube: cannot install oce: %v\n%s", err, dumpState(ctx))
			return 1
		}
		oce.timings = append([]k8stest.Timing{{Phase: "images (make images)", Duration: built}}, c.Timings...)
		oce.timings = append(oce.timings, oce.steps...)
		for _, t := range oce.timings {
			fmt.Fprintf(os.Stderr, "kube: %-40s %6.1fs\n", t.Phase, t.Duration.Seconds())
		}
		code := m.Run()
		figures.mu.Lock()
		for _, l := range figures.lines {
			fmt.Fprintf(os.Stderr, "kube: figure %s\n", l)
		}
		figures.mu.Unlock()
		return code
	}()
	if code != 0 {
		fmt.Fprint(os.Stderr, dumpState(ctx))
	}
	signal.Stop(sigs)
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "kube: stop the cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
