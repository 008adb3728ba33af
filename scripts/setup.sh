#!/usr/bin/env bash
# Create .venv and install Cairn with its development tools. Idempotent; safe to re-run.
# Usage: scripts/setup.sh [--system]   (--system also installs Debian packages the tests use)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.cairn-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # pip's notes about unused local index locations are noise here; real errors still show.
  .venv/bin/python -m pip install --quiet --upgrade pip 2> >(grep -v "is ignored" >&2)
  .venv/bin/python -m pip install --quiet -e '.[dev]' 2> >(grep -v "is ignored" >&2)
  touch "$stamp"
fi

if [ "${1:-}" = "--system" ]; then
  # Debian's Chromium drives the browser tests (never a downloaded browser).
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
fi
