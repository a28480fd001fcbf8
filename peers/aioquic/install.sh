#!/usr/bin/env bash
# The aioquic peer: the pinned aioquic and its dependencies in a virtual
# environment, every file checked against the hashes of requirements.txt;
# installed again only when the requirements changed.
set -euo pipefail
venv=peers/aioquic/.venv
if ! cmp -s peers/aioquic/requirements.txt "$venv/installed-requirements.txt"; then
	rm -rf "$venv"
	/usr/bin/python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r peers/aioquic/requirements.txt
	cp peers/aioquic/requirements.txt "$venv/installed-requirements.txt"
fi
