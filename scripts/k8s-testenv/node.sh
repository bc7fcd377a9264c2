#!/usr/bin/env bash
# Prepares what the test cluster's real node needs beyond the control plane
# (shared/design/KUBELET-TESTENV.md):
#   - Debian packages: runc, containernetworking-plugins (bridge, host-local,
#     loopback), iptables and conntrack for kube-proxy — installed with apt
#     when missing (CI is a fresh Debian, as root);
#   - containerd, ctr and containerd-shim-runc-v2 v2.4.2 (CGO off; the shim
#     with tag no_grpc), CoreDNS v1.15.0 (Services by name) and the
#     NetworkPolicy enforcer kube-network-policies v0.8.0 (sigs.k8s.io; its
#     own cmd, unchanged) from the Go module proxy, cached in
#     ${XDG_CACHE_HOME:-$HOME/.cache}/oce/k8s-node-bin/<stamp>/, keyed by
#     their versions and the Go version. When the stamp matches it does
#     nothing.
# Prints the bin directory on stdout (last line); progress goes to stderr. A
# cold build takes ~1 min (containerd) + ~1.5 min (CoreDNS) + ~3.5 min CPU
# (kube-network-policies) on 2 cores.
set -euo pipefail

CONTAINERD_VERSION=v2.4.2
CONTAINERD_MODULE=github.com/containerd/containerd/v2
COREDNS_VERSION=v1.15.0
NETPOL_VERSION=v0.8.0
NETPOL_MODULE=sigs.k8s.io/kube-network-policies

GO="${GO:-go}"
# runc, iptables, conntrack and ip live in sbin: look there too.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
gover="$("$GO" env GOVERSION)"

# Debian packages: one apt run for everything missing (under the lock, so
# two test binaries never run apt at once).
apt_missing() {
	need=()
	command -v runc >/dev/null 2>&1 || need+=(runc)
	[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || need+=(containernetworking-plugins)
	command -v iptables >/dev/null 2>&1 || need+=(iptables)
	command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
	command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
	command -v ip >/dev/null 2>&1 || need+=(iproute2)
	((${#need[@]} > 0))
}
apt_install() {
	apt_missing || return 0
	if [[ $(id -u) -ne 0 ]]; then
		echo "k8s-testenv/node: missing Debian packages ${need[*]} and not root to install them" >&2
		return 1
	fi
	echo "k8s-testenv/node: apt-get install ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -qq --no-install-recommends)
	# The package lists may be absent or stale on a fresh machine: update once, then install.
	if ! "${apt[@]}" install "${need[@]}" >&2; then
		apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
		"${apt[@]}" install "${need[@]}" >&2
	fi
}

stamp="$(printf '%s\n%s\n%s\n%s\n' "$CONTAINERD_VERSION" "$COREDNS_VERSION" "$NETPOL_VERSION" "$gover" | sha256sum | cut -c1-16)"
root="${XDG_CACHE_HOME:-$HOME/.cache}/oce/k8s-node-bin"
dest="$root/$stamp"
bins=(containerd ctr containerd-shim-runc-v2 coredns kube-network-policies)

complete() {
	[[ -f "$dest/STAMP" ]] || return 1
	for b in "${bins[@]}"; do [[ -x "$dest/bin/$b" ]] || return 1; done
}

if ! apt_missing && complete; then echo "$dest/bin"; exit 0; fi
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
apt_install
if complete; then echo "$dest/bin"; exit 0; fi
tmp="$(mktemp -d "$root/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

ld="-s -w -X $CONTAINERD_MODULE/version.Version=$CONTAINERD_VERSION -X $CONTAINERD_MODULE/version.Revision=oce"
echo "k8s-testenv/node: building containerd $CONTAINERD_VERSION, CoreDNS $COREDNS_VERSION and kube-network-policies $NETPOL_VERSION with $gover into $dest (cold: ~4 min)" >&2
start=$SECONDS
export CGO_ENABLED=0 GOBIN="$tmp/bin" GOFLAGS=-mod=mod
"$GO" install -trimpath -ldflags "$ld" \
	"$CONTAINERD_MODULE/cmd/containerd@$CONTAINERD_VERSION" \
	"$CONTAINERD_MODULE/cmd/ctr@$CONTAINERD_VERSION"
# The shim needs no gRPC (ttrpc only); the tag keeps it small.
"$GO" install -trimpath -tags no_grpc -ldflags "$ld" "$CONTAINERD_MODULE/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
echo "k8s-testenv/node: containerd built in $((SECONDS - start)) s; building CoreDNS $COREDNS_VERSION" >&2
"$GO" install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
echo "k8s-testenv/node: building kube-network-policies $NETPOL_VERSION" >&2
# Its main package is the module's cmd/ directory: installed as "cmd".
"$GO" install -trimpath -ldflags "-s -w" "$NETPOL_MODULE/cmd@$NETPOL_VERSION"
mv "$tmp/bin/cmd" "$tmp/bin/kube-network-policies"

for b in "${bins[@]}"; do [[ -x "$tmp/bin/$b" ]] || { echo "k8s-testenv/node: $b was not built" >&2; exit 1; }; done
printf '%s\n%s\n%s\n%s\n' "$CONTAINERD_VERSION" "$COREDNS_VERSION" "$NETPOL_VERSION" "$gover" >"$tmp/STAMP"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "k8s-testenv/node: built in $((SECONDS - start)) s" >&2
echo "$dest/bin"
