//! How `translate` grows with its input: nesting depth, columns in one table, ALTERs of
//! one table, and the size of a dump, each at two sizes. Prints a table of time and
//! peak memory per case and the ratio between the two sizes (2.0 for twice the input
//! is linear; 4.0 would be quadratic).
//!
//! Each case runs in a child process of this binary, so its peak RSS (VmHWM) is its
//! own. The input is generated into a temporary file and translated as it is read
//! (`Translator::translate_reader`), as `lakeshift translate FILE` does; output goes
//! to a sink.
//!
//!     cargo bench -p dialects --bench growth   (LAKESHIFT_GROWTH_ONLY=text: some cases)

use dialects::translate::{Target, Translator};
use dialects::Dialect;
use std::io::{BufWriter, Write};
use std::time::Instant;

const CASES: &[(&str, [usize; 2])] = &[
    ("nested parentheses", [500_000, 1_000_000]),
    ("columns in one table", [50_000, 100_000]),
    ("ALTER ... MODIFY of one table", [10_000, 20_000]),
    ("ALTER ... ADD COLUMN to one table", [10_000, 20_000]),
    ("dump MiB (tables with keys)", [25, 50]),
    ("tables planned into Iceberg", [2_500, 5_000]),
];

fn generate(case: &str, n: usize, w: &mut impl Write) -> std::io::Result<()> {
    match case {
        "nested parentheses" => {
            write!(w, "CREATE TABLE t (a int DEFAULT ")?;
            for _ in 0..n {
                w.write_all(b"(")?;
            }
            w.write_all(b"1")?;
            for _ in 0..n {
                w.write_all(b")")?;
            }
            writeln!(w, ");")
        }
        "columns in one table" => {
            write!(w, "CREATE TABLE t (id int PRIMARY KEY")?;
            for i in 0..n {
                write!(w, ", c{i} varchar(20) NOT NULL DEFAULT 'x'")?;
            }
            writeln!(w, ");")
        }
        "ALTER ... MODIFY of one table" => {
            writeln!(w, "CREATE TABLE t (id int PRIMARY KEY, c0 int);")?;
            for i in 0..n {
                writeln!(w, "ALTER TABLE t MODIFY c0 bigint NULL DEFAULT {i};")?;
            }
            Ok(())
        }
        "ALTER ... ADD COLUMN to one table" => {
            writeln!(w, "CREATE TABLE t (id int PRIMARY KEY);")?;
            for i in 0..n {
                writeln!(w, "ALTER TABLE t ADD COLUMN c{i} int NOT NULL DEFAULT 0;")?;
            }
            Ok(())
        }
        "dump MiB (tables with keys)" => {
            // mariadb-dump's shape: a table, then its rows as multi-row INSERTs
            // (skipped by translate, but read).
            let target = n << 20;
            let mut written = 0;
            let mut t = 0;
            while written < target {
                let ddl = format!(
                    "DROP TABLE IF EXISTS `t{t}`;\nCREATE TABLE `t{t}` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `parent` int(11) DEFAULT NULL,\n  `name` varchar(64) NOT NULL DEFAULT '',\n  `price` decimal(10,2) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k_name` (`name`),\n  CONSTRAINT `fk_{t}` FOREIGN KEY (`parent`) REFERENCES `t{t}` (`id`),\n  CONSTRAINT `ck_{t}` CHECK (`price` >= 0)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n"
                );
                w.write_all(ddl.as_bytes())?;
                written += ddl.len();
                let mut rows = format!("INSERT INTO `t{t}` VALUES ");
                for r in 0..400 {
                    rows.push_str(&format!("({r},NULL,'row {r} of t{t}',{r}.50),"));
                }
                rows.pop();
                rows.push_str(";\n");
                w.write_all(rows.as_bytes())?;
                written += rows.len();
                t += 1;
            }
            Ok(())
        }
        "tables planned into Iceberg" => {
            for t in 0..n {
                writeln!(
                    w,
                    "CREATE TABLE t{t} (id bigint PRIMARY KEY, name varchar(64) NOT NULL, price decimal(10,2), at datetime);"
                )?;
            }
            Ok(())
        }
        _ => unreachable!("unknown case {case}"),
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// In the child: generate, translate, print "seconds rss_kib statements errors".
fn child(case: &str, n: usize) {
    let path = std::env::temp_dir().join(format!("lakeshift-growth-{}.sql", std::process::id()));
    {
        let f = std::fs::File::create(&path).expect("temp file");
        let mut w = BufWriter::new(f);
        generate(case, n, &mut w).expect("generate");
        w.flush().expect("flush");
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let f = std::fs::File::open(&path).expect("open");
    let target = if case.contains("Iceberg") {
        Target::Iceberg
    } else {
        Target::Sql(Dialect::Postgres)
    };
    let mut tr = Translator::new(Dialect::MySql, target);
    let mut out = std::io::sink();
    let (mut statements, mut errors) = (0usize, 0usize);
    let start = Instant::now();
    tr.translate_reader(f, |r| {
        statements += 1;
        if r.failed() {
            errors += 1;
        }
        for s in &r.output {
            let _ = writeln!(out, "{s};");
        }
    })
    .expect("read");
    let secs = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    println!("{secs} {} {statements} {errors} {bytes}", peak_rss_kib());
}

fn main() {
    if let Ok(spec) = std::env::var("LAKESHIFT_GROWTH_CASE") {
        let (case, n) = spec.rsplit_once('=').expect("case=n");
        child(case, n.parse().expect("size"));
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    println!(
        "{:<36} {:>10} {:>10} {:>9} {:>11} {:>7} {:>7}",
        "case", "size", "input MiB", "seconds", "peak MiB", "time x", "mem x"
    );
    // LAKESHIFT_GROWTH_ONLY=text: only the cases whose name holds it.
    let only = std::env::var("LAKESHIFT_GROWTH_ONLY").unwrap_or_default();
    for (case, sizes) in CASES.iter().filter(|(c, _)| c.contains(only.as_str())) {
        let mut prev: Option<(f64, f64)> = None;
        for n in sizes {
            let out = std::process::Command::new(&exe)
                .env("LAKESHIFT_GROWTH_CASE", format!("{case}={n}"))
                .output()
                .expect("child runs");
            assert!(
                out.status.success(),
                "{case} {n}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout);
            let v: Vec<f64> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect();
            let (secs, rss, errors, bytes) = (v[0], v[1] / 1024.0, v[3], v[4]);
            assert_eq!(errors, 0.0, "{case} {n}: statements failed");
            let (tx, mx) = match prev {
                Some((t0, m0)) => (format!("{:.2}", secs / t0), format!("{:.2}", rss / m0)),
                None => ("".into(), "".into()),
            };
            println!(
                "{:<36} {:>10} {:>10.1} {:>9.3} {:>11.1} {:>7} {:>7}",
                case,
                n,
                bytes / 1048576.0,
                secs,
                rss,
                tx,
                mx
            );
            prev = Some((secs, rss));
        }
    }
}
