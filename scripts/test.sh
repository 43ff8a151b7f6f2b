#!/usr/bin/env bash
# Runs every lakeshift test. Starts what the tests need that a fresh machine lacks.
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL: the machine's service on 127.0.0.1:5432 (execution tests create and drop
# their own databases there). Start it if it is down.
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
# MariaDB: the tests start their own throwaway servers; they need the binaries.
command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null || {
  apt-get update -qq && apt-get install -y -qq mariadb-server >/dev/null; }

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
