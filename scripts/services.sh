#!/usr/bin/env bash
# Make sure PostgreSQL answers on 127.0.0.1:5432, starting the local cluster if it does not.
set -euo pipefail
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  exit 0
fi
version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
if [ -z "$version" ]; then
  echo "PostgreSQL is not installed; the test suite needs it on 127.0.0.1:5432" >&2
  exit 1
fi
pg_ctlcluster --skip-systemctl-redirect "$version" main start
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 && exit 0
  sleep 1
done
echo "PostgreSQL did not start" >&2
exit 1
