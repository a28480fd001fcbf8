#!/usr/bin/env bash
# Installs what quicbench needs on a Debian 12 machine (as root) and builds it
# into ./bin/quicbench. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "setup.sh: run as root (it installs Debian packages)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v chromium >/dev/null || need+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v git >/dev/null || need+=(git)
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" ca-certificates
fi
if ! command -v go >/dev/null; then
	echo "setup.sh: Go 1.26 or newer is required (https://go.dev/doc/install)" >&2
	exit 1
fi
go mod download
mkdir -p bin
go build -o bin/quicbench ./cmd/quicbench
echo "built bin/quicbench"
