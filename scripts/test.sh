#!/usr/bin/env bash
# Set up, start the services the tests need, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --system --local
./scripts/services.sh
# Two worker processes (pytest-xdist): on two cores the suite is mostly one busy process and
# waits (servers starting, leases, sleeps); each worker has its own PostgreSQL database.
# Pass -n 0 to run in one process.
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest -n 2 "$@"
fi
# The whole suite: the tests that time the server against a bound (marked ``alone``) run by
# themselves after the rest, since on two cores a test worker busy beside them measures the
# machine, not the server.
.venv/bin/python -m pytest -n 2 -m "not alone"
exec .venv/bin/python -m pytest -n 0 -m alone
