#!/usr/bin/env bash
# Installs the Debian packages the build needs, only when one is missing.
# Safe to run repeatedly: with everything present it does nothing and says so.
set -euo pipefail

# The build's packages, plus any named on the command line (make bench adds the sqlite3 shell). libcurl's headers
# and libxml2's are for the release build: FoundationNetworking and FoundationXML, linked statically, need -lcurl
# and -lxml2.
packages=(pkg-config libyaml-dev libsqlite3-dev libsodium-dev libssl-dev libpq-dev libcurl4-openssl-dev libxml2-dev
    libmicrohttpd-dev libzstd-dev zlib1g-dev libjq-dev "$@")

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all Debian packages present (${packages[*]})" >&2
    exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "install-deps: error: missing ${missing[*]} and not root; install them with apt-get" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: installed ${missing[*]}" >&2
