#!/usr/bin/env bash
# Builds the pinned Kubernetes test control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) in ONE `go build` and caches it
# in ${XDG_CACHE_HOME:-$HOME/.cache}/oce/k8s-testenv/<stamp>/, keyed by this
# module's go.mod/go.sum, the Kubernetes version and the Go version. When the
# stamp matches it does nothing. Prints the bin directory on stdout (last line);
# progress goes to stderr. A cold build takes ~15 min on 2 cores (see
# shared/design/KUBERNETES-TESTENV.md).
set -euo pipefail

K8S_VERSION=v1.37.2
K8S_MAJOR=1
K8S_MINOR=37

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
gover="$("$GO" env GOVERSION)"
stamp="$( { echo "$K8S_VERSION"; echo "$gover"; cat "$here/go.mod" "$here/go.sum" "$here/tools.go"; } | sha256sum | cut -c1-16)"
root="${XDG_CACHE_HOME:-$HOME/.cache}/oce/k8s-testenv"
dest="$root/$stamp"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubelet kube-proxy kubectl)

complete() {
	[[ -f "$dest/STAMP" ]] || return 1
	for b in "${bins[@]}"; do [[ -x "$dest/bin/$b" ]] || return 1; done
}

# kwok's "fast" stages (node initialize + lease heartbeat, pod ready/complete/
# delete, PV/PVC provisioning) and its fake StorageClass ship in its module
# source; they are copied next to the binaries (cheap, so redone when absent).
stages() {
	[[ -f "$dest/kwok/stages.yaml" && -f "$dest/kwok/storage-class.yaml" ]] && return 0
	local kwokdir out
	kwokdir="$(cd "$here" && GOFLAGS=-mod=mod "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
	out="$(mktemp -d "$root/.kwok.XXXXXX")"
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml \
		volume/fast/pvc-provision.yaml volume/fast/pvc-delete.yaml volume/fast/pv-bind.yaml volume/fast/pv-delete.yaml; do
		[[ -f "$kwokdir/kustomize/stage/$f" ]] || { echo "k8s-testenv: missing kwok stage $f" >&2; rm -rf "$out"; return 1; }
		{ echo "---"; cat "$kwokdir/kustomize/stage/$f"; echo; } >>"$out/stages.yaml"
	done
	cp "$kwokdir/kustomize/stage/volume/fast/storage-class.yaml" "$out/storage-class.yaml"
	chmod -R u+w "$out"
	rm -rf "$dest/kwok"
	mv "$out" "$dest/kwok"
}

if complete; then stages; echo "$dest/bin"; exit 0; fi

mkdir -p "$root"
# One build at a time, even when several test binaries ask at once.
exec 9>"$root/.lock"
flock 9
if complete; then stages; echo "$dest/bin"; exit 0; fi
tmp="$(mktemp -d "$root/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$K8S_MAJOR -X $p.gitMinor=$K8S_MINOR -X $p.gitTreeState=clean"
done

echo "k8s-testenv: building $K8S_VERSION control plane with $gover into $dest (cold: ~15 min)" >&2
start=$SECONDS
(
	cd "$here"
	GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags "$ld" -o "$tmp/bin/" \
		go.etcd.io/etcd/server/v3 \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kube-proxy \
		k8s.io/kubernetes/cmd/kubectl \
		sigs.k8s.io/kwok/cmd/kwok
)
# The etcd main package is the module root, so go names the binary "server".
if [[ -x "$tmp/bin/server" ]]; then mv "$tmp/bin/server" "$tmp/bin/etcd"; fi
if [[ -x "$tmp/bin/v3" ]]; then mv "$tmp/bin/v3" "$tmp/bin/etcd"; fi

for b in "${bins[@]}"; do [[ -x "$tmp/bin/$b" ]] || { echo "k8s-testenv: $b was not built" >&2; exit 1; }; done
printf '%s\n%s\n' "$K8S_VERSION" "$gover" >"$tmp/STAMP"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "k8s-testenv: built in $((SECONDS - start)) s" >&2
stages
echo "$dest/bin"
