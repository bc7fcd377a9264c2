//go:build tools

// Package tools pins the Kubernetes control-plane programs that the driver's
// tests run (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok, and the real node's kubelet, kube-proxy and kubectl). It is its own
// module so the main module's `go ./...` never compiles it; build.sh builds
// them all from here in one `go build`.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
