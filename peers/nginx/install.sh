#!/usr/bin/env bash
# nginx's package enables and starts nginx.service (on :80): quicbench runs
# nginx itself, so leave no system instance running.
set -euo pipefail
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
	systemctl disable --now nginx.service >/dev/null 2>&1 || true
fi
