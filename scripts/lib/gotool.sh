# Sourced by the scripts that build a pinned Go program from the module proxy
# into the shared cache (scripts/helm.sh, scripts/promtool.sh,
# scripts/oidc-provider/build.sh): one place for the lock, the stamp check, the
# staging directory and the atomic move.
#
# gotool_cached NAME DEST REL STAMP BUILD
#   Prints DEST/REL (last line of stdout) when DEST holds a build whose STAMP
#   file reads STAMP and whose REL is executable. Otherwise, holding
#   DEST/../.lock (one build at a time, however many test binaries ask at once),
#   it runs the function BUILD with the staging directory as $1 — BUILD must
#   leave the program at $1/REL — writes the stamp, replaces DEST with the
#   staging directory and prints DEST/REL. Progress goes to stderr, prefixed
#   with NAME.

gotool_complete() { # DEST REL STAMP
	[[ -x "$1/$2" && -f "$1/STAMP" && "$(cat "$1/STAMP")" == "$3" ]]
}

gotool_cached() {
	local name=$1 dest=$2 rel=$3 stamp=$4 build=$5
	if gotool_complete "$dest" "$rel" "$stamp"; then echo "$dest/$rel"; return 0; fi
	local root
	root="$(dirname "$dest")"
	mkdir -p "$root"
	exec 9>"$root/.lock"
	flock 9
	if gotool_complete "$dest" "$rel" "$stamp"; then exec 9>&-; echo "$dest/$rel"; return 0; fi
	local tmp start=$SECONDS
	tmp="$(mktemp -d "$root/.build.XXXXXX")"
	# shellcheck disable=SC2064 # tmp is fixed now
	trap "rm -rf '$tmp'" EXIT
	echo "$name: building into $dest" >&2
	"$build" "$tmp"
	[[ -x "$tmp/$rel" ]] || { echo "$name: the build left no $rel" >&2; return 1; }
	printf '%s\n' "$stamp" >"$tmp/STAMP"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	trap - EXIT
	exec 9>&-
	echo "$name: built in $((SECONDS - start)) s" >&2
	echo "$dest/$rel"
}
