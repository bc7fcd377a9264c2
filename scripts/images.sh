#!/usr/bin/env bash
# Builds oce's container images without a registry (make images):
#   base         an mmdebstrap minbase Debian 12 root filesystem plus exactly
#                images/base/packages and the runtime user (uid/gid 1000),
#                imported as the local buildah image localhost/oce/base:<key>
#   coordinator  coordinator + occ
#   gateway      gatewayd + nodehost + Node + OpenClaw + npm + the offline
#                @openclaw/codex plugin cache + a Node compile cache filled
#                at build by a warm-up boot (warm_compile_cache)
#   harness      harnessd + nodehost + Codex
# Each image is images/<name>/Containerfile built FROM the BASE build
# argument over a staged context (rootfs/ only: never .oce/, bin/ or .git/),
# with the Go binaries (CGO off, -trimpath) and the pinned npm runtimes of
# scripts/runtimes.sh. Outputs, keyed by their inputs and rebuilt only when
# those change, go to ${XDG_CACHE_HOME:-$HOME/.cache}/oce/images/out:
#   <name>-<key>.oci.tar   OCI archive (index annotated with
#                          io.containerd.image.name, so `ctr -n k8s.io images
#                          import` names it localhost/oce/<name>:<key>)
# and the manifest images.env (one line per image: name ref archive bytes).
#
# Usage: scripts/images.sh [build]      build what is missing, print the manifest
#        scripts/images.sh context DIR  only stage the contexts into DIR/<name>
#                                       (for docker/kaniko: see images/README.md)
# Debian tools (buildah, mmdebstrap) are installed through apt when missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/oce/images"
out="$cache/out"
store=(--root "$cache/buildah/storage" --runroot "$cache/buildah/run" --storage-driver vfs)
names=(coordinator gateway harness)
suite=bookworm # the mirror is the machine's own (scripts/apt-sources.sh)
keep=3 # archives kept per image (other branches build other keys)

log() { printf 'images: %s\n' "$*" >&2; }
ms() { date +%s%3N; }

apt_install() {
	local missing=()
	for tool in "$@"; do
		command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]} from Debian"
	local sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >&2
}

# runtimes: the pinned npm runtimes (same cache as make runtimes).
load_runtimes() {
	local line
	while IFS= read -r line; do
		case $line in OCE_*=*) export "${line?}" ;; esac
	done < <(bash "$root/scripts/runtimes.sh")
	for v in OCE_NODE OCE_OPENCLAW_MJS OCE_CODEX OCE_NPM_CACHE OCE_NPM_CLI; do
		[ -e "${!v:-}" ] || { log "runtimes.sh named no $v"; exit 1; }
	done
}

# stamp DIR: the version stamp of a runtime install (its .installed/.filled).
stamp() { cat "$1/.installed" 2>/dev/null || cat "$1/.filled"; }

# npm_root FILE: the npm prefix (…/<runtime>) a runtime file lives under.
npm_root() { local p=$1; while [ "$(basename "$p")" != node_modules ]; do p=$(dirname "$p"); done; dirname "$p"; }

# link_tree SRC DST: hard links when on the same file system (the cache), else a copy.
link_tree() { mkdir -p "$(dirname "$2")"; cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"; }

# stage NAME DIR: the build context of image NAME (rootfs/ and nothing else).
stage() {
	stage_bins "$1" "$2"
	stage_runtimes "$1" "$2"
}

# stage_bins NAME DIR: a fresh context with the image's Go binaries.
stage_bins() {
	local name=$1 dir=$2 r
	rm -rf "$dir"
	mkdir -p "$dir/rootfs/usr/local/bin"
	r=$dir/rootfs
	local pkgs
	case $name in
	coordinator) pkgs=(./cmd/coordinator ./cmd/occ) ;;
	gateway) pkgs=(./cmd/gatewayd ./cmd/nodehost) ;;
	harness) pkgs=(./cmd/harnessd ./cmd/nodehost) ;;
	esac
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$r/usr/local/bin/" "${pkgs[@]}")
}

# stage_runtimes NAME DIR: the pinned npm runtimes of image NAME.
stage_runtimes() {
	local name=$1 r=$2/rootfs
	case $name in
	gateway)
		mkdir -p "$r/opt/oce/node/bin"
		cp -l "$OCE_NODE" "$r/opt/oce/node/bin/node" 2>/dev/null || cp "$OCE_NODE" "$r/opt/oce/node/bin/node"
		link_tree "$(npm_root "$OCE_OPENCLAW_MJS")/node_modules" "$r/opt/oce/openclaw/node_modules"
		link_tree "$(npm_root "$OCE_NPM_CLI")/node_modules" "$r/opt/oce/npm/node_modules"
		ln -s ../../npm/node_modules/npm/bin/npm-cli.js "$r/opt/oce/node/bin/npm"
		link_tree "$OCE_NPM_CACHE" "$r/opt/oce/npm-cache"
		rm -f "$r/opt/oce/npm-cache/.filled"
		;;
	harness)
		cp -l "$OCE_CODEX" "$r/usr/local/bin/codex" 2>/dev/null || cp "$OCE_CODEX" "$r/usr/local/bin/codex"
		;;
	esac
}

# warm_compile_cache DIR: the gateway image's Node compile cache
# (rootfs/opt/oce/compile-cache, contract.PathCompileCache), filled by one
# warm-up boot of exactly the staged gatewayd and runtime at the image's
# paths in a loopback-only namespace (scripts/warm-compile-cache.sh). The
# launcher keys the cache by package.json's mtime in milliseconds, and a
# layer archive may keep whole seconds only: package.json gets its own copy
# (the staged tree is hard links into the runtime cache) with its mtime
# truncated to the second first, so the key the warm-up computes is the one
# the container computes.
warm_compile_cache() {
	local r=$1/rootfs pj t0
	t0=$(ms)
	pj=$r/opt/oce/openclaw/node_modules/openclaw/package.json
	cp -p "$pj" "$pj.copy"
	mv -f "$pj.copy" "$pj"
	touch -m -d "@$(stat -c %Y "$pj")" "$pj"
	mkdir -p "$r/opt/oce/compile-cache"
	# as the image's runtime user (images/gateway/Containerfile USER)
	unshare --net --mount --fork --kill-child -- bash "$root/scripts/warm-compile-cache.sh" "$r" 1000:1000 >&2
	# Node writes its entries 0600 as the warm-up's user, and the image's COPY
	# makes every file root's: readable by all, or the Pod's user reads none
	chmod -R a+rX "$r/opt/oce/compile-cache"
	log "compile cache: $(find "$r/opt/oce/compile-cache" -type f | wc -l) entries from a warm-up boot in $((($(ms) - t0) / 1000)) s"
}

# image_key NAME DIR BASEKEY: hash of everything the image is made of — the
# Containerfile, the base, the Go binaries and the runtime versions.
image_key() {
	local name=$1 dir=$2
	{
		echo "$3"
		cat "$root/images/$name/Containerfile"
		(cd "$dir/rootfs/usr/local/bin" && sha256sum ./*)
		case $name in
		gateway)
			stamp "$(npm_root "$OCE_NODE")"
			stamp "$(npm_root "$OCE_OPENCLAW_MJS")"
			stamp "$(npm_root "$OCE_NPM_CLI")"
			stamp "$OCE_NPM_CACHE"
			sed -n '/^warm_compile_cache()/,/^}/p' "$0"
			cat "$root/scripts/warm-compile-cache.sh"
			;;
		harness) stamp "$(npm_root "$OCE_CODEX")" ;;
		esac
	} | sha256sum | cut -c1-16
}

base_key() {
	{
		echo "$suite minbase $(mmdebstrap --version)"
		cat "$root/images/base/packages"
		sed -n '/^build_base()/,/^}/p' "$0"
	} | sha256sum | cut -c1-16
}

has_image() { buildah "${store[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# build_base KEY: mmdebstrap minbase + the packages + user 1000, imported
# FROM scratch. Documentation and locales are left out.
build_base() {
	local key=$1 ref=localhost/oce/base:$1 tmp ctr
	has_image "$ref" && return 0
	local sources
	readarray -t sources < <(bash "$root/scripts/apt-sources.sh" "$suite")
	[ ${#sources[@]} -gt 0 ] || { log "no apt source for $suite on this machine"; exit 1; }
	log "building base $ref (mmdebstrap $suite minbase + $(paste -sd, "$root/images/base/packages"); sources: ${sources[*]})"
	tmp=$(mktemp -d "$cache/tmp/base.XXXXXX")
	mmdebstrap --variant=minbase --include="$(paste -sd, "$root/images/base/packages")" \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--customize-hook='echo "node:x:1000:1000::/home/node:/bin/sh" >>"$1/etc/passwd"' \
		--customize-hook='echo "node:x:1000:" >>"$1/etc/group"' \
		--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
		"$suite" "$tmp/rootfs.tar" "${sources[@]}" >&2
	ctr=$(buildah "${store[@]}" from scratch)
	buildah "${store[@]}" add "$ctr" "$tmp/rootfs.tar" / >&2
	buildah "${store[@]}" config --env PATH=/usr/local/bin:/usr/bin:/bin --cmd /bin/sh "$ctr" >&2
	buildah "${store[@]}" commit --rm "$ctr" "$ref" >&2
	rm -rf "$tmp"
}

# build NAME BASEKEY: stage, key, and build/export when the archive is missing.
build() {
	local name=$1 bkey=$2 ctx key ref archive t0 tmp
	t0=$(ms)
	ctx="$cache/context/$name"
	stage_bins "$name" "$ctx" # the key needs only the binaries and the runtime stamps
	key=$(image_key "$name" "$ctx" "$bkey")
	ref=localhost/oce/$name:$key
	archive="$out/$name-$key.oci.tar"
	if [ ! -s "$archive" ]; then
		log "building $ref"
		stage_runtimes "$name" "$ctx"
		[ "$name" != gateway ] || warm_compile_cache "$ctx"
		local version revision
		version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
		revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
		local meta=()
		for kv in "org.opencontainers.image.title=oce-$name" "org.opencontainers.image.version=$version" \
			"org.opencontainers.image.revision=$revision" "org.opencontainers.image.source=oce.dev/oce" \
			"dev.oce.image.key=$key"; do
			meta+=(--label "$kv" --annotation "$kv")
		done
		buildah "${store[@]}" bud --quiet --pull=never --layers=false --identity-label=false --omit-history \
			--build-arg "BASE=localhost/oce/base:$bkey" "${meta[@]}" \
			-f "$root/images/$name/Containerfile" -t "$ref" "$ctx" >&2
		tmp=$(mktemp -d "$cache/tmp/$name.XXXXXX")
		buildah "${store[@]}" push --quiet --format oci "$ref" "oci:$tmp/layout:$ref" >&2
		# name the manifest for containerd (ctr import keeps io.containerd.image.name)
		sed -i "s#\"annotations\":{#\"annotations\":{\"io.containerd.image.name\":\"$ref\",#" "$tmp/layout/index.json"
		grep -q "io.containerd.image.name" "$tmp/layout/index.json" || { log "could not annotate the index"; exit 1; }
		tar -C "$tmp/layout" -cf "$archive.partial" oci-layout index.json blobs
		mv "$archive.partial" "$archive"
		rm -rf "$tmp"
		buildah "${store[@]}" images --format '{{.Size}}' "$ref" >"$archive.size" 2>/dev/null || true
		buildah "${store[@]}" rmi "$ref" >/dev/null 2>&1 || true
		log "built $ref in $((($(ms) - t0) / 1000)) s"
	fi
	rm -rf "$ctx"
	# keep the newest archives of this image only
	ls -1t "$out/$name-"*.oci.tar 2>/dev/null | tail -n +$((keep + 1)) | while read -r old; do rm -f "$old" "$old.size" "$old.smoked"; done
	touch "$archive"
	printf '%s %s %s %s\n' "$name" "$ref" "$archive" "$(stat -c %s "$archive")"
}

# smoke MANIFEST: the smoke checks (images/imagestest/smoke.go) of every
# image not yet checked: each is started as its Pod starts it and must run
# what its entrypoint needs, or the build fails naming what it lacks.
# A passed archive gets a .smoked stamp.
smoke() {
	local args=() n ref archive bytes
	while read -r n ref archive bytes; do
		[ -f "$archive.smoked" ] || args+=("$n=$archive")
	done <<<"$1"
	[ ${#args[@]} -gt 0 ] || return 0
	if [ "$(id -u)" != 0 ]; then
		log "not root: the smoke checks (runc) of ${args[*]%%=*} did not run"
		return 0
	fi
	local t0
	t0=$(ms)
	if ! (cd "$root" && go run ./images/imagestest/smoke "${args[@]}") >&2; then
		# never reuse an archive that did not pass: the next run rebuilds it
		for a in "${args[@]}"; do rm -f "${a#*=}" "${a#*=}.size"; done
		log "smoke checks failed: an image above would not start (see the checks' output); its archive is removed"
		exit 1
	fi
	for a in "${args[@]}"; do touch "${a#*=}.smoked"; done
	log "smoke checks passed in $((($(ms) - t0) / 1000)) s"
}

main() {
	local cmd=${1:-build}
	mkdir -p "$out" "$cache/tmp" "$cache/context"
	case $cmd in
	context)
		local dir=${2:?usage: images.sh context DIR}
		load_runtimes
		for n in "${names[@]}"; do stage "$n" "$dir/$n"; done
		log "contexts staged under $dir (build with: docker build --build-arg BASE=<base> -f images/<name>/Containerfile $dir/<name>)"
		return 0
		;;
	build) ;;
	*)
		echo "usage: images.sh [build] | images.sh context DIR" >&2
		exit 2
		;;
	esac
	exec 9>"$cache/.lock"
	flock 9
	# leftovers of an interrupted build (we hold the lock: nobody else builds)
	rm -rf "${cache:?}/tmp/"* "$out"/*.partial
	apt_install buildah:buildah mmdebstrap:mmdebstrap runc:runc ip:iproute2 unshare:util-linux setpriv:util-linux
	command -v buildah >/dev/null && buildah "${store[@]}" rm --all >/dev/null 2>&1 || true
	load_runtimes
	local t0 bkey manifest
	t0=$(ms)
	bkey=$(base_key)
	build_base "$bkey"
	manifest=$(for n in "${names[@]}"; do build "$n" "$bkey"; done)
	smoke "$manifest"
	printf '%s\n' "$manifest" >"$out/images.env.tmp"
	mv "$out/images.env.tmp" "$out/images.env"
	printf '%s\n' "$manifest"
	while read -r n ref archive bytes; do
		log "$(printf '%-12s %-44s %6d MiB archive, %s unpacked' "$n" "$ref" $((bytes / 1048576)) "$(cat "$archive.size" 2>/dev/null || echo '?')")"
	done <<<"$manifest"
	log "done in $((($(ms) - t0) / 1000)) s"
}

main "$@"
