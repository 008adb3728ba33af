#!/usr/bin/env bash
# Set up, start the services the tests need, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --system --local
./scripts/services.sh
# Two worker processes (pytest-xdist): on two cores the suite is mostly one busy process and
# waits (servers starting, leases, sleeps); each worker has its own PostgreSQL database.
# Pass -n 0 to run in one process.
exec .venv/bin/python -m pytest -n 2 "$@"
