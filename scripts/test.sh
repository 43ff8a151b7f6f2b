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

# The interop tests read lakeshift's Iceberg tables with pyiceberg and DuckDB (with its
# iceberg, avro and parquet extensions from PyPI, loaded offline) from a virtualenv;
# the S3 tests run moto's S3 server from it.
# Tools the tests build or install live in a cache outside the clone, keyed by their
# versions, so a clean clone on the same machine reuses them.
CACHE="${LAKESHIFT_CACHE:-$HOME/.cache/lakeshift}"
mkdir -p "$CACHE"
VENV="$CACHE/interop-venv-pyiceberg0.12.0-duckdb1.4.4-moto5.2.5"
if ! { "$VENV/bin/python" -c "import pyiceberg, duckdb, duckdb_ext, moto, boto3" 2>/dev/null \
    && ls "$VENV"/lib/python3*/site-packages/duckdb_ext/extensions/*/*/httpfs.duckdb_extension >/dev/null 2>&1; }; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check \
    "pyiceberg[sql-sqlite,pyarrow]==0.12.0" duckdb==1.4.4 \
    duckdb-ext-iceberg==1.4.4.20260205 duckdb-ext-avro==1.4.4.20260205 \
    duckdb-ext-parquet==1.4.4.20260205 duckdb-ext-httpfs==1.4.4.20260205 \
    "moto[server]==5.2.5"
fi
export LAKESHIFT_INTEROP_PYTHON="$VENV/bin/python"

# The Kafka tests run a real Kafka-protocol broker: tansu from crates.io, with its
# in-memory store, built once into the cache.
TANSU_ROOT="$CACHE/tansu-0.6.0-dynostore-debug"
TANSU="$TANSU_ROOT/bin/tansu"
if ! "$TANSU" --version >/dev/null 2>&1; then
  # A debug build: half the build time of a release one, and fast enough here.
  cargo install tansu --version 0.6.0 --locked --features dynostore --debug --root "$TANSU_ROOT"
fi
export LAKESHIFT_TANSU="$TANSU"

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The translate-only build (README's "try it") keeps compiling on its own.
cargo clippy -p runner --no-default-features --bins --locked -- -D warnings
# The sync build without the Kafka source (no librdkafka) keeps compiling too.
cargo clippy -p runner --no-default-features --features sync --bins --locked -- -D warnings
cargo test --workspace --locked
