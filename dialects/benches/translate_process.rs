//! `translate` as a whole process against sqlparser's bare parse as a whole process,
//! on one large MySQL schema history (CREATE TABLEs and ALTERs, ~9 MB), in one run:
//! each side is this binary started again (`--parse FILE`: read the file, parse it
//! with sqlparser, nothing else; `--translate FILE`: what `lakeshift translate
//! --from mysql --to postgres FILE > /dev/null` does: read as it goes, translate,
//! write each statement through a buffered stdout, diagnostics to stderr). Runs
//! alternate; the table gives each side's best and the ratio of rates (goal: translate
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

/// The child's work; prints the statement count.
fn child(mode: &str, path: &str) {
    match mode {
        "--parse" => {
            let text = std::fs::read_to_string(path).unwrap();
            let n =
                sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, &text)
                    .unwrap()
                    .len();
            println!("{n}");
        }
        _ => {
            let mut tr = Translator::new(Dialect::MySql, Target::Sql(Dialect::Postgres));
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let stderr = std::io::stderr();
            let mut err = stderr.lock();
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
        .position(|a| a == "--parse" || a == "--translate")
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
    let (text, n) = corpus(tables);
    let dir =
        std::env::temp_dir().join(format!("lakeshift-translate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("schema.sql");
    std::fs::write(&path, &text).unwrap();
    let path = path.display().to_string();
    // The outputs are checked once: every statement parsed, every one translated.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--translate", &path])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("statements {n}")),
        "{}",
        err.lines().last().unwrap_or("")
    );
    assert!(!err.contains("error:"), "translate reported errors");
    let (mut parse, mut translate) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        parse = parse.min(run("--parse", &path));
        translate = translate.min(run("--translate", &path));
    }
    let _ = std::fs::remove_dir_all(&dir);
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
}
