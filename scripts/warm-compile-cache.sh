#!/usr/bin/env bash
# The gateway image's warm-up boot (scripts/images.sh warm_compile_cache):
# run as root inside new network and mount namespaces
# (unshare --net --mount --fork), it boots the staged image's own gatewayd
# and OpenClaw once, at the paths the image gives them, the way a Pod boots
# them (gatewayd renders the configuration and links the launcher's default
# compile-cache base, $TMPDIR/node-compile-cache, to OCE_COMPILE_CACHE), so
# Node's compile cache fills ROOTFS/opt/oce/compile-cache keyed exactly as
# the launcher and Node key it in the container. Only loopback exists; the
# runtime tree is mounted read-only, the cache writable, /tmp is a fresh
# tmpfs. The runtime runs as the image's user: Node keeps its cache per
# uid (v<version>-<arch>-<hash>-<uid>). Usage: warm-compile-cache.sh ROOTFS UID:GID
set -euo pipefail
r=${1:?usage: warm-compile-cache.sh ROOTFS UID:GID}
user=${2:?usage: warm-compile-cache.sh ROOTFS UID:GID}
as_user=(setpriv --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups)
readonly within=300 # seconds for the warm-up gateway to become ready

ip link set lo up
mount --make-rprivate /
# the image's /opt/oce in a private /opt (the host's stays untouched)
mount -t tmpfs -o mode=0755 oce-warm-opt /opt
mkdir -p /opt/oce /opt/bin
mount --bind "$r/opt/oce" /opt/oce
mount -o remount,bind,ro /opt/oce
chown "$user" "$r/opt/oce/compile-cache"
mount --bind "$r/opt/oce/compile-cache" /opt/oce/compile-cache
mount --bind "$r/usr/local/bin" /opt/bin
mount -o remount,bind,ro /opt/bin
mount -t tmpfs -o mode=1777 oce-warm-tmp /tmp

w=/tmp/warm
mkdir -p -m 0700 "$w" "$w/secrets" "$w/home" "$w/state" "$w/config"
(umask 077 && printf 'warm-up-password-1\n' >"$w/secrets/gateway-password")
# an Agent's document on a custom endpoint (an official one would make the
# gateway try to install the codex runtime plugin from npm: minutes offline)
printf '%s\n' '{"agents":{"defaults":{"model":"openai/gpt-warm-up"}},"models":{"providers":{"openai":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-responses","models":[{"id":"gpt-warm-up","name":"gpt-warm-up","input":["text"],"contextWindow":128000,"maxTokens":4096}]}}}}' >"$w/admitted.json"
gwenv=(env -i PATH=/opt/oce/node/bin:/usr/bin:/bin HOME="$w/home" TMPDIR=/tmp
	OCE_NODE=/opt/oce/node/bin/node OCE_OPENCLAW_MJS=/opt/oce/openclaw/node_modules/openclaw/openclaw.mjs
	OCE_NPM_CACHE=/opt/oce/npm-cache OCE_COMPILE_CACHE=/opt/oce/compile-cache
	OCE_TOPOLOGY=dedicated-openclaw OCE_STATUS_ADDR=127.0.0.1:18791 OCE_SECRETS_DIR="$w/secrets"
	OPENCLAW_CONFIG_PATH="$w/admitted.json" OCE_GATEWAY_CONFIG_DIR="$w/config" OPENCLAW_STATE_DIR="$w/state"
	OPENCLAW_GATEWAY_PORT=18789 OCE_GATEWAY_BIND=loopback)
chown -R "$user" "$w"
"${as_user[@]}" "${gwenv[@]}" /opt/bin/gatewayd >"$w/gatewayd.log" 2>&1 &
pid=$!
ready=
for _ in $(seq 1 $((within * 2))); do
	if "${gwenv[@]}" /opt/bin/gatewayd ready >/dev/null 2>&1; then
		ready=1
		break
	fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.5
done
# a clean stop: Node writes the compile cache as the gateway exits
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
if [ -z "$ready" ]; then
	echo "warm-compile-cache: the warm-up gateway never became ready; its log:" >&2
	tail -n 40 "$w/gatewayd.log" >&2
	exit 1
fi
grep -q '"prebuilt":"stale"' "$w/gatewayd.log" || {
	echo "warm-compile-cache: gatewayd did not link the cache being filled" >&2
	exit 1
}

# The embedded model probe's command (probe/openclawprobe) too: its modules
# are on every embedded start's critical path. Its provider is a closed
# loopback port, so it fails fast once everything is loaded.
p=$w/probe
mkdir -p -m 0700 "$p" "$p/home" "$p/tmp" "$p/state"
ln -s /opt/oce/compile-cache "$p/tmp/node-compile-cache"
chown -R "$user" "$p"
rt='{"id":"openclaw"}'
printf '%s\n' '{"agents":{"defaults":{"model":{"primary":"openai/gpt-warm-up","fallbacks":[]},"models":{"openai/gpt-warm-up":{"agentRuntime":'"$rt"'}}}},"models":{"catalogRefresh":{"enabled":false},"providers":{"openai":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-responses","agentRuntime":'"$rt"',"models":[{"id":"gpt-warm-up","name":"gpt-warm-up","input":["text"],"contextWindow":128000,"maxTokens":4096,"agentRuntime":'"$rt"'}]}}},"update":{"checkOnStart":false},"discovery":{"mdns":{"mode":"off"}}}' >"$p/openclaw.json"
env -i PATH=/opt/oce/node/bin:/usr/bin:/bin HOME="$p/home" TMPDIR="$p/tmp" OPENCLAW_STATE_DIR="$p/state" \
	OPENCLAW_CONFIG_PATH="$p/openclaw.json" OPENCLAW_DISABLE_BONJOUR=1 OPENCLAW_NO_AUTO_UPDATE=1 \
	OPENCLAW_SKIP_CHANNELS=1 OPENAI_API_KEY=sk-warm-up \
	timeout 180 "${as_user[@]}" /opt/oce/node/bin/node /opt/oce/openclaw/node_modules/openclaw/openclaw.mjs models status --json \
	--probe --probe-provider openai --probe-concurrency 1 --probe-timeout 5000 --probe-max-tokens 8 \
	>"$w/probe.log" 2>&1 || true
