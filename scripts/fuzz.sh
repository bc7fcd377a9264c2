#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each, then copies
# the interesting inputs the fuzzer found (kept in the Go build cache) into the
# package's testdata/fuzz, so the corpus is kept in git and replayed by go test.
set -euo pipefail
t=${1:-30s}
cache=$(go env GOCACHE)/fuzz
mod=$(go list -m)
grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r dir; do
	pkg=$mod/${dir#./}
	for f in $(grep -h '^func Fuzz' "$dir"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/'); do
		echo "fuzz $dir $f ($t)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$dir"
		if [ -d "$cache/$pkg/$f" ]; then
			mkdir -p "$dir/testdata/fuzz/$f"
			cp -n "$cache/$pkg/$f"/* "$dir/testdata/fuzz/$f/" 2>/dev/null || true
		fi
	done
done
