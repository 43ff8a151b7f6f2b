//! `translate` as a whole process against sqlparser's bare parse as a whole process,
//! in one run, on two kinds of MySQL schema history:
//! - one large history (CREATE TABLEs and ALTERs, ~9 MB);
//! - a multi-tenant one: the same 16-statement history (6 tables, keys, foreign keys,
//!   ALTERs, a rename) in each of N databases, at N = 25, 100, 400 and 1,600 (9,600
//!   tables): the time per statement must not grow with the tables already seen
//!   (goal: at 9,600 tables within 1.3x of that at 600, i.e. 1,600 vs 100 databases);
//! - the multi-tenant shape as pg_dump writes it, PostgreSQL -> MySQL (a schema per
//!   customer, foreign keys of the same names in each: 3,200 schemas, 9,600 tables).
//!
//! Each side is this binary started again (`--parse FILE`: read the file, parse it
//! with sqlparser, nothing else; `--translate FILE`: what `lakeshift translate
//! --from mysql --to postgres FILE > /dev/null` does: read as it goes, translate,
//! write each statement through a buffered stdout, diagnostics to stderr). Runs
//! alternate; the tables give each side's best and the ratio of rates (goal: translate
//! at >= 1.0x the bare parse).
//!
//!     cargo bench -p dialects --bench translate_process   (LAKESHIFT_BENCH_TABLES, 20000)

use dialects::translate::{Target, Translator};
use dialects::Dialect;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

fn corpus(tables: usize) -> (String, usize) {
    let mut s = String::new();
    for i in 0..tables {
        s.push_str(&format!(
            "CREATE TABLE t{i} (\n  id bigint unsigned NOT NULL AUTO_INCREMENT COMMENT 'pk',\n  name varchar(64) NOT NULL DEFAULT '',\n  price decimal(10,2) DEFAULT NULL,\n  created datetime(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),\n  status enum('a','b','c') DEFAULT 'a',\n  body text,\n  PRIMARY KEY (id),\n  KEY idx_name (name)\n);\nALTER TABLE t{i} ADD COLUMN extra int NOT NULL DEFAULT 0;\nALTER TABLE t{i} DROP COLUMN body;\nALTER TABLE t{i} RENAME COLUMN extra TO extra2;\n"
        ));
    }
    (s, tables * 4)
}

/// `dbs` databases, each with the same schema history: 16 statements, 6 tables.
fn tenants(dbs: usize) -> (String, usize) {
    let mut s = String::new();
    for d in 0..dbs {
        s.push_str(&format!(
            "CREATE DATABASE tenant{d};
USE tenant{d};
CREATE TABLE customers (id int NOT NULL AUTO_INCREMENT, name varchar(100) NOT NULL, email varchar(200) DEFAULT NULL, PRIMARY KEY (id), UNIQUE KEY email (email));
CREATE TABLE products (id int NOT NULL AUTO_INCREMENT, sku varchar(40) NOT NULL, price decimal(10,2) NOT NULL DEFAULT 0.00, PRIMARY KEY (id));
CREATE TABLE orders (id bigint NOT NULL AUTO_INCREMENT, customer_id int NOT NULL, placed datetime NOT NULL, status enum('new','paid','sent') NOT NULL DEFAULT 'new', PRIMARY KEY (id), KEY customer_id (customer_id), CONSTRAINT orders_customer FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE CASCADE);
CREATE TABLE order_lines (order_id bigint NOT NULL, line int NOT NULL, product_id int NOT NULL, qty int NOT NULL DEFAULT 1, PRIMARY KEY (order_id, line), CONSTRAINT lines_order FOREIGN KEY (order_id) REFERENCES orders (id), CONSTRAINT lines_product FOREIGN KEY (product_id) REFERENCES products (id));
CREATE TABLE payments (id bigint NOT NULL AUTO_INCREMENT, order_id bigint NOT NULL, amount decimal(12,2) NOT NULL, PRIMARY KEY (id), CONSTRAINT payments_order FOREIGN KEY (order_id) REFERENCES orders (id));
CREATE TABLE notes (id int NOT NULL AUTO_INCREMENT, body text, PRIMARY KEY (id));
ALTER TABLE customers ADD COLUMN phone varchar(30) DEFAULT NULL AFTER email;
ALTER TABLE products ADD COLUMN active tinyint(1) NOT NULL DEFAULT 1, ADD KEY sku (sku);
ALTER TABLE orders MODIFY status enum('new','paid','sent','returned') NOT NULL DEFAULT 'new';
ALTER TABLE order_lines ADD COLUMN price decimal(10,2) DEFAULT NULL;
ALTER TABLE payments ADD COLUMN paid_at datetime DEFAULT NULL;
ALTER TABLE notes ADD COLUMN customer_id int DEFAULT NULL, ADD CONSTRAINT notes_customer FOREIGN KEY (customer_id) REFERENCES customers (id);
RENAME TABLE notes TO customer_notes;
ALTER TABLE customers DROP COLUMN phone;
"
        ));
    }
    (s, dbs * 16)
}

/// The multi-tenant shape as pg_dump writes it, a schema per customer: 12
/// statements and 3 tables a schema, keys added after the tables, foreign keys and
/// CHECKs of the same names in every schema (PostgreSQL -> MySQL, where each schema
/// is a database and foreign-key names are per database).
fn pg_tenants(schemas: usize) -> (String, usize) {
    let mut s = String::new();
    for d in 0..schemas {
        s.push_str(&format!(
            "CREATE SCHEMA tenant{d};
CREATE TABLE tenant{d}.customers (id bigint NOT NULL, name character varying NOT NULL, email character varying);
CREATE TABLE tenant{d}.orders (id bigint NOT NULL, customer_id bigint NOT NULL, total numeric(12,2), status character varying NOT NULL, CONSTRAINT status_check CHECK (((status)::text = ANY ((ARRAY['new'::character varying, 'paid'::character varying])::text[]))));
CREATE TABLE tenant{d}.items (order_id bigint NOT NULL, sku character varying NOT NULL, qty integer);
ALTER TABLE ONLY tenant{d}.customers ADD CONSTRAINT customers_pkey PRIMARY KEY (id);
ALTER TABLE ONLY tenant{d}.orders ADD CONSTRAINT orders_pkey PRIMARY KEY (id);
ALTER TABLE ONLY tenant{d}.items ADD CONSTRAINT items_pkey PRIMARY KEY (order_id, sku);
CREATE UNIQUE INDEX customers_email ON tenant{d}.customers USING btree (email);
ALTER TABLE ONLY tenant{d}.orders ADD CONSTRAINT customer_id_fkey FOREIGN KEY (customer_id) REFERENCES tenant{d}.customers(id);
ALTER TABLE ONLY tenant{d}.items ADD CONSTRAINT order_id_fkey FOREIGN KEY (order_id) REFERENCES tenant{d}.orders(id) ON DELETE CASCADE;
ALTER TABLE tenant{d}.orders ADD COLUMN note text;
ALTER TABLE tenant{d}.items ADD CONSTRAINT qty_pos CHECK (qty > 0);
"
        ));
    }
    (s, schemas * 12)
}

/// The child's work; prints the statement count.
fn child(mode: &str, path: &str) {
    let pg = mode.ends_with("-pg");
    match mode {
        "--parse" | "--parse-pg" => {
            let text = std::fs::read_to_string(path).unwrap();
            let n = if pg {
                sqlparser::parser::Parser::parse_sql(
                    &sqlparser::dialect::PostgreSqlDialect {},
                    &text,
                )
            } else {
                sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, &text)
            }
            .unwrap()
            .len();
            println!("{n}");
        }
        _ => {
            let mut tr = if pg {
                Translator::new(Dialect::Postgres, Target::Sql(Dialect::MySql))
            } else {
                Translator::new(Dialect::MySql, Target::Sql(Dialect::Postgres))
            };
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let stderr = std::io::stderr();
            let mut err = std::io::BufWriter::new(stderr.lock());
            let mut n = 0usize;
            tr.translate_reader(std::fs::File::open(path).unwrap(), |r| {
                n += 1;
                for (l, c, d) in &r.diagnostics {
                    let _ = writeln!(err, "{}: {path}:{l}:{c}: {}", d.severity, d.message);
                }
                for s in &r.output {
                    let _ = writeln!(out, "{s};");
                }
            })
            .unwrap();
            out.flush().unwrap();
            drop(out);
            // (As `lakeshift translate` does: the process ends, its catalog with it.)
            std::mem::forget(tr);
            eprintln!("statements {n}");
        }
    }
}

fn run(mode: &str, path: &str) -> f64 {
    let t0 = Instant::now();
    let st = Command::new(std::env::current_exe().unwrap())
        .args([mode, path])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{mode} failed");
    t0.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args
        .iter()
        .position(|a| a.starts_with("--parse") || a.starts_with("--translate"))
    {
        child(&args[i], &args[i + 1]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let tables: usize = std::env::var("LAKESHIFT_BENCH_TABLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let dir =
        std::env::temp_dir().join(format!("lakeshift-translate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (text, n) = corpus(tables);
    let (parse, translate) = measure(&dir, &text, n, 5, false);
    println!();
    println!(
        "{n} statements, {} MB, best of 5 alternating runs, each a process of its own",
        text.len() >> 20
    );
    println!("| process | seconds | statements/s | rate vs bare parse |");
    println!("|---|---:|---:|---:|");
    println!(
        "| sqlparser bare parse (read + parse_sql) | {parse:.3} | {:.0} | 1.00x |",
        n as f64 / parse
    );
    println!(
        "| lakeshift translate mysql -> postgres (read, parse, catalog, emit, write) | {translate:.3} | {:.0} | {:.2}x |",
        n as f64 / translate,
        parse / translate
    );
    // Multi-tenant: the cost per statement as the tables already seen grow.
    let mut rows = Vec::new();
    for dbs in [25, 100, 400, 1_600] {
        let (text, n) = tenants(dbs);
        let (parse, translate) = measure(&dir, &text, n, 3, false);
        rows.push((dbs, n, parse, translate));
    }
    let base = rows
        .iter()
        .find(|r| r.0 == 100)
        .map(|r| r.3 / r.1 as f64)
        .expect("100 databases measured");
    println!();
    println!(
        "the same 16-statement history in N databases (6 tables each), best of 3 alternating runs"
    );
    println!("| databases | tables | statements | parse us/statement | translate us/statement | rate vs bare parse | translate us/statement vs 100 databases |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (dbs, n, parse, translate) in rows {
        let per = translate / n as f64;
        println!(
            "| {dbs} | {} | {n} | {:.1} | {:.1} | {:.2}x | {:.2}x |",
            dbs * 6,
            parse / n as f64 * 1e6,
            per * 1e6,
            parse / translate,
            per / base
        );
    }
    // The same as pg_dump writes it, PostgreSQL -> MySQL (schemas as databases,
    // foreign-key names per database).
    let mut rows = Vec::new();
    for schemas in [50, 200, 800, 3_200] {
        let (text, n) = pg_tenants(schemas);
        let (parse, translate) = measure(&dir, &text, n, 3, true);
        rows.push((schemas, n, parse, translate));
    }
    let base = rows[1].3 / rows[1].1 as f64;
    println!();
    println!("a 12-statement pg_dump history in N schemas (3 tables each), postgres -> mysql, best of 3 alternating runs");
    println!("| schemas | tables | statements | parse us/statement | translate us/statement | rate vs bare parse | translate us/statement vs 200 schemas |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (schemas, n, parse, translate) in rows {
        let per = translate / n as f64;
        println!(
            "| {schemas} | {} | {n} | {:.1} | {:.1} | {:.2}x | {:.2}x |",
            schemas * 3,
            parse / n as f64 * 1e6,
            per * 1e6,
            parse / translate,
            per / base
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The best seconds of `rounds` alternating runs of the bare parse and of translate
/// over `text` (`n` statements), each a process of its own; translate's output is
/// checked first (every statement read, none an error).
fn measure(dir: &std::path::Path, text: &str, n: usize, rounds: usize, pg: bool) -> (f64, f64) {
    let (parse_mode, translate_mode) = if pg {
        ("--parse-pg", "--translate-pg")
    } else {
        ("--parse", "--translate")
    };
    let path = dir.join("schema.sql");
    std::fs::write(&path, text).unwrap();
    let path = path.display().to_string();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([translate_mode, &path])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("statements {n}")),
        "{}",
        err.lines().last().unwrap_or("")
    );
    assert!(!err.contains("error:"), "translate reported errors: {err}");
    let (mut parse, mut translate) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        parse = parse.min(run(parse_mode, &path));
        translate = translate.min(run(translate_mode, &path));
    }
    (parse, translate)
}
