#!/usr/bin/env bash
# Builds the OpenID provider the console's single sign-on test runs
# (oidc-provider: github.com/zitadel/oidc/v3 at ZITADEL_OIDC_VERSION, see
# main.go) from the Go module proxy and caches it in
# ${XDG_CACHE_HOME:-$HOME/.cache}/oce/oidc-provider/<version>-<stamp>/, keyed
# by the version, this module's go.mod/go.sum/main.go and the Go version.
# When the stamp matches it does nothing. Prints the binary's path on stdout
# (last line); progress goes to stderr. It is one small program (the op package,
# chi, go-jose, otel): far lighter than the k8s test environment.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/gotool.sh"

ZITADEL_OIDC_VERSION=v3.52.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
gover="$("$GO" env GOVERSION)"
grep -q "github.com/zitadel/oidc/v3 $ZITADEL_OIDC_VERSION\$" "$here/go.mod" ||
	{ echo "oidc-provider: go.mod does not pin github.com/zitadel/oidc/v3 $ZITADEL_OIDC_VERSION" >&2; exit 1; }
stamp="$( { echo "$ZITADEL_OIDC_VERSION"; echo "$gover"; cat "$here/go.mod" "$here/go.sum" "$here/main.go"; } | sha256sum | cut -c1-16)"

build() {
	mkdir -p "$1/bin"
	(cd "$here" && "$GO" build -mod=readonly -trimpath -ldflags "-s -w" -o "$1/bin/oidc-provider" .)
}

gotool_cached "oidc-provider (zitadel/oidc $ZITADEL_OIDC_VERSION, $gover)" \
	"${XDG_CACHE_HOME:-$HOME/.cache}/oce/oidc-provider/$ZITADEL_OIDC_VERSION-$stamp" bin/oidc-provider \
	"$(printf '%s\n%s' "$ZITADEL_OIDC_VERSION" "$gover")" build
