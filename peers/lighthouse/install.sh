#!/usr/bin/env bash
# Lighthouse, at the version pinned in package-lock.json; installed again
# only when what is there is another version.
set -euo pipefail
lh_pinned=$(sed -n 's/.*"lighthouse": "\([0-9.]*\)".*/\1/p' peers/lighthouse/package.json)
lh_have=$(sed -n 's/^  "version": "\([0-9.]*\)".*/\1/p' peers/lighthouse/node_modules/lighthouse/package.json 2>/dev/null || true)
if [ "$lh_have" != "$lh_pinned" ]; then
	npm ci --prefix peers/lighthouse --no-audit --no-fund --loglevel=error
fi
