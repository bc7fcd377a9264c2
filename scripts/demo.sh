#!/usr/bin/env bash
# Quickstart (make demo): start oce on this machine (occ dev up: coordinator +
# local compute driver + offline fake model provider, runtimes in a
# loopback-only network namespace), deploy one embedded OpenClaw Agent and
# one dedicated Codex Agent, send each a message, print the replies and leave
# everything running. `bin/occ dev down` stops it (--purge removes ./.oce).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${OCC:-bin/occ}
[ -x "$BIN" ] || { echo "demo: $BIN not found; run make build" >&2; exit 1; }
# OCE_DEMO_DIR / OCE_DEMO_ADDR move the data dir (default ./.oce) and the API
# address (default 127.0.0.1:7400), e.g. beside a running coordinator.
DIR=${OCE_DEMO_DIR:-.oce}
ADDR=${OCE_DEMO_ADDR:-127.0.0.1:7400}
export OCC_DEV_DIR=$DIR
OCC() { "$BIN" --server "https://$ADDR" --ca-file "$DIR/coordinator/tls/ca.crt" --token-file "$DIR/coordinator/token" "$@"; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "occ dev up"
"$BIN" dev up --dir "$DIR" --http-addr "$ADDR"

# ensure KIND NAME CREATE-ARGS…: create unless it exists (the demo is re-runnable).
ensure() {
	local kind=$1 name=$2; shift 2
	if ! OCC "$kind" get "$name" >/dev/null 2>&1; then
		OCC "$kind" create "$name" "$@"
	fi
}

step "the demo key, a credential source of the namespace"
# occ dev up registers it in the default namespace; another namespace
# (OCC_NAMESPACE) gets its own source, copied from the dev secrets dir.
OCC credential get demo-key >/dev/null 2>&1 || OCC credential register demo-key --from-local demo-key

step "embedded OpenClaw Agent 'hello'"
ensure config demo-embedded -f scripts/demo/embedded.json
ensure agent hello --config demo-embedded --auth-method api_key --auth-ref credential:demo-key
OCC agent deploy hello --wait

step "dedicated Codex Agent 'coder'"
ensure config demo-codex -f scripts/demo/dedicated-codex.json
ensure agent coder --config demo-codex --mode dedicated --auth-method api_key --auth-ref credential:demo-key
OCC agent deploy coder --wait

failed=0
step "occ agent send hello"
OCC agent send hello "Hello, embedded OpenClaw! Who answers?" || failed=1

step "occ agent send coder"
OCC agent send coder "Hello, Codex! Who answers?" || failed=1

cat <<'MSG'

Both Agents keep running (the replies came from the offline fake provider through the real
OpenClaw gateway; the Codex Agent's through its Harness's real Codex app-server). Try:
  bin/occ status
  bin/occ agent send hello "another message"
  bin/occ agent send coder "another message"
  bin/occ dev down            # stop everything; data stays in ./.oce (--purge removes it)
MSG
exit $failed
