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
# Firefox (client firefox) and NSS's certutil, which trusts the test CA in
# each fresh Firefox profile. Debian's firefox-esr speaks WebDriver BiDi
# itself: no geckodriver, no Node driver.
command -v firefox-esr >/dev/null || need+=(firefox-esr)
command -v certutil >/dev/null || need+=(libnss3-tools)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v git >/dev/null || need+=(git)
# Node.js runs Lighthouse (client lighthouse); Lighthouse 12 needs 18.16 or
# newer, which Debian 12's nodejs (18.19) is.
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# Slurm and munge: quicbench slurm's integration test starts a private
# one-node cluster with them (docs/scale.md): its own munged, slurmctld and
# slurmd from a temporary configuration. It does not use the packages'
# services (which systemd may start, and which are harmless without one
# configured).
command -v slurmctld >/dev/null || need+=(slurm-wlm)
command -v munged >/dev/null || need+=(munge)
# Peer servers (docs/peers.md): Debian's caddy (h1, h2, h3) and Python's
# venv for the aioquic peer.
command -v caddy >/dev/null || need+=(caddy)
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
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
# caddy's package enables and starts caddy.service (on :80): quicbench runs
# caddy itself, so leave no system instance running.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
	systemctl disable --now caddy.service >/dev/null 2>&1 || true
fi
# The aioquic peer: the pinned aioquic and its dependencies, every file
# checked against the hashes of peers/aioquic/requirements.txt; installed
# again only when the requirements changed.
venv=peers/aioquic/.venv
if ! cmp -s peers/aioquic/requirements.txt "$venv/installed-requirements.txt"; then
	rm -rf "$venv"
	/usr/bin/python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r peers/aioquic/requirements.txt
	cp peers/aioquic/requirements.txt "$venv/installed-requirements.txt"
fi
if ! command -v go >/dev/null; then
	echo "setup.sh: Go 1.26 or newer is required (https://go.dev/doc/install)" >&2
	exit 1
fi
go mod download
# Lighthouse, at the version pinned in peers/lighthouse (package-lock.json);
# installed again only when what is there is another version.
lh_pinned=$(sed -n 's/.*"lighthouse": "\([0-9.]*\)".*/\1/p' peers/lighthouse/package.json)
lh_have=$(sed -n 's/^  "version": "\([0-9.]*\)".*/\1/p' peers/lighthouse/node_modules/lighthouse/package.json 2>/dev/null || true)
if [ "$lh_have" != "$lh_pinned" ]; then
	npm ci --prefix peers/lighthouse --no-audit --no-fund --loglevel=error
fi
mkdir -p bin
go build -o bin/quicbench ./cmd/quicbench
echo "built bin/quicbench"
