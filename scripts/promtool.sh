#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus's rule checker and rule unit test
# runner, github.com/prometheus/prometheus/cmd/promtool) from the Go module
# proxy and caches it in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/oce/promtool/<version>-<stamp>/promtool
# keyed by the version, scripts/promtool/go.mod and go.sum and the Go
# version. When the stamp matches it does nothing. Prints the binary's path on
# stdout (last line); progress goes to stderr. images/deploy/monitoring's test
# runs it (and runs this script when the binary is missing).
#
# Lean on purpose (CI builds it cold): only cmd/promtool, -trimpath, no symbol
# table, and the remove_all_sd tag, Prometheus's own switch that leaves out
# the cloud service-discovery plugins (AWS, Azure, GCE, …) that only
# `promtool check config` of a configuration using them would need; rule
# checking and rule unit tests are untouched by it. The cold build (empty
# GOCACHE and GOMODCACHE) is measured in docs/OPERATIONS.md "Monitoring".
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/gotool.sh"

PROMETHEUS_VERSION=v0.316.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/promtool"
GO="${GO:-go}"
gover="$("$GO" env GOVERSION)"
grep -q "github.com/prometheus/prometheus $PROMETHEUS_VERSION\$" "$here/go.mod" ||
	{ echo "promtool: $here/go.mod does not pin prometheus $PROMETHEUS_VERSION" >&2; exit 1; }
stamp="$( { echo "$PROMETHEUS_VERSION"; echo "$gover"; cat "$here/go.mod" "$here/go.sum" "$here/tools.go"; } | sha256sum | cut -c1-16)"

build() {
	(
		cd "$here"
		GOFLAGS=-mod=mod "$GO" build -trimpath -tags remove_all_sd \
			-ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v} -X github.com/prometheus/common/version.Branch=module" \
			-o "$1/promtool" github.com/prometheus/prometheus/cmd/promtool
	)
	"$1/promtool" --version >/dev/null
}

gotool_cached "promtool (prometheus $PROMETHEUS_VERSION, $gover)" \
	"${XDG_CACHE_HOME:-$HOME/.cache}/oce/promtool/$PROMETHEUS_VERSION-$stamp" promtool \
	"$(printf '%s\n%s' "$PROMETHEUS_VERSION" "$gover")" build
