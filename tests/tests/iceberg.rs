//! The Iceberg target against a real SQL catalog (SQLite, and a throwaway PostgreSQL),
//! read back with the iceberg crate's own SqlCatalog and scans.

use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use ddl_core::SchemaChangeBehavior;
use dialects::iceberg::IcebergOptions;
use dialects::Dialect;
use iceberg::{Catalog as _, CatalogBuilder, TableIdent};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalog, SqlCatalogBuilder};
use runner::apply::{apply, ApplyOptions, ApplyReport};
use runner::iceberg::catalog::ident;
use runner::iceberg::commit::{live_files, Change, SnapshotChange, COMMIT_ID};
use runner::iceberg::{files, Catalog, CatalogConfig, Committer, Error};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

struct Run {
    report: ApplyReport,
    out: String,
    err: String,
}

async fn run(cfg: &CatalogConfig, behavior: SchemaChangeBehavior, sql: &str) -> Run {
    let opts = ApplyOptions {
        source: Dialect::MySql,
        catalog: cfg.clone(),
        iceberg: IcebergOptions {
            behavior,
            ..Default::default()
        },
        ansi_quotes: false,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let report = apply(&opts, &[("t.sql".into(), sql.into())], &mut out, &mut err)
        .await
        .unwrap_or_else(|e| panic!("apply: {e}"));
    Run {
        report,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

async fn ok(cfg: &CatalogConfig, sql: &str) -> Run {
    let r = run(cfg, SchemaChangeBehavior::Exception, sql).await;
    assert!(!r.report.failed, "apply failed:\n{}\n{}", r.out, r.err);
    r
}

/// The iceberg crate's own SQL catalog over the same database: proves the layout.
async fn reader(cfg: &CatalogConfig, uri: &str, bind: SqlBindStyle) -> SqlCatalog {
    let props = HashMap::from([
        ("uri".to_string(), uri.to_string()),
        (
            "warehouse".to_string(),
            format!("file://{}", cfg.warehouse.display()),
        ),
        ("sql_bind_style".to_string(), bind.to_string()),
    ]);
    SqlCatalogBuilder::default()
        .with_storage_factory(Arc::new(iceberg::io::LocalFsStorageFactory))
        .load(&cfg.name, props)
        .await
        .expect("iceberg-catalog-sql opens the catalog")
}

fn sqlite_uri(dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", dir.join("catalog.db").display())
}

fn tid(ns: &str, t: &str) -> TableIdent {
    TableIdent::from_strs([ns, t]).unwrap()
}

/// (id, name, type, required) of the current schema.
fn fields(t: &iceberg::table::Table) -> Vec<(i32, String, String, bool)> {
    t.metadata()
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let ty = runner::iceberg::convert::ice_type(&f.field_type).unwrap();
            (f.id, f.name.clone(), ty.to_string(), f.required)
        })
        .collect()
}

fn field_id(t: &iceberg::table::Table, name: &str) -> i32 {
    t.metadata()
        .current_schema()
        .field_by_name(name)
        .unwrap_or_else(|| panic!("no field {name}: {:?}", fields(t)))
        .id
}

const SHOP: &str = "
CREATE TABLE shop.orders (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  flag TINYINT(1) NOT NULL,
  qty INT COMMENT 'how many',
  price DECIMAL(10,2),
  ratio FLOAT,
  note VARCHAR(20),
  at DATETIME(3),
  ts TIMESTAMP NULL
) COMMENT 'all orders';
";

async fn evolution_on(cfg: &CatalogConfig, uri: &str, bind: SqlBindStyle) {
    let r = ok(cfg, SHOP).await;
    assert!(r.out.contains("created table shop.orders"), "{}", r.out);
    let cat = reader(cfg, uri, bind).await;
    let t = cat.load_table(&tid("shop", "orders")).await.unwrap();
    assert_eq!(
        fields(&t),
        vec![
            (1, "id".into(), "decimal(20,0)".into(), true),
            (2, "flag".into(), "boolean".into(), true),
            (3, "qty".into(), "int".into(), false),
            (4, "price".into(), "decimal(10,2)".into(), false),
            (5, "ratio".into(), "float".into(), false),
            (6, "note".into(), "string".into(), false),
            (7, "at".into(), "timestamp".into(), false),
            (8, "ts".into(), "timestamptz".into(), false),
        ]
    );
    let s = t.metadata().current_schema();
    assert_eq!(s.identifier_field_ids().collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        s.field_by_name("qty").unwrap().doc.as_deref(),
        Some("how many")
    );
    assert_eq!(
        t.metadata().properties().get("comment").map(String::as_str),
        Some("all orders")
    );
    assert_eq!(
        t.metadata()
            .properties()
            .get("write.parquet.compression-codec")
            .map(String::as_str),
        Some("zstd")
    );

    // Rename keeps the id; promotions change the type in place; a string length
    // change is a no-op; position FIRST/AFTER; drop then re-add gets a new id.
    ok(
        cfg,
        "ALTER TABLE shop.orders CHANGE qty quantity BIGINT COMMENT 'how many', MODIFY price DECIMAL(14,2), MODIFY ratio DOUBLE, MODIFY note VARCHAR(200);
         ALTER TABLE shop.orders ADD COLUMN first_col INT FIRST, ADD COLUMN after_flag VARCHAR(5) AFTER flag;
         ALTER TABLE shop.orders DROP COLUMN note;
         ALTER TABLE shop.orders ADD COLUMN note TEXT;
         ALTER TABLE shop.orders MODIFY flag TINYINT(1) NULL COMMENT 'is set';
         ALTER TABLE shop.orders COMMENT 'every order';",
    )
    .await;
    let t = cat.load_table(&tid("shop", "orders")).await.unwrap();
    let f = fields(&t);
    assert_eq!(f[0], (9, "first_col".into(), "int".into(), false));
    assert_eq!(f[1], (1, "id".into(), "decimal(20,0)".into(), true));
    assert_eq!(f[2], (2, "flag".into(), "boolean".into(), false));
    assert_eq!(f[3], (10, "after_flag".into(), "string".into(), false));
    assert_eq!(f[4], (3, "quantity".into(), "long".into(), false));
    assert_eq!(f[5], (4, "price".into(), "decimal(14,2)".into(), false));
    assert_eq!(f[6], (5, "ratio".into(), "double".into(), false));
    assert_eq!(field_id(&t, "note"), 11, "a re-added column gets a new id");
    assert_eq!(t.metadata().last_column_id(), 11);
    let s = t.metadata().current_schema();
    assert_eq!(
        s.field_by_name("flag").unwrap().doc.as_deref(),
        Some("is set")
    );
    assert_eq!(
        t.metadata().properties().get("comment").map(String::as_str),
        Some("every order")
    );

    // Primary-key change: identifier fields follow.
    ok(
        cfg,
        "ALTER TABLE shop.orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, quantity);",
    )
    .await;
    let t = cat.load_table(&tid("shop", "orders")).await.unwrap();
    let mut ids: Vec<i32> = t
        .metadata()
        .current_schema()
        .identifier_field_ids()
        .collect();
    ids.sort();
    assert_eq!(ids, vec![1, 3]);
    assert!(
        t.metadata()
            .current_schema()
            .field_by_name("quantity")
            .unwrap()
            .required
    );

    // Rename and drop of tables; a new table under the old name gets its own folder.
    ok(
        cfg,
        "RENAME TABLE shop.orders TO shop.orders_2024;
         CREATE TABLE shop.orders (id INT PRIMARY KEY);
         CREATE TABLE shop.tmp (id INT);
         DROP TABLE shop.tmp;",
    )
    .await;
    let renamed = cat.load_table(&tid("shop", "orders_2024")).await.unwrap();
    assert_eq!(field_id(&renamed, "quantity"), 3);
    let fresh = cat.load_table(&tid("shop", "orders")).await.unwrap();
    assert_ne!(fresh.metadata().location(), renamed.metadata().location());
    assert!(!cat.table_exists(&tid("shop", "tmp")).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evolution_keeps_field_ids_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = CatalogConfig::local(dir.path());
    evolution_on(&cfg, &sqlite_uri(dir.path()), SqlBindStyle::QMark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evolution_keeps_field_ids_postgres_catalog() {
    let pg = lakeshift_tests::PgServer::start().await;
    pg.create_db("catalog").await;
    let uri = format!("postgresql://postgres@127.0.0.1:{}/catalog", pg.port);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = CatalogConfig::local(dir.path());
    cfg.uri = Some(uri.clone());
    evolution_on(&cfg, &uri, SqlBindStyle::DollarNumeric).await;
}

/// Every file under the warehouse with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_none_or(|x| x != "db") {
                out.insert(p.display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_changes_follow_the_policy() {
    let setup = "CREATE TABLE s.t (id INT NOT NULL PRIMARY KEY, amount BIGINT, code INT, opt INT);";
    // A table with rows: nullability tightening is refused there, not on empty tables.
    async fn with_rows(cfg: &CatalogConfig) {
        let cat = Catalog::open(cfg).await.unwrap();
        let id = ident("s", "t").unwrap();
        let t = cat.load_required(&id).await.unwrap();
        let schema = files::arrow_schema(&t).unwrap();
        let n = schema.fields().len();
        let mut cols: Vec<Arc<dyn Array>> = vec![Arc::new(Int32Array::from(vec![1, 2]))];
        for f in schema.fields().iter().skip(1) {
            cols.push(arrow_array::new_null_array(f.data_type(), 2));
        }
        assert_eq!(cols.len(), n);
        let batch = RecordBatch::try_new(schema, cols).unwrap();
        let data = files::write_data(&t, &cat.file_io, &[batch]).await.unwrap();
        append(&cat, &id, "rows", data).await;
    }
    let narrowing = "ALTER TABLE s.t MODIFY amount INT;";
    let family = "ALTER TABLE s.t MODIFY code VARCHAR(10);";
    let tighten = "ALTER TABLE s.t MODIFY opt INT NOT NULL;";

    // exception: a clear error, nothing committed, the table byte for byte as it was.
    let dir = tempfile::tempdir().unwrap();
    let cfg = CatalogConfig::local(dir.path());
    ok(&cfg, setup).await;
    with_rows(&cfg).await;
    let cat = Catalog::open(&cfg).await.unwrap();
    let id = ident("s", "t").unwrap();
    let before_loc = cat.metadata_location(&id).await.unwrap();
    let before = tree(dir.path());
    for (sql, words) in [
        (narrowing, ["amount", "long -> int", "narrowing"]),
        (family, ["code", "int -> string", "family"]),
        (tighten, ["opt", "optional -> required", "rows"]),
    ] {
        let r = run(&cfg, SchemaChangeBehavior::Exception, sql).await;
        assert!(r.report.failed, "{sql} must be refused");
        for w in words.iter().chain(&["s.t", "evolve", "lenient", "ignore"]) {
            assert!(r.err.contains(w), "error for {sql} lacks {w:?}: {}", r.err);
        }
        assert_eq!(cat.metadata_location(&id).await.unwrap(), before_loc);
        assert!(tree(dir.path()) == before, "{sql}: files changed");
    }

    let schema_after = |behavior: SchemaChangeBehavior| async move {
        let dir = tempfile::tempdir().unwrap();
        let cfg = CatalogConfig::local(dir.path());
        ok(&cfg, setup).await;
        with_rows(&cfg).await;
        for sql in [narrowing, family, tighten] {
            let r = run(&cfg, behavior, sql).await;
            assert!(!r.report.failed, "{behavior} {sql}: {}", r.err);
            assert!(
                r.err.contains("warning"),
                "{behavior} {sql} warns: {}",
                r.err
            );
        }
        let cat = Catalog::open(&cfg).await.unwrap();
        let t = cat
            .load_required(&ident("s", "t").unwrap())
            .await
            .unwrap()
            .table(&cat.file_io)
            .unwrap();
        (fields(&t), dir)
    };
    let (f, _d) = schema_after(SchemaChangeBehavior::Evolve).await;
    assert_eq!(
        f,
        vec![
            (1, "id".into(), "int".into(), true),
            (5, "amount".into(), "int".into(), false),
            (6, "code".into(), "string".into(), false),
            (4, "opt".into(), "int".into(), true),
        ],
        "evolve replaces columns and makes opt required"
    );
    let (f, _d) = schema_after(SchemaChangeBehavior::TryEvolve).await;
    assert_eq!(f[1], (5, "amount".into(), "int".into(), false));
    assert_eq!(
        f[3],
        (4, "opt".into(), "int".into(), false),
        "kept optional"
    );
    let (f, _d) = schema_after(SchemaChangeBehavior::Lenient).await;
    assert_eq!(
        f,
        vec![
            (1, "id".into(), "int".into(), true),
            (2, "amount".into(), "long".into(), false),
            (3, "code_old".into(), "int".into(), false),
            (5, "code".into(), "string".into(), false),
            (4, "opt".into(), "int".into(), false),
        ],
        "lenient keeps every existing value readable"
    );
    let (f, _d) = schema_after(SchemaChangeBehavior::Ignore).await;
    assert_eq!(
        f,
        vec![
            (1, "id".into(), "int".into(), true),
            (2, "amount".into(), "long".into(), false),
            (3, "code".into(), "int".into(), false),
            (4, "opt".into(), "int".into(), false),
        ]
    );

    // On a table without rows, NOT NULL is representable.
    let dir = tempfile::tempdir().unwrap();
    let cfg = CatalogConfig::local(dir.path());
    ok(&cfg, setup).await;
    ok(&cfg, tighten).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_defaults_are_reported_v3_defaults_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = CatalogConfig::local(dir.path());
    ok(&cfg, "CREATE TABLE d.t (id INT PRIMARY KEY);").await;
    let r = ok(&cfg, "ALTER TABLE d.t ALTER COLUMN id SET DEFAULT 5;").await;
    assert!(r.err.contains("format v3"), "{}", r.err);

    let opts = ApplyOptions {
        source: Dialect::MySql,
        catalog: cfg.clone(),
        iceberg: IcebergOptions {
            format_version: 3,
            ..Default::default()
        },
        ansi_quotes: false,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let rep = apply(
        &opts,
        &[(
            "v3.sql".into(),
            "CREATE TABLE d.v3 (id INT PRIMARY KEY, n INT DEFAULT 7); ALTER TABLE d.v3 ADD COLUMN m INT NOT NULL DEFAULT 3;".into(),
        )],
        &mut out,
        &mut err,
    )
    .await
    .unwrap();
    assert!(!rep.failed, "{}", String::from_utf8_lossy(&err));
    let cat = reader(&cfg, &sqlite_uri(dir.path()), SqlBindStyle::QMark).await;
    let t = cat.load_table(&tid("d", "v3")).await.unwrap();
    let s = t.metadata().current_schema();
    let n = s.field_by_name("n").unwrap();
    assert_eq!(n.write_default, Some(iceberg::spec::Literal::int(7)));
    let m = s.field_by_name("m").unwrap();
    assert_eq!(m.initial_default, Some(iceberg::spec::Literal::int(3)));
    assert!(m.required);
}

fn orders_batch(t: &runner::iceberg::LoadedTable, rows: &[(i64, &str, i32)]) -> RecordBatch {
    let schema = files::arrow_schema(t).unwrap();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

/// All rows of a table as (id, name, qty), sorted, through the iceberg crate's scan.
async fn scan(cat: &Catalog, id: &TableIdent) -> Vec<(i64, String, i32)> {
    let t = cat
        .load_required(id)
        .await
        .unwrap()
        .table(&cat.file_io)
        .unwrap();
    let batches = lakeshift_tests::scan_batches(&t, None).await;
    let mut rows = Vec::new();
    for b in batches {
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let names = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        let qty = b.column(2).as_any().downcast_ref::<Int32Array>().unwrap();
        for i in 0..b.num_rows() {
            rows.push((ids.value(i), names.value(i).to_owned(), qty.value(i)));
        }
    }
    rows.sort();
    rows
}

async fn orders_table(dir: &Path) -> (CatalogConfig, Catalog, TableIdent) {
    let cfg = CatalogConfig::local(dir);
    ok(
        &cfg,
        "CREATE TABLE app.orders (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL);",
    )
    .await;
    let cat = Catalog::open(&cfg).await.unwrap();
    (cfg, cat, ident("app", "orders").unwrap())
}

/// Commit `data` to a table as an append.
async fn append(
    cat: &Catalog,
    id: &TableIdent,
    commit_id: &str,
    data: Vec<iceberg::spec::DataFile>,
) -> runner::iceberg::commit::Committed {
    Committer::new(cat)
        .commit(
            id,
            commit_id,
            &Change::Snapshot(SnapshotChange {
                data_files: data,
                ..Default::default()
            }),
        )
        .await
        .unwrap()
}

/// How many of a table's snapshots were made by commits whose id `is`.
fn snapshots_committed(t: &runner::iceberg::LoadedTable, is: impl Fn(&str) -> bool) -> usize {
    t.metadata
        .snapshots()
        .filter(|s| {
            s.summary()
                .additional_properties
                .get(COMMIT_ID)
                .is_some_and(|c| is(c))
        })
        .count()
}

fn summary(t: &runner::iceberg::LoadedTable, key: &str) -> Option<String> {
    t.metadata
        .current_snapshot()
        .and_then(|s| s.summary().additional_properties.get(key).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_row_deltas_and_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let (_cfg, cat, id) = orders_table(dir.path()).await;
    let c = Committer::new(&cat);
    let t = cat.load_required(&id).await.unwrap();
    let data = files::write_data(
        &t,
        &cat.file_io,
        &[orders_batch(
            &t,
            &[(1, "a", 10), (2, "b", 20), (3, "c", 30)],
        )],
    )
    .await
    .unwrap();
    let first_file = data[0].file_path().to_owned();
    let done = c
        .commit(
            &id,
            "ckpt-1",
            &Change::Snapshot(SnapshotChange {
                data_files: data,
                summary: BTreeMap::from([
                    ("lakeshift.checkpoint-id".to_owned(), "1".to_owned()),
                    ("lakeshift.watermark".to_owned(), "0-1-42".to_owned()),
                ]),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    assert_eq!(
        summary(&done.table, "lakeshift.checkpoint-id").as_deref(),
        Some("1")
    );
    assert_eq!(summary(&done.table, COMMIT_ID).as_deref(), Some("ckpt-1"));
    assert_eq!(summary(&done.table, "total-records").as_deref(), Some("3"));
    let base = done.snapshot_id;

    // Row delta: update id 2 (equality delete + new row), delete id 3 by position
    // (row 2 of the first file), insert id 4.
    let t = done.table;
    let eq =
        files::write_equality_deletes(&t, &cat.file_io, &[1], &[orders_batch(&t, &[(2, "b", 20)])])
            .await
            .unwrap();
    let pos = files::write_position_deletes(&t, &cat.file_io, vec![(first_file.clone(), 2)])
        .await
        .unwrap();
    let new_rows = files::write_data(
        &t,
        &cat.file_io,
        &[orders_batch(&t, &[(2, "b2", 21), (4, "d", 40)])],
    )
    .await
    .unwrap();
    let done = c
        .commit(
            &id,
            "ckpt-2",
            &Change::Snapshot(SnapshotChange {
                data_files: new_rows,
                delete_files: eq.into_iter().chain(pos).collect(),
                base_snapshot: Some(base),
                referenced_data_files: vec![first_file.clone()],
                summary: BTreeMap::from([("lakeshift.checkpoint-id".to_owned(), "2".to_owned())]),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let s = done.table.metadata.current_snapshot().unwrap();
    assert_eq!(s.summary().operation, iceberg::spec::Operation::Overwrite);
    assert_eq!(
        summary(&done.table, "added-equality-delete-files").as_deref(),
        Some("1")
    );
    assert_eq!(
        summary(&done.table, "added-position-delete-files").as_deref(),
        Some("1")
    );
    assert_eq!(
        scan(&cat, &id).await,
        vec![
            (1, "a".into(), 10),
            (2, "b2".into(), 21),
            (4, "d".into(), 40)
        ]
    );

    // TRUNCATE through apply: a snapshot that removes every file.
    let r = ok(
        &CatalogConfig::local(dir.path()),
        "TRUNCATE TABLE app.orders;",
    )
    .await;
    assert!(r.out.contains("truncated table app.orders"), "{}", r.out);
    let t = cat.load_required(&id).await.unwrap();
    assert_eq!(
        t.metadata.current_snapshot().unwrap().summary().operation,
        iceberg::spec::Operation::Delete
    );
    assert_eq!(summary(&t, "total-records").as_deref(), Some("0"));
    assert_eq!(summary(&t, "deleted-data-files").as_deref(), Some("2"));
    assert!(live_files(&cat, &t).await.unwrap().is_empty());
    assert!(scan(&cat, &id).await.is_empty());
    // Older snapshots still read their rows (time travel).
    assert_eq!(t.metadata.snapshots().count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_delta_fails_when_its_base_moved() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, cat, id) = orders_table(dir.path()).await;
    let c = Committer::new(&cat);
    let t = cat.load_required(&id).await.unwrap();
    let data = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &[(1, "a", 1)])])
        .await
        .unwrap();
    let path = data[0].file_path().to_owned();
    let base = append(&cat, &id, "a", data).await;
    let t = base.table.clone();
    let pos = files::write_position_deletes(&t, &cat.file_io, vec![(path.clone(), 0)])
        .await
        .unwrap();
    let delta = Change::Snapshot(SnapshotChange {
        delete_files: pos,
        base_snapshot: Some(base.snapshot_id),
        referenced_data_files: vec![path],
        ..Default::default()
    });
    // A concurrent append does not stop it (appends are rebased over) ...
    let more = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &[(2, "b", 2)])])
        .await
        .unwrap();
    append(&cat, &id, "b", more).await;
    // ... a concurrent truncate does.
    ok(&cfg, "TRUNCATE TABLE app.orders;").await;
    let before = cat.metadata_location(&id).await.unwrap();
    let e = c.commit(&id, "delta", &delta).await.unwrap_err();
    assert!(matches!(e, Error::BaseMoved { .. }), "{e}");
    assert!(
        e.to_string().contains("app.orders") && e.to_string().contains("delete"),
        "{e}"
    );
    assert_eq!(cat.metadata_location(&id).await.unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_both_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, cat, id) = orders_table(dir.path()).await;
    // Two writers, each with its own catalog connection, racing on one table.
    let writer = |w: i64| {
        let cfg = cfg.clone();
        let id = id.clone();
        async move {
            let cat = Catalog::open(&cfg).await.unwrap();
            let c = Committer::new(&cat);
            let mut lost = 0;
            for i in 0..8 {
                let t = cat.load_required(&id).await.unwrap();
                let key = w * 100 + i;
                let data = files::write_data(
                    &t,
                    &cat.file_io,
                    &[orders_batch(&t, &[(key, "x", i as i32)])],
                )
                .await
                .unwrap();
                let done = c
                    .commit(
                        &id,
                        &format!("w{w}-{i}"),
                        &Change::Snapshot(SnapshotChange {
                            data_files: data,
                            ..Default::default()
                        }),
                    )
                    .await
                    .unwrap();
                lost += done.attempts - 1;
            }
            lost
        }
    };
    let (a, b) = tokio::join!(tokio::spawn(writer(1)), tokio::spawn(writer(2)));
    let lost = a.unwrap() + b.unwrap();
    let t = cat.load_required(&id).await.unwrap();
    let rows = scan(&cat, &id).await;
    assert_eq!(rows.len(), 16, "every commit landed");
    assert_eq!(summary(&t, "total-records").as_deref(), Some("16"));
    // One linear history: 16 snapshots, each the parent of the next, sequence numbers 1..16.
    let mut chain = Vec::new();
    let mut at = t.metadata.current_snapshot().map(|s| s.snapshot_id());
    while let Some(sid) = at {
        let s = t.metadata.snapshot_by_id(sid).unwrap();
        chain.push(s.sequence_number());
        at = s.parent_snapshot_id();
    }
    chain.reverse();
    assert_eq!(chain, (1..=16).collect::<Vec<i64>>());
    eprintln!("lost races retried: {lost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_is_not_applied_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (_cfg, cat, id) = orders_table(dir.path()).await;
    let t = cat.load_required(&id).await.unwrap();
    let data = files::write_data(
        &t,
        &cat.file_io,
        &[orders_batch(&t, &[(1, "a", 1), (2, "b", 2)])],
    )
    .await
    .unwrap();
    let change = Change::Snapshot(SnapshotChange {
        data_files: data,
        ..Default::default()
    });
    cat.lose_next_replies(1);
    let done = Committer::new(&cat)
        .commit(&id, "once", &change)
        .await
        .unwrap();
    assert!(
        done.recovered,
        "the committer saw its own commit after the lost reply"
    );
    let t = cat.load_required(&id).await.unwrap();
    let with_id = snapshots_committed(&t, |v| v == "once");
    assert_eq!(with_id, 1);
    assert_eq!(t.metadata.snapshots().count(), 1);
    assert_eq!(scan(&cat, &id).await.len(), 2);

    // Same for a schema commit (no snapshot): found by its metadata file.
    let mut planned = runner::iceberg::convert::ice_table("app", "orders", &t.metadata).unwrap();
    planned.fields.push(dialects::iceberg::IceField {
        id: 4,
        name: "extra".into(),
        required: false,
        ty: dialects::iceberg::IceType::Int,
        doc: None,
        initial_default: None,
        write_default: None,
    });
    planned.last_column_id = 4;
    let change = Change::Metadata(runner::iceberg::commit::MetadataChange {
        schema: Some(planned),
        expect_schema: Some((t.metadata.current_schema_id(), t.metadata.last_column_id())),
        ..Default::default()
    });
    cat.lose_next_replies(1);
    let done = Committer::new(&cat)
        .commit(&id, "schema-once", &change)
        .await
        .unwrap();
    assert!(done.recovered);
    let t = cat.load_required(&id).await.unwrap();
    assert_eq!(t.metadata.last_column_id(), 4, "the column was added once");
    assert_eq!(t.metadata.schemas_iter().count(), 2);
    // Retrying the same change now is refused: it was planned against the old schema.
    let e = Committer::new(&cat)
        .commit(&id, "schema-again", &change)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Stale { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_options_and_metadata_hygiene() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = CatalogConfig::local(dir.path());
    let mut iceberg = IcebergOptions::default();
    iceberg.layout.partitioning = dialects::iceberg::Partitioning::BucketPrimaryKey { buckets: 8 };
    iceberg.layout.sort_order = dialects::iceberg::SortOrder::PrimaryKey;
    iceberg.layout.target_file_size_bytes = 64 << 20;
    iceberg.layout.metadata_previous_versions_max = 5;
    let opts = ApplyOptions {
        source: Dialect::MySql,
        catalog: cfg.clone(),
        iceberg,
        ansi_quotes: false,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let rep = apply(
        &opts,
        &[(
            "l.sql".into(),
            "CREATE TABLE l.t (a INT NOT NULL, b VARCHAR(5) NOT NULL, c INT, PRIMARY KEY (a, b));"
                .into(),
        )],
        &mut out,
        &mut err,
    )
    .await
    .unwrap();
    assert!(!rep.failed, "{}", String::from_utf8_lossy(&err));
    let cat = Catalog::open(&cfg).await.unwrap();
    let id = ident("l", "t").unwrap();
    let t = cat.load_required(&id).await.unwrap();
    let spec = t.metadata.default_partition_spec();
    assert_eq!(spec.fields().len(), 1);
    assert_eq!(spec.fields()[0].source_id, 1);
    assert_eq!(
        spec.fields()[0].transform,
        iceberg::spec::Transform::Bucket(8)
    );
    let order = t.metadata.default_sort_order();
    assert_eq!(
        order.fields.iter().map(|f| f.source_id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let p = t.metadata.properties();
    assert_eq!(p["write.target-file-size-bytes"], (64u64 << 20).to_string());
    assert_eq!(p["write.metadata.delete-after-commit.enabled"], "true");

    // Many commits leave a bounded number of metadata files.
    for i in 0..15 {
        let mc = runner::iceberg::commit::MetadataChange {
            set_properties: BTreeMap::from([("lakeshift.test".to_owned(), i.to_string())]),
            ..Default::default()
        };
        Committer::new(&cat)
            .commit(&id, &format!("p{i}"), &Change::Metadata(mc))
            .await
            .unwrap();
    }
    let t = cat.load_required(&id).await.unwrap();
    let meta_dir =
        runner::iceberg::catalog::local_path(&format!("{}/metadata", t.metadata.location()))
            .unwrap();
    let n = std::fs::read_dir(&meta_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".metadata.json")
        })
        .count();
    assert_eq!(t.metadata.metadata_log().len(), 5);
    assert_eq!(
        n, 6,
        "current + 5 previous metadata files, older ones deleted"
    );
}

/// One row `(n, "x", 1)` committed with a Kafka partition's offsets moved.
async fn kafka_change(
    cat: &Catalog,
    id: &TableIdent,
    n: i64,
    expect: Option<i64>,
    part: &str,
    next: i64,
) -> Change {
    let t = cat.load_required(id).await.unwrap();
    let data = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &[(n, "x", 1)])])
        .await
        .unwrap();
    Change::Snapshot(SnapshotChange {
        data_files: data,
        kafka: Some(runner::iceberg::commit::KafkaCommit {
            expect: BTreeMap::from([(part.to_owned(), expect)]),
            next: BTreeMap::from([(part.to_owned(), next)]),
        }),
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_offsets_are_merged_and_a_stale_consumer_is_fenced() {
    use runner::iceberg::commit::kafka_offsets;
    let dir = tempfile::tempdir().unwrap();
    let (_cfg, cat, id) = orders_table(dir.path()).await;
    let c = Committer::new(&cat);
    // Two consumers, one partition each: each commit keeps the other's offset.
    let ch = kafka_change(&cat, &id, 1, None, "t/0", 5).await;
    c.commit(&id, "a1", &ch).await.unwrap();
    let ch = kafka_change(&cat, &id, 2, None, "t/1", 7).await;
    let done = c.commit(&id, "b1", &ch).await.unwrap();
    assert_eq!(
        kafka_offsets(&done.table.metadata),
        BTreeMap::from([("t/0".to_owned(), 5), ("t/1".to_owned(), 7)])
    );
    // A consumer that read t/0 from offset 3 (a rebalance it missed moved it to 5)
    // cannot commit over the new owner's work.
    let ch = kafka_change(&cat, &id, 3, Some(3), "t/0", 9).await;
    let err = c.commit(&id, "zombie", &ch).await.unwrap_err().to_string();
    assert!(
        err.contains("another consumer of the group took it over"),
        "{err}"
    );
    let t = cat.load_required(&id).await.unwrap();
    assert_eq!(kafka_offsets(&t.metadata).get("t/0"), Some(&5));
    assert_eq!(
        scan(&cat, &id).await.len(),
        2,
        "the zombie's row is not there"
    );
}

/// `Committer::commit_many`: every table's metadata first, one sync and one catalog
/// transaction for all; a table whose change cannot apply fails alone; a batch whose
/// reply was lost is found applied, not repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_many_lands_tables_together_and_fails_them_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = CatalogConfig::local(dir.path());
    ok(
        &cfg,
        "CREATE TABLE app.a (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL);
         CREATE TABLE app.b (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL);
         CREATE TABLE app.c (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL);",
    )
    .await;
    let cat = Catalog::open(&cfg).await.unwrap();
    let c = Committer::new(&cat);
    let ids: Vec<TableIdent> = ["a", "b", "c"]
        .iter()
        .map(|t| ident("app", t).unwrap())
        .collect();
    let mut items = batch_of_appends(&cat, &ids, "batch-1", |i| {
        vec![(i as i64, "x", 1), (10 + i as i64, "y", 2)]
    })
    .await;
    // Table c's change expects a snapshot it does not have.
    if let Change::Snapshot(sc) = &mut items[2].2 {
        sc.base_snapshot = Some(Some(42));
    }
    assert!(cat.unsynced_files() >= 3, "data files wait for a barrier");
    let done = c.commit_many(&items).await;
    assert!(
        done[0].is_ok() && done[1].is_ok(),
        "{:?}",
        done[..2]
            .iter()
            .map(|r| r.as_ref().err())
            .collect::<Vec<_>>()
    );
    let e = done[2].as_ref().unwrap_err();
    assert!(matches!(e, Error::BaseMoved { .. }), "{e}");
    assert_eq!(
        cat.unsynced_files(),
        0,
        "everything a swap names is synced first"
    );
    assert_eq!(
        scan(&cat, &ids[0]).await,
        vec![(0, "x".into(), 1), (10, "y".into(), 2)]
    );
    assert_eq!(
        scan(&cat, &ids[1]).await,
        vec![(1, "x".into(), 1), (11, "y".into(), 2)]
    );
    let c_table = cat.load_required(&ids[2]).await.unwrap();
    assert!(c_table.metadata.current_snapshot().is_none());

    // The next batch's reply is lost: each table is found committed, once.
    let items = batch_of_appends(&cat, &ids, "batch-2", |i| vec![(100 + i as i64, "z", 3)]).await;
    cat.lose_next_replies(1);
    let done = c.commit_many(&items).await;
    for (d, id) in done.iter().zip(&ids) {
        let d = d.as_ref().unwrap();
        assert!(d.recovered, "{id}: found applied after the lost reply");
        let t = cat.load_required(id).await.unwrap();
        let ours = snapshots_committed(&t, |c| c.starts_with("batch-2"));
        assert_eq!(ours, 1, "{id}: committed once");
    }
    assert_eq!(scan(&cat, &ids[2]).await, vec![(102, "z".into(), 3)]);
}

/// An append of `rows(i)` to the i-th table each, with commit ids `<prefix>:<i>`.
async fn batch_of_appends(
    cat: &Catalog,
    ids: &[TableIdent],
    prefix: &str,
    rows: impl Fn(usize) -> Vec<(i64, &'static str, i32)>,
) -> Vec<(TableIdent, String, Change)> {
    let mut items = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let t = cat.load_required(id).await.unwrap();
        let data = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &rows(i))])
            .await
            .unwrap();
        items.push((
            id.clone(),
            format!("{prefix}:{i}"),
            Change::Snapshot(SnapshotChange {
                data_files: data,
                ..Default::default()
            }),
        ));
    }
    items
}

/// Tables created by a deferring committer are seen by their own catalog at once and
/// registered (files synced, one catalog transaction) with its next write or listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_tables_are_registered_with_the_next_catalog_write() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mut cat, id) = orders_table(dir.path()).await;
    claim_job(&mut cat, dir.path()).await;
    let t = cat.load_required(&id).await.unwrap();
    let c = Committer::new(&cat).deferring_creations();
    let names = ["o1", "o2"];
    for n in names {
        c.create_table("app", n, &t_planned(&t, n), None, &[])
            .await
            .unwrap();
    }
    let other = Catalog::open(&cfg).await.unwrap();
    let o1 = ident("app", "o1").unwrap();
    assert!(
        cat.load(&o1).await.unwrap().is_some(),
        "its own catalog sees it"
    );
    assert!(
        other.metadata_location(&o1).await.unwrap().is_none(),
        "not registered yet"
    );
    assert!(cat.unsynced_files() >= 2, "the new metadata files wait too");
    let e = c
        .create_table("app", "o1", &t_planned(&t, "o1"), None, &[])
        .await;
    assert!(matches!(e, Err(Error::TableExists(_))), "{e:?}");

    // A commit to one of them registers both first.
    let o1t = cat.load_required(&o1).await.unwrap();
    let data = files::write_data(&o1t, &cat.file_io, &[orders_batch(&o1t, &[(1, "a", 1)])])
        .await
        .unwrap();
    append(&cat, &o1, "first", data).await;
    assert_eq!(cat.unsynced_files(), 0);
    assert_eq!(
        other.list_tables("app").await.unwrap(),
        vec!["o1".to_owned(), "o2".to_owned(), "orders".to_owned()]
    );
    assert_eq!(scan(&other, &o1).await, vec![(1, "a".into(), 1)]);
    assert!(other
        .load(&ident("app", "o2").unwrap())
        .await
        .unwrap()
        .is_some_and(|t| t.metadata.current_snapshot().is_none()));
}

/// A catalog that holds no job (as the members of a Kafka group, which share their
/// tables) registers a deferring committer's new tables at once: another process
/// finds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_job_new_tables_are_registered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, cat, id) = orders_table(dir.path()).await;
    let t = cat.load_required(&id).await.unwrap();
    Committer::new(&cat)
        .deferring_creations()
        .create_table("app", "o1", &t_planned(&t, "o1"), None, &[])
        .await
        .unwrap();
    let other = Catalog::open(&cfg).await.unwrap();
    assert!(
        other
            .metadata_location(&ident("app", "o1").unwrap())
            .await
            .unwrap()
            .is_some(),
        "registered at once"
    );
    assert_eq!(cat.unsynced_files(), 0, "its files synced before");
}

/// This catalog's run claims a job (as `lakeshift sync` does before it writes).
async fn claim_job(cat: &mut Catalog, state: &Path) {
    let me = runner::iceberg::lease::Owner::this_process("deferring", state);
    cat.claim(&me, std::time::Duration::from_secs(60))
        .await
        .unwrap();
}

fn t_planned(t: &runner::iceberg::LoadedTable, name: &str) -> dialects::iceberg::IceTable {
    let mut planned = runner::iceberg::convert::ice_table("app", name, &t.metadata).unwrap();
    planned.name = name.to_owned();
    planned
}

/// The manifests of a table's current snapshot: (deletes?, live entries).
async fn manifests(cat: &Catalog, t: &runner::iceberg::LoadedTable) -> Vec<(bool, usize)> {
    let list = runner::iceberg::commit::current_manifests(cat, &t.metadata)
        .await
        .unwrap();
    let mut out = Vec::new();
    for mf in &list {
        let m = mf.load_manifest(&cat.file_io).await.unwrap();
        out.push((
            mf.content == iceberg::spec::ManifestContentType::Deletes,
            m.entries().iter().filter(|e| e.is_alive()).count(),
        ));
    }
    out
}

/// Commits merge the small manifests they carry once a kind has
/// `MERGE_MANIFESTS_AT` of them, keeping each entry's sequence numbers: an equality
/// delete still removes the older row of its key and not the newer one, and a
/// rewrite's manifests without live entries are not carried. A merge of its own
/// (maintenance) is a `replace` snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_merge_small_manifests_and_keep_sequence_numbers() {
    use runner::iceberg::commit::MERGE_MANIFESTS_AT;
    let dir = tempfile::tempdir().unwrap();
    let (_cfg, cat, id) = orders_table(dir.path()).await;
    let c = Committer::new(&cat);
    // Key 1 written, deleted by equality, written again: only the newer row lives.
    let t = cat.load_required(&id).await.unwrap();
    let old = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &[(1, "old", 1)])])
        .await
        .unwrap();
    let t = append(&cat, &id, "c-old", old).await.table;
    let eq = files::write_equality_deletes(
        &t,
        &cat.file_io,
        &[1],
        &[orders_batch(&t, &[(1, "old", 1)])],
    )
    .await
    .unwrap();
    let new = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &[(1, "new", 2)])])
        .await
        .unwrap();
    c.commit(
        &id,
        "c-eq",
        &Change::Snapshot(SnapshotChange {
            delete_files: eq,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    let mut t = append(&cat, &id, "c-new", new).await.table;
    let mut expect = vec![(1, "new".to_owned(), 2)];
    let mut most = 0;
    for i in 0..(MERGE_MANIFESTS_AT as i64 + 8) {
        let k = 100 + i;
        let data = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &[(k, "x", 3)])])
            .await
            .unwrap();
        t = append(&cat, &id, &format!("c-{k}"), data).await.table;
        expect.push((k, "x".to_owned(), 3));
        most = most.max(manifests(&cat, &t).await.len());
    }
    assert!(
        most <= MERGE_MANIFESTS_AT + 1,
        "carried manifests were merged ({most} at most)"
    );
    expect.sort();
    assert_eq!(
        scan(&cat, &id).await,
        expect,
        "the equality delete applies as before"
    );
    // A rewrite of every data file leaves manifests of deleted entries only; a
    // maintenance merge drops them and merges the rest, in a replace snapshot.
    let live: Vec<String> = live_files(&cat, &t)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, p, _)| p)
        .collect();
    let rows: Vec<(i64, &str, i32)> = expect
        .iter()
        .map(|(a, b, c)| (*a, b.as_str(), *c))
        .collect();
    let rewritten = files::write_data(&t, &cat.file_io, &[orders_batch(&t, &rows)])
        .await
        .unwrap();
    let t = c
        .commit(
            &id,
            "c-rewrite",
            &Change::Snapshot(SnapshotChange {
                data_files: rewritten,
                removed_files: live,
                ..Default::default()
            }),
        )
        .await
        .unwrap()
        .table;
    assert_eq!(
        t.metadata.current_snapshot().unwrap().summary().operation,
        iceberg::spec::Operation::Replace,
        "a rewrite is a replace, not an append readers would read again"
    );
    let before = manifests(&cat, &t).await;
    assert!(before.iter().any(|(_, live)| *live == 0), "{before:?}");
    let o = runner::iceberg::maintain::Options {
        min_manifests: 2,
        ..Default::default()
    };
    let said = runner::iceberg::maintain::merge_manifests(&cat, &t, &o)
        .await
        .unwrap()
        .expect("a merge");
    let t = cat.load_required(&id).await.unwrap();
    let after = manifests(&cat, &t).await;
    assert_eq!(after, vec![(false, 1)], "{said}: {before:?} -> {after:?}");
    assert_eq!(
        t.metadata.current_snapshot().unwrap().summary().operation,
        iceberg::spec::Operation::Replace
    );
    assert_eq!(scan(&cat, &id).await, expect);
    assert_eq!(
        runner::iceberg::maintain::merge_manifests(&cat, &t, &o)
            .await
            .unwrap(),
        None,
        "nothing left to merge"
    );
}
