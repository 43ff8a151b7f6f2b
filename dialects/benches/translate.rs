//! Statements/s of `translate` (MySQL -> PostgreSQL, the whole pipeline: split, parse,
//! catalog, emit) against sqlparser's bare parse of the same text, in the same run.
//! Report the ratio of the two times (goal: translate at >= 0.8x the bare parse rate).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dialects::translate::{Target, Translator};
use dialects::Dialect;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

/// A schema history sqlparser also parses: CREATE TABLEs and simple ALTERs.
fn corpus(tables: usize) -> (String, u64) {
    let mut s = String::new();
    let mut n = 0;
    for i in 0..tables {
        s.push_str(&format!(
            "CREATE TABLE t{i} (\n  id bigint unsigned NOT NULL AUTO_INCREMENT COMMENT 'pk',\n  name varchar(64) NOT NULL DEFAULT '',\n  price decimal(10,2) DEFAULT NULL,\n  created datetime(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),\n  status enum('a','b','c') DEFAULT 'a',\n  body text,\n  PRIMARY KEY (id),\n  KEY idx_name (name)\n);\nALTER TABLE t{i} ADD COLUMN extra int NOT NULL DEFAULT 0;\nALTER TABLE t{i} DROP COLUMN body;\nALTER TABLE t{i} RENAME COLUMN extra TO extra2;\n"
        ));
        n += 4;
    }
    (s, n)
}

fn bench(c: &mut Criterion) {
    // Two sizes: the ratio should not fall as the schema grows.
    for tables in [200, 1000] {
        let (text, n) = corpus(tables);
        assert_eq!(
            Parser::parse_sql(&MySqlDialect {}, &text).unwrap().len() as u64,
            n
        );
        let mut g = c.benchmark_group(format!("ddl_{n}_statements"));
        g.throughput(Throughput::Elements(n));
        g.bench_function("sqlparser_parse", |b| {
            b.iter(|| Parser::parse_sql(&MySqlDialect {}, &text).unwrap())
        });
        g.bench_function("lakeshift_translate_mysql_to_postgres", |b| {
            b.iter(|| {
                let mut tr = Translator::new(Dialect::MySql, Target::Sql(Dialect::Postgres));
                let r = tr.translate(&text);
                assert_eq!(r.len() as u64, n);
                r
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
