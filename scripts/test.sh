#!/usr/bin/env bash
# Set up, start the services the tests need, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --system --local
./scripts/services.sh
exec .venv/bin/python -m pytest "$@"
