#!/usr/bin/env bash
# Installs what quicbench needs on a Debian 12 machine (as root) and builds it
# into ./bin/quicbench. Safe to run again.
#
# Each stack of the registry (peers/NAME, docs/peers.md) brings its own
# install lines: peers/NAME/packages lists the Debian packages it needs, one
# per line as "PACKAGE [COMMAND]" (# comments): a package is installed
# unless dpkg has it or, when a COMMAND is given, that command is on PATH
# (a Node.js installed otherwise than from Debian brings its own npm);
# peers/NAME/install.sh, when present, does the rest (a virtual
# environment, npm ci, a cargo build), run from the repository's root after
# the packages are in.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "setup.sh: run as root (it installs Debian packages)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
need=()
command -v ip >/dev/null || need+=(iproute2)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v git >/dev/null || need+=(git)
# Slurm and munge: quicbench slurm's integration test starts a private
# one-node cluster with them (docs/scale.md): its own munged, slurmctld and
# slurmd from a temporary configuration. It does not use the packages'
# services (which systemd may start, and which are harmless without one
# configured).
command -v slurmctld >/dev/null || need+=(slurm-wlm)
command -v munged >/dev/null || need+=(munge)
# The stacks' packages (peers/*/packages), those not installed yet.
for list in peers/*/packages; do
	while read -r pkg cmd _; do
		case "$pkg" in ''|'#'*) continue ;; esac
		if [ -n "$cmd" ] && command -v "$cmd" >/dev/null; then
			continue
		fi
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
	done < "$list"
done
# tshark (Wireshark's command line): the capture tests open the pcapng files
# of `capture: pcap` samples with it and decrypt them with the secrets they
# embed. Answer wireshark-common's question (may non-root users capture?)
# beforehand, no: quicbench captures in its own emulator, not with dumpcap.
if ! command -v tshark >/dev/null; then
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	need+=(tshark)
fi
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" ca-certificates
fi
if ! command -v go >/dev/null; then
	echo "setup.sh: Go 1.26 or newer is required (https://go.dev/doc/install)" >&2
	exit 1
fi
go mod download
# The stacks' own install steps.
for step in peers/*/install.sh; do
	echo "setup.sh: $step"
	bash "$step"
done
mkdir -p bin
go build -o bin/quicbench ./cmd/quicbench
echo "built bin/quicbench"
