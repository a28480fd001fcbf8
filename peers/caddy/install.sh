#!/usr/bin/env bash
# caddy's package enables and starts caddy.service (on :80): quicbench runs
# caddy itself, so leave no system instance running.
set -euo pipefail
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
	systemctl disable --now caddy.service >/dev/null 2>&1 || true
fi
