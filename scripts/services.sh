#!/usr/bin/env bash
# Make sure PostgreSQL answers on 127.0.0.1:5432 (trust auth for local TCP, as the tests expect),
# installing Debian's server and starting the local cluster if needed.
set -euo pipefail
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  # A fresh cluster asks for passwords over TCP; the test databases are throwaway and local.
  hba=/etc/postgresql/$version/main/pg_hba.conf
  $SUDO sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+$/\1trust/' "$hba"
fi
version=$(ls /etc/postgresql | sort -V | tail -n 1)
$SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 && exit 0
  sleep 1
done
echo "PostgreSQL did not start" >&2
exit 1
