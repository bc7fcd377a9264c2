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

HELM_VERSION=v4.3.2

GO="${GO:-go}"
gover="$("$GO" env GOVERSION)"
root="${XDG_CACHE_HOME:-$HOME/.cache}/oce/helm"
dest="$root/$HELM_VERSION"

complete() {
	[[ -x "$dest/bin/helm" && -f "$dest/STAMP" ]] || return 1
	[[ "$(cat "$dest/STAMP")" == "$(printf '%s\n%s' "$HELM_VERSION" "$gover")" ]]
}

if complete; then echo "$dest/bin/helm"; exit 0; fi

mkdir -p "$root"
# One build at a time, even when several test binaries ask at once.
exec 9>"$root/.lock"
flock 9
if complete; then echo "$dest/bin/helm"; exit 0; fi
tmp="$(mktemp -d "$root/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

echo "helm: building helm $HELM_VERSION with $gover into $dest" >&2
start=$SECONDS
# `go install pkg@version` builds with Helm's own go.mod and go.sum (checked
# against the checksum database), outside this repository's module.
(
	cd "$tmp"
	GOFLAGS= GOBIN="$tmp/bin" "$GO" install \
		-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
		"helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
)
"$tmp/bin/helm" version --short >&2
printf '%s\n%s' "$HELM_VERSION" "$gover" >"$tmp/STAMP"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "helm: built in $((SECONDS - start)) s" >&2
echo "$dest/bin/helm"
