#!/usr/bin/env bash
# Installs the Debian packages named as arguments, only those missing.
# Elsewhere it says which packages to install and fails.
set -euo pipefail
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all present ($*)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: this is not a Debian-like system; install these packages (or their equivalents) yourself: ${missing[*]}" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "deps: need root to install: ${missing[*]} (run 'apt-get install -y ${missing[*]}' as root)" >&2
    exit 1
  fi
fi
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
