#!/usr/bin/env bash
# Create .venv and install Cairn with its development tools. Idempotent; safe to re-run.
# Usage: scripts/setup.sh [--system] [--local]
#   --system  also install the Debian packages the tests use (chromium)
#   --local   also install the local embedder extra: torch first, pinned to the release whose
#             CPU build the reference machines keep on disk (a plain `torch`, or one pulled in
#             by sentence-transformers, would download a multi-GB CUDA build), then cairn[local]
set -euo pipefail
cd "$(dirname "$0")/.."

system=0
local_extra=0
for arg in "$@"; do
  case "$arg" in
    --system) system=1 ;;
    --local) local_extra=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pip's notes about unused local index locations are noise here; real errors still show.
pip_install() { .venv/bin/python -m pip install --quiet "$@" 2> >(grep -v "is ignored" >&2); }
stamp=.venv/.cairn-installed
# The releases of constraints.txt exactly (CI and the benchmarks measure the same packages).
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  echo "setup: installing Cairn and its Python packages into .venv (a minute or two the first time)"
  pip_install --upgrade pip
  pip_install -c constraints.txt -e '.[dev]'
  touch "$stamp"
fi
local_stamp=.venv/.cairn-local-installed
if [ "$local_extra" = 1 ] && { [ ! -f "$local_stamp" ] || [ pyproject.toml -nt "$local_stamp" ] || [ constraints.txt -nt "$local_stamp" ]; }; then
  echo "setup: installing the local embedder extra (torch's CPU build) for the tests"
  pip_install -c constraints.txt torch==2.13.0
  pip_install -c constraints.txt -e '.[dev,local]'
  touch "$local_stamp"
fi

if [ "$system" = 1 ]; then
  # Debian's Chromium drives the browser tests (never a downloaded browser).
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
fi
