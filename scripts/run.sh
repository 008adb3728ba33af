#!/usr/bin/env bash
# Set up, start the Cairn server on the embedded SQLite default, run the quick-start demo
# against it, and keep serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export CAIRN_PORT=${CAIRN_PORT:-8100}
export CAIRN_HOST=${CAIRN_HOST:-127.0.0.1}
export CAIRN_LOG_LEVEL=${CAIRN_LOG_LEVEL:-WARNING}
export CAIRN_LADDERS_DIR=${CAIRN_LADDERS_DIR:-examples/ladders}
.venv/bin/cairn serve &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
# Ctrl-C is how the server is meant to stop: a clean exit, not an error for make to report.
trap 'exit 0' INT
trap 'exit 143' TERM
for _ in $(seq 1 100); do
  if curl -fsS "http://$CAIRN_HOST:$CAIRN_PORT/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 $server 2>/dev/null; then echo "the server did not start" >&2; exit 1; fi
  sleep 0.2
done
./scripts/demo.sh "http://$CAIRN_HOST:$CAIRN_PORT"
echo
echo "Cairn is serving on http://$CAIRN_HOST:$CAIRN_PORT (API docs at /docs, inspector at /ui). Ctrl-C stops it."
if [ "${CAIRN_DEMO_ONLY:-}" = "1" ]; then exit 0; fi
wait $server
