#!/usr/bin/env bash
# Runs the README's test command the way a fresh machine does (make
# cold-test): a fresh clone of this repository's HEAD in a temporary
# directory, with empty HOME, XDG_CACHE_HOME, GOCACHE and GOMODCACHE there,
# so every runtime, image, control plane and Go module is installed or built
# by the project's own scripts. Prints each package's wall time, slowest
# first, and the total; exits with make test's status. The temporary
# directory is removed unless COLD_KEEP=1 (its path is printed either way).
#
# Usage: scripts/cold-test.sh [make target, default test]
# Environment: COLD_DIR (parent of the temporary directory, default $TMPDIR
# or /tmp), COLD_KEEP=1, TEST_TIMEOUT (passed to make).
set -euo pipefail

target=${1:-test}
src=$(cd "$(dirname "$0")/.." && pwd)
base=$(mktemp -d "${COLD_DIR:-${TMPDIR:-/tmp}}/oce-cold.XXXXXX")
log=$base/make-$target.log
cleanup() {
	if [ "${COLD_KEEP:-0}" = 1 ]; then
		echo "cold-test: kept $base" >&2
	else
		# the Go module cache is read-only by design
		chmod -R u+w "$base" 2>/dev/null || true
		rm -rf "$base"
	fi
}
trap cleanup EXIT

mkdir -p "$base/home" "$base/cache" "$base/gocache" "$base/gomodcache"
git clone --quiet --no-hardlinks "$src" "$base/oce"
echo "cold-test: $(git -C "$base/oce" log -1 --format='%h %s') in $base" >&2

# Only what a new machine has: PATH and the Go toolchain's settings that do
# not name a cache. Everything else starts empty.
env_vars=(
	"PATH=$PATH"
	"HOME=$base/home"
	"XDG_CACHE_HOME=$base/cache"
	"GOCACHE=$base/gocache"
	"GOMODCACHE=$base/gomodcache"
	"GOPATH=$base/home/go"
	"TMPDIR=${TMPDIR:-/tmp}"
	"LANG=${LANG:-C.UTF-8}"
)
for v in GOFLAGS GOTOOLCHAIN GOPROXY GONOSUMDB GOPRIVATE GOSUMDB TEST_TIMEOUT TERM; do
	[ -n "${!v:-}" ] && env_vars+=("$v=${!v}")
done

# make test's prerequisites first, one at a time, so each one's cost shows.
steps=("$target")
[ "$target" = test ] && steps=(runtimes k8s-testenv helm images chromium oidc-provider promtool test)
start=$(date +%s)
status=0
times=()
for step in "${steps[@]}"; do
	t0=$(date +%s)
	set +e
	(cd "$base/oce" && env -i "${env_vars[@]}" make "$step") 2>&1 | tee -a "$log"
	status=${PIPESTATUS[0]}
	set -e
	times+=("$(printf '%6d s  make %s' $(($(date +%s) - t0)) "$step")")
	[ "$status" -eq 0 ] || break
done
total=$(($(date +%s) - start))

echo
echo "cold-test: steps:"
printf '  %s\n' "${times[@]}"
echo "cold-test: package wall times (go test's own figure, slowest first):"
grep -E '^(ok|FAIL|---)[[:space:]]' "$log" | awk '$1=="ok"||$1=="FAIL" { if ($3 ~ /s$/) { t=$3; sub(/s$/,"",t); printf "%9.1f s  %-4s %s\n", t, $1, $2 } }' | sort -rn || true
echo "cold-test: total $((total / 60)) m $((total % 60)) s (make $target, exit $status), log: $log"
if [ "$status" -ne 0 ]; then
	COLD_KEEP=1 # keep the log of a failed run
fi
exit "$status"
