#!/usr/bin/env bash
# Prints the machine's own apt sources for a Debian suite as one-line
# sources.list entries ("deb URI SUITE COMPONENTS"), for building a Debian
# root filesystem (scripts/images.sh) from the mirror this machine is
# configured to use — never a mirror host written in the repository.
#
# Usage: scripts/apt-sources.sh SUITE [APT_ETC]
#   SUITE    e.g. bookworm: entries for SUITE, SUITE-updates and
#            SUITE-security are printed (components as configured)
#   APT_ETC  the apt configuration directory (default /etc/apt; tests)
#
# Reads APT_ETC/sources.list, APT_ETC/sources.list.d/*.list (one-line
# style) and APT_ETC/sources.list.d/*.sources (deb822 style; Enabled: no
# skipped). Options in brackets and Signed-By are dropped: the build trusts
# the machine's keyrings. Exits 1 with the files it read when none match.
set -euo pipefail

suite=${1:?usage: apt-sources.sh SUITE [APT_ETC]}
etc=${2:-/etc/apt}

files=()
[ -f "$etc/sources.list" ] && files+=("$etc/sources.list")
for f in "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
	[ -f "$f" ] && files+=("$f")
done

out=$(
	for f in ${files[@]+"${files[@]}"}; do
		case $f in
		*.sources)
			# deb822: stanzas separated by blank lines; continuation lines
			# (leading space) belong to the field before them.
			awk '
				function flush() {
					if (types ~ /(^| )deb( |$)/ && enabled !~ /^(no|false)$/) {
						n = split(uris, u, " "); m = split(suites, s, " ")
						for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print "deb " u[i] " " s[j] " " comps
					}
					types = uris = suites = comps = enabled = ""; field = ""
				}
				/^#/ { next }
				/^[ \t]*$/ { flush(); next }
				/^[ \t]/ { v = $0; sub(/^[ \t]+/, "", v); if (field == "uris") uris = uris " " v; else if (field == "suites") suites = suites " " v; else if (field == "components") comps = comps " " v; next }
				{
					k = tolower($0); sub(/:.*/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v)
					field = k
					if (k == "types") types = v
					else if (k == "uris") uris = v
					else if (k == "suites") suites = v
					else if (k == "components") comps = v
					else if (k == "enabled") enabled = tolower(v)
				}
				END { flush() }
			' "$f"
			;;
		*)
			# one-line style: deb [options] URI SUITE COMPONENT...
			sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 4 { $1 = "deb"; print }'
			;;
		esac
	done | awk -v s="$suite" '$3 == s || $3 == s "-updates" || $3 == s "-security" { $1 = $1; print }' | awk '!seen[$0]++'
)

if [ -z "$out" ]; then
	echo "apt-sources: no 'deb' source for $suite, $suite-updates or $suite-security in: ${files[*]:-(no sources files under $etc)}" >&2
	exit 1
fi
printf '%s\n' "$out"
