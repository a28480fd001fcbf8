#!/usr/bin/env bash
# Makes the built-in recorded pages (internal/sites/pages/*.har.gz): each is
# generated (quicbench page-gen: a multi-origin page shaped like typical
# pages), replayed in a testbed, and recorded from that replay by headless
# Chromium with quicbench record, as a user records a page. Run as root from
# the repository root after building bin/quicbench; then rebuild.
set -euo pipefail
qb=${QB:-$PWD/bin/quicbench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in har-1x20 har-6x70 har-15x120; do
	"$qb" page-gen "$name" -o "$tmp/$name.gen.har"
	"$qb" replay "$tmp/$name.gen.har" --link "delay 5ms" -- \
		sh -c "\"$qb\" record https://www.news.example/ -o \"$tmp/$name.har\" --spki \"\$QUICBENCH_REPLAY_SPKI\"" >/dev/null
	"$qb" replay "$tmp/$name.har" --client builtin --proto h2 >/dev/null # it replays
	gzip -9 -n -c "$tmp/$name.har" > "internal/sites/pages/$name.har.gz"
	echo "$name: $(stat -c %s "internal/sites/pages/$name.har.gz") bytes"
done
