//! The PostgreSQL source on an application-shaped table, in one run on one throwaway
//! server (`wal_level=logical`): `bench.orders`, a bigint key, a foreign key, uuid,
//! an enum, numerics, timestamptz, text, double, boolean and a ~300-byte jsonb, about
//! 20% NULLs in the nullable columns.
//!
//! - snapshot: lakeshift's initial copy of the table into Arrow (the source alone)
//!   and into a local Iceberg warehouse (a whole `sync --until-end` run: slot, copy,
//!   Parquet, commit) vs `psql -c "COPY bench.orders TO STDOUT"` to /dev/null (text,
//!   and binary for reference); runs alternate, the fastest of each is reported;
//! - catch-up: row changes under REPLICA IDENTITY FULL (updates of a few columns,
//!   deletes, inserts) applied by `sync --until-end` into Iceberg vs `pg_recvlogical`
//!   with `test_decoding` reading the same WAL to /dev/null: wall time and the CPU
//!   time of the reading process (the bench itself for lakeshift, the child for
//!   pg_recvlogical; the server's walsender decodes for both).
//!
//! `cargo bench -p lakeshift-tests --bench pg_wide` (`LAKESHIFT_BENCH_ROWS` table rows,
//! 1,000,000 by default; `LAKESHIFT_BENCH_CHANGES` row changes, 300,000 by default;
//! `LAKESHIFT_BENCH_ROUNDS` alternating snapshot rounds, 2 by default).

use lakeshift_tests::pgbench::{drop_slot, pg_bin, sync_once};
use lakeshift_tests::PgServer;
use runner::source::config::parse_job;
use runner::source::{Resume, SourceEvent};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) of this process (`children`: of its waited-for
/// children), from /proc/self/stat (in USER_HZ ticks, 100 a second on Linux).
fn cpu(children: bool) -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<f64> = rest.split(' ').map(|v| v.parse().unwrap_or(0.0)).collect();
    // utime, stime, cutime, cstime are fields 14-17 (the state, field 3, is f[0]).
    let (u, s) = if children {
        (f[13], f[14])
    } else {
        (f[11], f[12])
    };
    (u + s) / 100.0
}

fn job_text(port: u16, slot: &str, dir: &std::path::Path) -> String {
    format!(
        "source:\n  type: postgres\n  hostname: 127.0.0.1\n  port: {port}\n  username: postgres\n  database: bench\n  tables: ['bench\\.orders']\n  slot: {slot}\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: {slot}\n  state: {}\n  checkpoint-interval-seconds: 5\n",
        dir.join("warehouse").display(),
        dir.join("state").display()
    )
}

/// The in-process source's snapshot alone (into Arrow batches): rows, seconds.
async fn drain(src: runner::source::config::Source, dir: &std::path::Path) -> (u64, f64) {
    use runner::source::Source as _;
    let mut s = runner::source::pg::PgSource::new(Arc::new(src), dir.join("state"));
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let t0 = Instant::now();
    let task = s.start(Resume::default(), true, tx);
    let mut snap = 0u64;
    let mut first = None;
    while let Some(e) = rx.recv().await {
        if let SourceEvent::SnapshotRows { rows, .. } = e {
            first.get_or_insert_with(|| t0.elapsed().as_secs_f64());
            snap += rows.num_rows() as u64;
        }
    }
    eprintln!("(first rows after {:.2} s)", first.unwrap_or_default());
    task.await.unwrap().unwrap();
    (snap, t0.elapsed().as_secs_f64())
}

/// What the lake's `bench.orders` holds: rows and the sum of `amount` in cents.
async fn lake_facts(dir: &std::path::Path) -> (i64, i128) {
    use arrow_array::Array as _;
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
        dir.join("warehouse"),
    ))
    .await
    .unwrap();
    let t = cat
        .load(&runner::iceberg::catalog::ident("bench", "orders").unwrap())
        .await
        .unwrap()
        .expect("bench.orders in the lake");
    let t = t.table(&cat.file_io).unwrap();
    let (mut n, mut sum) = (0i64, 0i128);
    for b in lakeshift_tests::scan_batches(&t, None).await {
        n += b.num_rows() as i64;
        let a = b
            .column_by_name("amount")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::Decimal128Array>()
            .expect("amount is a decimal");
        sum += (0..a.len())
            .filter(|i| a.is_valid(*i))
            .map(|i| a.value(i))
            .sum::<i128>();
    }
    (n, sum)
}

/// What the source's `bench.orders` holds, as [`lake_facts`].
async fn source_facts(pg: &tokio_postgres::Client) -> (i64, i128) {
    let r = pg
        .query_one(
            "SELECT count(*), (coalesce(sum(amount), 0) * 100)::bigint FROM bench.orders",
            &[],
        )
        .await
        .unwrap();
    (r.get(0), r.get::<_, i64>(1) as i128)
}

fn psql_copy(port: u16, sql: &str) -> f64 {
    let t0 = Instant::now();
    let st = Command::new(pg_bin("psql"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-d",
            "bench",
            "-q",
        ])
        .args(["-c", sql])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "psql {sql}");
    t0.elapsed().as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rows = env_num("LAKESHIFT_BENCH_ROWS", 1_000_000);
    let changes = env_num("LAKESHIFT_BENCH_CHANGES", 300_000);
    let rounds = env_num("LAKESHIFT_BENCH_ROUNDS", 2).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = PgServer::start_with(&[
            "wal_level=logical",
            "max_replication_slots=20",
            "max_wal_senders=20",
            "max_wal_size=8GB",
            "shared_buffers=1GB",
        ])
        .await;
        let port = server.port;
        let pg = server.create_db("bench").await;
        pg.batch_execute(
            "CREATE SCHEMA bench;
             CREATE TYPE bench.status AS ENUM ('new', 'paid', 'shipped', 'cancelled', 'returned');
             CREATE TABLE bench.customers (id bigint PRIMARY KEY, name text NOT NULL);
             CREATE TABLE bench.orders (
               id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
               customer_id bigint NOT NULL REFERENCES bench.customers (id),
               ref uuid NOT NULL,
               status bench.status NOT NULL,
               amount numeric(12,2),
               discount numeric(5,2),
               note text,
               created_at timestamptz NOT NULL,
               shipped_at timestamptz,
               qty integer,
               weight double precision,
               is_gift boolean,
               payload jsonb
             );
             INSERT INTO bench.customers SELECT g, 'customer ' || g FROM generate_series(1, 10000) g;",
        )
        .await
        .unwrap();
        eprintln!("loading {rows} rows into bench.orders...");
        pg.batch_execute(&format!(
            "INSERT INTO bench.orders (id, customer_id, ref, status, amount, discount, note, created_at, shipped_at, qty, weight, is_gift, payload)
             SELECT g, 1 + g % 10000, md5(g::text)::uuid,
               (ARRAY['new', 'paid', 'shipped', 'cancelled', 'returned'])[1 + g % 5]::bench.status,
               CASE WHEN g % 5 = 1 THEN NULL ELSE (g % 100000) * 1.37 END,
               CASE WHEN g % 5 = 2 THEN NULL ELSE (g % 50) * 0.5 END,
               CASE WHEN g % 5 = 3 THEN NULL ELSE 'deliver to the back door, ring twice: ' || md5((g * 7)::text) END,
               timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds',
               CASE WHEN g % 5 = 4 THEN NULL ELSE timestamptz '2024-01-02 00:00:00+00' + g * interval '19 seconds' END,
               CASE WHEN g % 5 = 0 THEN NULL ELSE g % 12 + 1 END,
               CASE WHEN g % 5 = 1 THEN NULL ELSE g / 7.0 END,
               CASE WHEN g % 5 = 2 THEN NULL ELSE g % 3 = 0 END,
               CASE WHEN g % 5 = 3 THEN NULL ELSE jsonb_build_object(
                 'sku', 'SKU-' || (g % 9973), 'channel', 'web', 'coupon', md5(g::text),
                 'address', jsonb_build_object('street', (g % 400) || ' Main Street', 'city', 'Springfield', 'zip', lpad((g % 99999)::text, 5, '0'), 'country', 'US'),
                 'items', jsonb_build_array(jsonb_build_object('sku', g % 101, 'qty', 1 + g % 3, 'price', (g % 1000) * 0.99),
                                            jsonb_build_object('sku', g % 103, 'qty', 2, 'price', (g % 700) * 1.49)),
                 'flags', jsonb_build_array('fragile', 'express')) END
             FROM generate_series(1, {rows}) g"
        ))
        .await
        .unwrap();
        pg.batch_execute("VACUUM ANALYZE").await.unwrap();
        let width: i64 = pg
            .query_one("SELECT avg(pg_column_size(o.*))::bigint FROM (SELECT * FROM bench.orders LIMIT 10000) o", &[])
            .await
            .unwrap()
            .get(0);
        let json: i64 = pg
            .query_one("SELECT avg(octet_length(payload::text))::bigint FROM (SELECT payload FROM bench.orders LIMIT 10000) o", &[])
            .await
            .unwrap()
            .get(0);
        eprintln!("average row {width} bytes, payload {json} bytes of JSON text");
        let tmp = tempfile::tempdir().unwrap();

        // Snapshot rounds, alternating: COPY text, COPY binary, the source into
        // Arrow, the whole sync into Iceberg.
        let (mut copy, mut binary, mut arrow, mut lake) = (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
        for round in 0..rounds {
            copy = copy.min(psql_copy(port, "COPY bench.orders TO STDOUT"));
            binary = binary.min(psql_copy(port, "COPY bench.orders TO STDOUT (FORMAT binary)"));
            let dir = tmp.path().join(format!("arrow{round}"));
            let slot = format!("arrow{round}");
            let (_, src) = parse_job(&job_text(port, &slot, &dir), |_| None).unwrap();
            let c0 = cpu(false);
            let (n, secs) = drain(src, &dir).await;
            eprintln!("lakeshift -> Arrow: {secs:.2} s, {:.2} CPU s", cpu(false) - c0);
            assert_eq!(n as usize, rows, "every row read into Arrow");
            arrow = arrow.min(secs);
            drop_slot(&pg, &slot).await;
            let dir = tmp.path().join(format!("lake{round}"));
            let slot = format!("lake{round}");
            let job = runner::sync::job::parse(&job_text(port, &slot, &dir), |_| None).unwrap();
            let t0 = Instant::now();
            let c0 = cpu(false);
            sync_once(&job).await;
            let secs = t0.elapsed().as_secs_f64();
            eprintln!("lakeshift -> Iceberg: {secs:.2} s, {:.2} CPU s", cpu(false) - c0);
            lake = lake.min(secs);
            assert_eq!(lake_facts(&dir).await, source_facts(&pg).await, "the lake holds the table");
            if round + 1 < rounds {
                drop_slot(&pg, &slot).await;
            }
        }
        eprintln!("snapshot seconds: COPY text {copy:.2}, binary {binary:.2}, lakeshift -> Arrow {arrow:.2}, -> Iceberg {lake:.2}");
        if std::env::var("LAKESHIFT_BENCH_ONLY").is_ok_and(|v| v == "snapshot") {
            return;
        }
        let last = rounds - 1;
        let lake_dir = tmp.path().join(format!("lake{last}"));
        let job = runner::sync::job::parse(&job_text(port, &format!("lake{last}"), &lake_dir), |_| None).unwrap();

        // The backlog, under REPLICA IDENTITY FULL (old images of every column).
        pg.batch_execute("ALTER TABLE bench.orders REPLICA IDENTITY FULL")
            .await
            .unwrap();
        pg.batch_execute("SELECT pg_create_logical_replication_slot('td', 'test_decoding')")
            .await
            .unwrap();
        eprintln!("preparing a backlog of {changes} row changes (70% updates, 20% inserts, 10% deletes)...");
        let per_txn = 1000i64;
        let (mut done, mut k) = (0usize, 0i64);
        let mut next_id = rows as i64 + 1;
        while done < changes {
            let lo = (k * 7919 * per_txn) % (rows as i64 - per_txn);
            let sql = match k % 10 {
                0..=6 => format!("UPDATE bench.orders SET status = 'shipped', shipped_at = now(), amount = coalesce(amount, 0) + 1 WHERE id > {lo} AND id <= {}", lo + per_txn),
                7 | 8 => {
                    next_id += per_txn;
                    format!("INSERT INTO bench.orders (id, customer_id, ref, status, amount, note, created_at, payload)
                             SELECT g, 1 + g % 10000, md5(g::text)::uuid, 'new', 9.99, 'new order', now(), '{{\"sku\": \"SKU-1\", \"channel\": \"app\"}}'
                             FROM generate_series({}, {}) g", next_id - per_txn, next_id - 1)
                }
                _ => format!("DELETE FROM bench.orders WHERE id > {lo} AND id <= {}", lo + per_txn / 2),
            };
            done += pg.execute(sql.as_str(), &[]).await.unwrap() as usize;
            k += 1;
        }
        let end: String = pg.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
        let c0 = cpu(true);
        let t0 = Instant::now();
        let st = Command::new(pg_bin("pg_recvlogical"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", "-d", "bench"])
            .args(["--slot", "td", "--start", "--endpos", &end, "-f", "/dev/null", "--no-loop"])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "pg_recvlogical ran");
        let recv_secs = t0.elapsed().as_secs_f64();
        let recv_cpu = cpu(true) - c0;
        let c0 = cpu(false);
        let t0 = Instant::now();
        let synced = sync_once(&job).await;
        let sync_secs = t0.elapsed().as_secs_f64();
        let sync_cpu = cpu(false) - c0;
        assert_eq!(synced as usize, done, "every row change synced");
        assert_eq!(lake_facts(&lake_dir).await, source_facts(&pg).await, "the lake holds the table");

        println!();
        println!("bench.orders: {rows} rows, about {width} bytes a row (payload {json} bytes of JSON text); fastest of {rounds} alternating rounds");
        println!();
        println!("| snapshot | seconds | rows/s | speed vs COPY text |");
        println!("|---|---:|---:|---:|");
        let line = |what: &str, secs: f64| {
            println!("| {what} | {secs:.2} | {:.0} | {:.2}x |", rows as f64 / secs, copy / secs);
        };
        line("psql COPY bench.orders TO STDOUT -> /dev/null (baseline)", copy);
        line("psql COPY ... (FORMAT binary) -> /dev/null", binary);
        line("lakeshift snapshot -> Arrow (the source alone)", arrow);
        line("lakeshift sync -> Iceberg (slot, copy, Parquet, commit)", lake);
        println!();
        println!("| catch-up, {done} row changes, REPLICA IDENTITY FULL | wall s | CPU s | speed vs baseline | CPU vs baseline |");
        println!("|---|---:|---:|---:|---:|");
        println!("| pg_recvlogical, test_decoding -> /dev/null (baseline) | {recv_secs:.2} | {recv_cpu:.2} | 1.00x | 1.00x |");
        println!(
            "| lakeshift sync -> Iceberg (position deletes) | {sync_secs:.2} | {sync_cpu:.2} | {:.2}x | {:.2}x |",
            recv_secs / sync_secs,
            sync_cpu / recv_cpu
        );
    });
}
