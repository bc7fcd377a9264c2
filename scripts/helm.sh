#!/usr/bin/env bash
# Builds the pinned Helm CLI (helm.sh/helm/v4's cmd/helm) from the Go module
# proxy and caches it in ${XDG_CACHE_HOME:-$HOME/.cache}/oce/helm/<version>/bin/helm,
# keyed by the Helm version and the Go version (STAMP). When the stamp matches
# it does nothing. Prints the helm binary's path on stdout (last line); progress
# goes to stderr.
#
# helm v4.3.2 requires k8s.io/* v0.37.2, the same versions as the project's
# go.mod, and it is built without -trimpath like the project's `go test`, so the
# compiled client-go/apimachinery packages are shared in GOCACHE with the
# project's own build; docs/OPERATIONS.md has the measured cold figure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/gotool.sh"

HELM_VERSION=v4.3.2

GO="${GO:-go}"
gover="$("$GO" env GOVERSION)"

build() {
	mkdir -p "$1/bin"
	# `go install pkg@version` builds with Helm's own go.mod and go.sum
	# (checked against the checksum database), outside this repository's module.
	(
		cd "$1"
		GOFLAGS= GOBIN="$1/bin" "$GO" install \
			-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
			"helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
	)
	"$1/bin/helm" version --short >&2
}

gotool_cached "helm $HELM_VERSION ($gover)" "${XDG_CACHE_HOME:-$HOME/.cache}/oce/helm/$HELM_VERSION" bin/helm \
	"$(printf '%s\n%s' "$HELM_VERSION" "$gover")" build
