#!/usr/bin/env bash
# Installs headless Chromium (Debian package chromium) for the console's
# browser tests when it is missing. Idempotent; needs root for apt-get (CI
# and the dev machines run as root). The Go tests install it the same way
# when this step was skipped (internal/browser.Ensure).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "chromium: not installed, and installing it needs root: apt-get install chromium" >&2
	exit 1
fi
echo "chromium: installing the Debian package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
