#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each; the corpus
# lands in each package's testdata/fuzz and is kept in git.
set -euo pipefail
t=${1:-30s}
grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r dir; do
	for f in $(grep -h '^func Fuzz' "$dir"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/'); do
		echo "fuzz $dir $f ($t)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$dir"
	done
done
