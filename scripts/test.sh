#!/usr/bin/env bash
# Runs every lakeshift test. Starts what the tests need that a fresh machine lacks.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$PATH:/usr/sbin:/sbin"

# The execution tests start their own throwaway MariaDB and PostgreSQL servers; they
# need the server binaries (Debian's mariadb-server and postgresql packages).
if ! command -v mariadbd >/dev/null || ! command -v mariadb-install-db >/dev/null \
   || ! command -v pg_config >/dev/null; then
  apt-get update -qq && apt-get install -y -qq mariadb-server postgresql >/dev/null
fi
# Debian keeps initdb and postgres outside PATH.
export PATH="$(pg_config --bindir):$PATH"

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
