//! `lakeshift sync` from Debezium-format Kafka topics (a real Kafka-protocol broker,
//! tansu, started by the test) into PostgreSQL and into Iceberg: inserts, updates,
//! deletes, truncate events, messages with and without the embedded schema, a schema change whose
//! schema-topic message arrives before the data that precedes it, two consumers of
//! one group splitting the topics, a SIGKILL of one of them (the survivor takes its
//! partitions over), and its restart (the group splits again).

use lakeshift_tests::{free_port, wait_until, Broker, PgServer};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PREFIX: &str = "dbz";
/// The consumers' group session timeout.
const SESSION_MS: u64 = 6000;
const TABLES: [&str; 4] = ["items", "users", "tags", "events"];

type Rows = BTreeMap<String, Vec<Option<String>>>;

/// Debezium messages and the rows they leave, as PostgreSQL prints them.
struct Feed {
    pos: u64,
    model: BTreeMap<&'static str, Rows>,
    /// `items` column 2 is `name` before the rename, `title` after.
    renamed: bool,
    /// `users` has the `vip` column.
    vip: bool,
    msgs: Vec<(String, Value)>,
    /// Each live row's last image (the next change's `before`).
    images: BTreeMap<(&'static str, String), Value>,
}

fn source(table: Option<&str>, pos: u64) -> Value {
    json!({
        "version": "2.7.3.Final", "connector": "mysql", "name": PREFIX,
        "ts_ms": 1_700_000_000_000u64, "snapshot": "false", "db": "shop",
        "sequence": null, "table": table, "server_id": 1, "gtid": null,
        "file": "binlog.000001", "pos": pos, "row": 0, "thread": 8, "query": null
    })
}

/// The Debezium envelope schema of a table (what `schemas.enable=true` embeds).
fn envelope(table: &str, fields: &[(&str, &str, Option<&str>)]) -> Value {
    let value: Vec<Value> = fields
        .iter()
        .map(|(f, t, logical)| {
            let mut v = json!({"type": t, "optional": true, "field": f});
            if let Some(l) = logical {
                v["name"] = json!(l);
            }
            v
        })
        .collect();
    let row = |field: &str| {
        json!({"type": "struct", "fields": value, "optional": true,
               "name": format!("{PREFIX}.shop.{table}.Value"), "field": field})
    };
    json!({
        "type": "struct",
        "fields": [row("before"), row("after"),
            {"type": "struct", "fields": [], "optional": false, "name": "io.debezium.connector.mysql.Source", "field": "source"},
            {"type": "string", "optional": false, "field": "op"},
            {"type": "int64", "optional": true, "field": "ts_ms"}],
        "optional": false,
        "name": format!("{PREFIX}.shop.{table}.Envelope"),
        "version": 1
    })
}

fn b64_decimal(cents: i64) -> String {
    use base64::Engine as _;
    let bytes = cents.to_be_bytes();
    // Minimal two's complement, as Debezium writes it.
    let mut i = 0;
    while i < 7
        && ((bytes[i] == 0 && bytes[i + 1] & 0x80 == 0)
            || (bytes[i] == 0xff && bytes[i + 1] & 0x80 != 0))
    {
        i += 1;
    }
    base64::engine::general_purpose::STANDARD.encode(&bytes[i..])
}

impl Feed {
    fn new() -> Self {
        Feed {
            pos: 1000,
            model: TABLES.iter().map(|t| (*t, Rows::new())).collect(),
            renamed: false,
            vip: false,
            msgs: Vec::new(),
            images: BTreeMap::new(),
        }
    }

    fn next_pos(&mut self) -> u64 {
        self.pos += 137;
        self.pos
    }

    /// A DDL on the schema-change topic at source position `pos`.
    fn ddl(&mut self, table: &str, sql: &str, pos: u64) {
        self.msgs.push((
            PREFIX.to_owned(),
            json!({
                "source": source(None, pos), "ts_ms": 1_700_000_000_000u64,
                "databaseName": "shop", "schemaName": null, "ddl": sql,
                "tableChanges": [{"type": "ALTER", "id": format!("\"shop\".\"{table}\"")}]
            }),
        ));
    }

    fn item(&self, id: i64, k: i64) -> (Value, Vec<Option<String>>) {
        let name = format!("it's #{k}");
        let col = if self.renamed { "title" } else { "name" };
        let cents = 1000 + k * 7;
        let ms = 1_704_448_800_000i64 + k * 60_000; // 2024-01-05 10:00 + k minutes
        let row = json!({"id": id, col: name, "price": b64_decimal(cents), "at": ms});
        let at = format!("2024-01-05 {:02}:{:02}:00", 10 + (k / 60) % 14, k % 60);
        (
            row,
            vec![
                Some(id.to_string()),
                Some(name),
                Some(format!("{}.{:02}", cents / 100, cents % 100)),
                Some(at),
            ],
        )
    }

    fn user(&self, id: i64, k: i64) -> (Value, Vec<Option<String>>) {
        let email = format!("u{k}@example.com");
        let days = 19_000 + k; // 2022-01-08 + k
        let mut row = json!({"id": id, "email": email, "born": days});
        let (y, m, d) = runner::calendar::civil_from_days(days);
        let mut text = vec![
            Some(id.to_string()),
            Some(email),
            Some(format!("{y:04}-{m:02}-{d:02}")),
        ];
        if self.vip {
            row["vip"] = json!(k % 2);
            text.push(Some((k % 2).to_string()));
        }
        (row, text)
    }

    fn tag(&self, id: i64, k: i64) -> (Value, Vec<Option<String>>) {
        let tag = format!("tag{id}");
        (
            json!({"tag": tag, "n": k}),
            vec![Some(tag), Some(k.to_string())],
        )
    }

    fn event(&self, id: i64, k: i64) -> (Value, Vec<Option<String>>) {
        let payload = if k % 5 == 0 {
            None
        } else {
            Some(format!("{{\"k\": {k}}}"))
        };
        (
            json!({"id": id, "payload": payload, "ts": format!("2024-02-0{}T08:30:{:02}.5Z", 1 + k % 9, k % 60)}),
            vec![
                Some(id.to_string()),
                payload,
                Some(format!("2024-02-0{} 08:30:{:02}.5+00", 1 + k % 9, k % 60)),
            ],
        )
    }

    /// One change to `table`: insert or update of key `id`, or its delete.
    fn change(&mut self, table: &'static str, id: i64, k: i64, delete: bool) {
        let (row, text) = match table {
            "items" => self.item(id, k),
            "users" => self.user(id, k),
            "tags" => self.tag(id, k),
            _ => self.event(id, k),
        };
        let key = text[0].clone().unwrap();
        // The image before: the row as it was (Debezium's full `before`).
        let before = self.images.get(&(table, key.clone())).cloned();
        let pos = self.next_pos();
        let (op, before, after) = match (before, delete) {
            (None, true) => return,
            (Some(b), true) => ("d", Some(b), None),
            (Some(b), false) => ("u", Some(b), Some(row)),
            (None, false) => ("c", None, Some(row)),
        };
        if delete {
            self.model.get_mut(table).unwrap().remove(&key);
            self.images.remove(&(table, key));
        } else {
            self.model.get_mut(table).unwrap().insert(key.clone(), text);
            self.images.insert((table, key), after.clone().unwrap());
        }
        let payload = json!({
            "before": before, "after": after, "source": source(Some(table), pos),
            "op": op, "ts_ms": 1_700_000_000_000u64, "transaction": null
        });
        // items: with the embedded schema; the others without.
        let value = if table == "items" {
            let col = if self.renamed { "title" } else { "name" };
            json!({"schema": envelope("items", &[("id", "int32", None), (col, "string", None),
                ("price", "bytes", Some("org.apache.kafka.connect.data.Decimal")),
                ("at", "int64", Some("io.debezium.time.Timestamp"))]), "payload": payload})
        } else {
            payload
        };
        self.msgs.push((format!("{PREFIX}.shop.{table}"), value));
    }

    /// A primary-key change as Debezium writes it: a delete of the old key, a
    /// tombstone, and a create of the new key, all three at one source position.
    fn key_change(&mut self, table: &'static str, old: i64, new: i64, k: i64) {
        let (row, text) = match table {
            "items" => self.item(new, k),
            "users" => self.user(new, k),
            "tags" => self.tag(new, k),
            _ => self.event(new, k),
        };
        let old_key = match table {
            "tags" => format!("tag{old}"),
            _ => old.to_string(),
        };
        assert!(
            self.model[table].contains_key(&old_key),
            "{old_key} is live"
        );
        let before = self.images.remove(&(table, old_key.clone()));
        self.model.get_mut(table).unwrap().remove(&old_key);
        let new_key = text[0].clone().unwrap();
        self.model
            .get_mut(table)
            .unwrap()
            .insert(new_key.clone(), text);
        self.images.insert((table, new_key), row.clone());
        let pos = self.next_pos();
        let topic = format!("{PREFIX}.shop.{table}");
        let event = |op: &str, before: Option<Value>, after: Option<Value>| {
            json!({"before": before, "after": after, "source": source(Some(table), pos),
                   "op": op, "ts_ms": 1_700_000_000_000u64, "transaction": null})
        };
        self.msgs.push((topic.clone(), event("d", before, None)));
        self.msgs.push((topic.clone(), Value::Null));
        self.msgs.push((topic, event("c", None, Some(row))));
    }

    /// A Debezium truncate event (`op: t`) on the table's own topic.
    fn truncate(&mut self, table: &'static str) {
        let pos = self.next_pos();
        self.model.get_mut(table).unwrap().clear();
        self.images.retain(|(t, _), _| *t != table);
        self.msgs.push((
            format!("{PREFIX}.shop.{table}"),
            json!({"before": null, "after": null, "source": source(Some(table), pos),
                   "op": "t", "ts_ms": 1_700_000_000_000u64, "transaction": null}),
        ));
    }

    fn workload(&mut self, rounds: i64, seed: i64) {
        for k in 0..rounds {
            let k = seed + k;
            for (i, t) in TABLES.into_iter().enumerate() {
                let id = (k * 7 + i as i64 * 3) % 23;
                self.change(t, id, k, k % 6 == 5);
            }
        }
    }
}

async fn create_topics(bootstrap: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let names: Vec<String> = std::iter::once(PREFIX.to_owned())
        .chain(TABLES.iter().map(|t| format!("{PREFIX}.shop.{t}")))
        .collect();
    let topics: Vec<NewTopic<'_>> = names
        .iter()
        .map(|n| NewTopic::new(n, 1, TopicReplication::Fixed(1)))
        .collect();
    let res = admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .unwrap();
    for r in res {
        r.unwrap();
    }
}

async fn produce(bootstrap: &str, msgs: Vec<(String, Value)>) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    for (topic, v) in msgs {
        // JSON null stands for a tombstone: a message without a value.
        let payload = (!v.is_null()).then(|| v.to_string());
        let mut rec = FutureRecord::<(), String>::to(&topic);
        if let Some(pl) = &payload {
            rec = rec.payload(pl);
        }
        p.send(rec, Duration::from_secs(30))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

/// Messages as raw bytes (what a broken producer writes).
async fn produce_raw(bootstrap: &str, topic: &str, payloads: &[&[u8]]) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    for payload in payloads {
        p.send(
            FutureRecord::<(), [u8]>::to(topic).payload(payload),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    }
}

fn write_job(dir: &Path, bootstrap: &str, group: &str, sink: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("job.yaml");
    std::fs::write(
        &p,
        format!(
            "source:\n  type: kafka\n  brokers: {bootstrap}\n  group-id: {group}\n  session-timeout-ms: {SESSION_MS}\n  topic-prefix: {PREFIX}\n  tables: ['shop\\..*']\nsink:\n{sink}pipeline:\n  name: from-kafka\n  state: {}\n  checkpoint-interval-seconds: 0.3\n",
            dir.join("state").display()
        ),
    )
    .unwrap();
    p
}

/// A `lakeshift sync` child, killed if the test ends early.
struct Kid(Child);

impl std::ops::Deref for Kid {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Kid {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(job: &Path, until_end: bool) -> Kid {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(job.with_file_name("sync.log"))
        .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_lakeshift"));
    c.args(["sync", "--config", &job.display().to_string()]);
    if until_end {
        c.arg("--until-end");
    }
    Kid(c.stdout(Stdio::null()).stderr(log).spawn().unwrap())
}

fn log_of(job: &Path) -> String {
    std::fs::read_to_string(job.with_file_name("sync.log")).unwrap_or_default()
}

/// The model's rows of a table, sorted as the readers sort theirs.
fn expected(feed: &Feed, t: &str) -> Vec<Vec<Option<String>>> {
    let mut v: Vec<Vec<Option<String>>> = feed.model[t].values().cloned().collect();
    v.sort();
    v
}

/// A target table's rows as text, or None when the table is missing or changed
/// shape under the query (the job applies DDL while the test polls).
async fn pg_table(c: &tokio_postgres::Client, t: &str) -> Option<Vec<Vec<Option<String>>>> {
    // One statement: the column list and the rows come from the same catalog state.
    lakeshift_tests::try_pg_text_rows(c, &format!("SELECT * FROM shop.{t}"))
        .await
        .ok()
}

async fn pg_matches(c: &tokio_postgres::Client, feed: &Feed) -> bool {
    for t in TABLES {
        if pg_table(c, t).await.unwrap_or_default() != expected(feed, t) {
            return false;
        }
    }
    true
}

/// Wait (bounded) until PostgreSQL holds the model.
async fn wait_pg(what: &str, c: &tokio_postgres::Client, feed: &Feed, jobs: &[&Path]) {
    wait_model(what, feed, jobs, |t| async move {
        pg_table(c, t).await.unwrap_or_default()
    })
    .await
}

/// Wait (bounded) until the Iceberg catalog `cat` holds the model.
async fn wait_lake(what: &str, cat: &runner::iceberg::Catalog, feed: &Feed, jobs: &[&Path]) {
    wait_model(what, feed, jobs, |t| iceberg_table_of(cat, t)).await
}

/// Wait (bounded) until `rows` of every table equal the model's; on timeout, show
/// the jobs' logs and the first table that differs.
async fn wait_model<F, Fut>(what: &str, feed: &Feed, jobs: &[&Path], rows: F)
where
    F: Fn(&'static str) -> Fut,
    Fut: std::future::Future<Output = Vec<Vec<Option<String>>>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut differs = None;
        for t in TABLES {
            let (got, want) = (rows(t).await, expected(feed, t));
            if got != want {
                differs = Some((t, got, want));
                break;
            }
        }
        let Some((t, got, want)) = differs else {
            return;
        };
        if std::time::Instant::now() > deadline {
            for j in jobs {
                eprintln!("--- {}:\n{}", j.display(), log_of(j));
            }
            assert_eq!(got, want, "{what}: shop.{t}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn schema_ddl(feed: &mut Feed) {
    feed.ddl("items", "CREATE TABLE items (id INT NOT NULL, name VARCHAR(40), price DECIMAL(10,2), at DATETIME, PRIMARY KEY (id))", 100);
    feed.ddl(
        "users",
        "CREATE TABLE users (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(80), born DATE)",
        101,
    );
    feed.ddl(
        "tags",
        "CREATE TABLE tags (tag VARCHAR(20) NOT NULL PRIMARY KEY, n INT)",
        102,
    );
    feed.ddl(
        "events",
        "CREATE TABLE events (id INT NOT NULL PRIMARY KEY, payload TEXT, ts TIMESTAMP(1) NULL)",
        103,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_topics_into_postgres_with_two_consumers_and_a_kill() {
    let (broker, pgs) = tokio::join!(Broker::start(), PgServer::start());
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let pg = pgs.create_db("lake").await;
    pg.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    // The rename's schema-change message is produced before the data that precedes
    // it in the source: rows before it still say `name`.
    feed.workload(12, 0);
    let rename_at = feed.next_pos();
    let mut data = std::mem::take(&mut feed.msgs);
    feed.ddl(
        "items",
        "ALTER TABLE items CHANGE name title VARCHAR(40)",
        rename_at,
    );
    let mut schema_msgs = std::mem::take(&mut feed.msgs);
    feed.renamed = true;
    feed.workload(12, 100);
    data.append(&mut feed.msgs);
    let (mut ddl_first, rest): (Vec<_>, Vec<_>) = data.into_iter().partition(|(t, _)| t == PREFIX);
    ddl_first.append(&mut schema_msgs);
    produce(&bootstrap, ddl_first).await;
    produce(&bootstrap, rest).await;

    let tmp = tempfile::tempdir().unwrap();
    if std::env::var_os("LAKESHIFT_KEEP").is_some() {
        eprintln!("keeping {}", tmp.path().display());
    }
    let tmp = Keep(Some(tmp));
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/lake\n",
        pgs.port
    );
    let job_a = write_job(&tmp.path().join("a"), &bootstrap, "restore", &sink);
    let job_b = write_job(&tmp.path().join("b"), &bootstrap, "restore", &sink);
    let mut a = spawn(&job_a, false);
    let mut b = spawn(&job_b, false);
    wait_pg("the topics applied", &pg, &feed, &[&job_a, &job_b]).await;
    // The group split the topics: each process was assigned some of them.
    wait_until(
        "both consumers hold partitions (logs kept with LAKESHIFT_KEEP=1)",
        || async {
            let assigned = |j: &Path| {
                log_of(j)
                    .lines()
                    .rfind(|l| l.contains("kafka: assigned dbz"))
                    .map(str::to_owned)
            };
            assigned(&job_a).is_some() && assigned(&job_b).is_some()
        },
    )
    .await;
    // One consumer dies; more changes, and a column added, while it is gone.
    a.kill().unwrap();
    let _ = a.wait();
    feed.vip = true;
    for r in feed.model.get_mut("users").unwrap().values_mut() {
        r.push(None); // rows from before the column have it NULL
    }
    let add_at = feed.next_pos();
    feed.ddl("users", "ALTER TABLE users ADD COLUMN vip TINYINT", add_at);
    feed.workload(10, 200);
    feed.truncate("events");
    feed.workload(4, 300);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    // The survivor takes the dead member's partitions over (after the session
    // timeout) and applies everything.
    wait_pg(
        "after the kill, by the survivor",
        &pg,
        &feed,
        &[&job_a, &job_b],
    )
    .await;
    let last_assigned = |j: &Path| {
        log_of(j)
            .lines()
            .rfind(|l| l.contains("kafka: assigned dbz"))
            .map(|l| l.matches("dbz.shop.").count())
            .unwrap_or(0)
    };
    assert_eq!(last_assigned(&job_b), 4, "{}", log_of(&job_b));
    // The killed process comes back as a new member: the group splits again, and
    // changes made after that reach the target through both.
    let a = spawn(&job_a, false);
    wait_until("the restarted process holds partitions again", || async {
        last_assigned(&job_a) > 0 && last_assigned(&job_b) < 4
    })
    .await;
    feed.workload(8, 400);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    wait_pg("after the restart", &pg, &feed, &[&job_a, &job_b]).await;
    assert!(b.try_wait().unwrap().is_none(), "{}", log_of(&job_b));
    // A clean stop commits and exits 0; offsets in the target match the topics.
    for (mut p, j) in [(a, &job_a), (b, &job_b)] {
        let _ = Command::new("kill").arg(p.id().to_string()).status();
        let st = p.wait().unwrap();
        assert!(st.success(), "{}", log_of(j));
    }
    let offs = pg
        .query(
            "SELECT topic, next_offset FROM lakeshift.kafka_offsets WHERE job = 'from-kafka' ORDER BY topic",
            &[],
        )
        .await
        .unwrap();
    let per_topic: BTreeMap<String, i64> = offs.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(per_topic.len(), 4, "{per_topic:?}");
    let ddl_done = pg
        .query("SELECT count(*) FROM lakeshift.ddl_applied", &[])
        .await
        .unwrap()[0]
        .get::<_, i64>(0);
    assert_eq!(
        ddl_done, 7,
        "4 CREATE, the rename, the added column, the truncate: each once"
    );
    drop(broker);
}

/// Arrow's timestamp text as PostgreSQL prints it: `2024-02-01T08:30:05.500+00:00`
/// -> `2024-02-01 08:30:05.5+00`.
fn time_text(v: &str) -> String {
    let is_time = v.len() >= 19 && v.as_bytes()[4] == b'-' && v.as_bytes()[10] == b'T';
    if !is_time {
        return v.to_owned();
    }
    let (body, zone) = match v.find("+00:00").or_else(|| v.find('Z')) {
        Some(i) => (&v[..i], "+00"),
        None => (v, ""),
    };
    let mut body = body.replace('T', " ");
    if body.contains('.') {
        while body.ends_with('0') {
            body.pop();
        }
        if body.ends_with('.') {
            body.pop();
        }
    }
    format!("{body}{zone}")
}

/// A temp folder kept when LAKESHIFT_KEEP is set (for the jobs' logs and state).
struct Keep(Option<tempfile::TempDir>);

impl Keep {
    fn path(&self) -> &Path {
        self.0.as_ref().expect("present").path()
    }
}

impl Drop for Keep {
    fn drop(&mut self) {
        if std::env::var_os("LAKESHIFT_KEEP").is_some() {
            if let Some(t) = self.0.take() {
                let _ = t.keep();
            }
        }
    }
}

async fn iceberg_table(dir: &Path, t: &str) -> Vec<Vec<Option<String>>> {
    use runner::iceberg::{Catalog, CatalogConfig};
    let cat = Catalog::open(&CatalogConfig::local(dir.join("warehouse")))
        .await
        .unwrap();
    iceberg_table_of(&cat, t).await
}

/// Rows of Iceberg table `shop.<t>` in catalog `cat`, as text, sorted (empty when
/// the table does not exist).
async fn iceberg_table_of(cat: &runner::iceberg::Catalog, t: &str) -> Vec<Vec<Option<String>>> {
    let Some(lt) = cat
        .load(&runner::iceberg::catalog::ident("shop", t).unwrap())
        .await
        .unwrap()
    else {
        return Vec::new();
    };
    let table = lt.table(&cat.file_io).unwrap();
    let batches = lakeshift_tests::scan_batches(&table, None).await;
    let mut out = Vec::new();
    for b in batches {
        use arrow_array::Array;
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| {
                arrow_cast::display::ArrayFormatter::try_new(
                    c.as_ref(),
                    &arrow_cast::display::FormatOptions::default(),
                )
                .unwrap()
            })
            .collect();
        for r in 0..b.num_rows() {
            out.push(
                (0..b.num_columns())
                    .map(|c| {
                        (!b.column(c).is_null(r)).then(|| time_text(&fmts[c].value(r).to_string()))
                    })
                    .collect(),
            );
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_topics_into_iceberg_exactly_once() {
    let broker = Broker::start().await;
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(15, 0);
    let rename_at = feed.next_pos();
    let data = std::mem::take(&mut feed.msgs);
    feed.ddl(
        "items",
        "ALTER TABLE items CHANGE name title VARCHAR(40)",
        rename_at,
    );
    let ddl = std::mem::take(&mut feed.msgs);
    feed.renamed = true;
    feed.workload(8, 100);
    // A truncate between changes: rows before it go, rows after it stay.
    feed.truncate("tags");
    feed.workload(7, 200);
    let after = std::mem::take(&mut feed.msgs);
    let (mut schema, rest): (Vec<_>, Vec<_>) = data.into_iter().partition(|(t, _)| t == PREFIX);
    schema.extend(ddl);
    produce(&bootstrap, schema).await;
    produce(&bootstrap, rest).await;
    produce(&bootstrap, after).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: iceberg\n  warehouse: {}\n",
        tmp.path().join("ice").join("warehouse").display()
    );
    let job = write_job(&tmp.path().join("ice"), &bootstrap, "to-iceberg", &sink);
    // Twice: the second run finds every offset committed and adds nothing.
    for run in 0..2 {
        let st = spawn(&job, true).wait().unwrap();
        assert!(st.success(), "run {run}: {}", log_of(&job));
        for t in TABLES {
            let got = iceberg_table(&tmp.path().join("ice"), t).await;
            let want = expected(&feed, t);
            assert_eq!(
                got, want,
                "run {run}: Iceberg shop.{t} differs from the topics"
            );
        }
    }
}

/// A Kafka consumer group whose two members share the tables of one S3 warehouse
/// (moto) with the catalog in PostgreSQL: both commit through the catalog's
/// compare-and-swap; one is killed, changes (a column added, a truncate) arrive
/// while it is gone, it comes back; every table equals the topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_topics_into_an_s3_lake_with_two_consumers_and_a_kill() {
    let (broker, pgs, s3) = tokio::join!(
        Broker::start(),
        PgServer::start(),
        lakeshift_tests::S3Server::start("kafka")
    );
    // The jobs inherit the S3 endpoint and credentials; this process reads too.
    for (k, v) in s3.env() {
        std::env::set_var(k, v);
    }
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    pgs.create_db("catalog").await;
    let catalog = format!("postgresql://postgres@127.0.0.1:{}/catalog", pgs.port);
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(12, 0);
    let rename_at = feed.next_pos();
    let mut data = std::mem::take(&mut feed.msgs);
    feed.ddl(
        "items",
        "ALTER TABLE items CHANGE name title VARCHAR(40)",
        rename_at,
    );
    let mut schema_msgs = std::mem::take(&mut feed.msgs);
    feed.renamed = true;
    feed.workload(12, 100);
    data.append(&mut feed.msgs);
    let (mut ddl_first, rest): (Vec<_>, Vec<_>) = data.into_iter().partition(|(t, _)| t == PREFIX);
    ddl_first.append(&mut schema_msgs);
    produce(&bootstrap, ddl_first).await;
    produce(&bootstrap, rest).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!("  type: iceberg\n  warehouse: s3://kafka/lake\n  catalog: {catalog}\n");
    let job_a = write_job(&tmp.path().join("a"), &bootstrap, "to-s3", &sink);
    let job_b = write_job(&tmp.path().join("b"), &bootstrap, "to-s3", &sink);
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig {
        name: "lakeshift".into(),
        warehouse: "s3://kafka/lake".into(),
        uri: Some(catalog.clone()),
        s3_env: Some(s3.env_pairs()),
    })
    .await
    .unwrap();
    let mut a = spawn(&job_a, false);
    let b = spawn(&job_b, false);
    let jobs = [job_a.as_path(), job_b.as_path()];
    wait_lake("the topics are in the S3 lake", &cat, &feed, &jobs).await;
    wait_until("both consumers hold partitions", || async {
        let assigned = |j: &Path| log_of(j).contains("kafka: assigned dbz");
        assigned(&job_a) && assigned(&job_b)
    })
    .await;
    a.kill().unwrap();
    let _ = a.wait();
    feed.vip = true;
    for r in feed.model.get_mut("users").unwrap().values_mut() {
        r.push(None);
    }
    let add_at = feed.next_pos();
    feed.ddl("users", "ALTER TABLE users ADD COLUMN vip TINYINT", add_at);
    feed.workload(10, 200);
    feed.truncate("events");
    feed.workload(4, 300);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    wait_lake("after the kill, by the survivor", &cat, &feed, &jobs).await;
    let a = spawn(&job_a, false);
    feed.workload(8, 400);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    wait_lake("after the restart", &cat, &feed, &jobs).await;
    for (mut p, j) in [(a, &job_a), (b, &job_b)] {
        let _ = Command::new("kill").arg(p.id().to_string()).status();
        let st = p.wait().unwrap();
        assert!(st.success(), "{}", log_of(j));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_whose_partition_moved_on_is_fenced_off_and_starts_again() {
    let (broker, pgs) = tokio::join!(Broker::start(), PgServer::start());
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let pg = pgs.create_db("lake").await;
    pg.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(5, 0);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/lake\n",
        pgs.port
    );
    let job = write_job(&tmp.path().join("z"), &bootstrap, "fence", &sink);
    let mut z = spawn(&job, false);
    wait_pg("the backlog applied", &pg, &feed, &[&job]).await;
    // Another consumer of the group (as after a rebalance this one missed) moved
    // `tags` on in the target. This one still reads `tags`: its next commit asserts
    // the offset it read from and fails without applying the change; the process
    // starts again from the offsets the target holds (so the change counts as the
    // other consumer's) and goes on.
    pg.execute(
        "UPDATE lakeshift.kafka_offsets SET next_offset = next_offset + 1000 WHERE topic = 'dbz.shop.tags'",
        &[],
    )
    .await
    .unwrap();
    feed.change("tags", 999, 999, false);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    wait_until("the fenced consumer starts again", || async {
        log_of(&job).contains("starting again from the offsets the target holds")
    })
    .await;
    let log = log_of(&job);
    assert!(
        log.contains("another consumer of the group took it over"),
        "{log}"
    );
    assert!(
        z.try_wait().unwrap().is_none(),
        "the process stopped: {log}"
    );
    // It goes on: a later change of another table lands.
    feed.change("items", 77, 77, false);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let items = expected(&feed, "items");
    wait_until("the restarted run applies a later change", || async {
        pg_table(&pg, "items").await.as_ref() == Some(&items)
    })
    .await;
    assert!(
        !pg_table(&pg, "tags")
            .await
            .expect("shop.tags")
            .iter()
            .any(|r| r[0].as_deref() == Some("tag999")),
        "the fenced change did not land"
    );
    let _ = Command::new("kill").arg(z.id().to_string()).status();
    let st = z.wait().unwrap();
    assert!(
        st.success(),
        "a clean stop after the restart: {}",
        log_of(&job)
    );
}

/// `ddl-error-policy: park` with a Kafka source into Iceberg: a DDL Iceberg refuses
/// (users.id BIGINT -> INT, a narrowing) parks `users`; its later messages are held
/// with their offsets (once, though a rerun reads them again) while the other tables
/// go on; after `ddl-log --resolve` they land exactly once and the offsets move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_table_holds_its_kafka_messages_until_resolved() {
    let broker = Broker::start().await;
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(6, 0);
    let users_before = expected(&feed, "users");
    let at = feed.next_pos();
    let users_topic = format!("{PREFIX}.shop.users");
    let users_msgs = |f: &Feed| f.msgs.iter().filter(|(t, _)| *t == users_topic).count();
    let users_earlier = users_msgs(&feed);
    feed.ddl("users", "ALTER TABLE users MODIFY id INT NOT NULL", at);
    feed.workload(6, 100);
    let users_later = users_msgs(&feed) - users_earlier;
    let users_total = users_msgs(&feed) as i64;
    let (schema, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut feed.msgs)
        .into_iter()
        .partition(|(t, _)| t == PREFIX);
    produce(&bootstrap, schema).await;
    produce(&bootstrap, rest).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ice");
    let sink = format!(
        "  type: iceberg\n  warehouse: {}\n",
        dir.join("warehouse").display()
    );
    let job = write_job(&dir, &bootstrap, "parking", &sink);
    let mut text = std::fs::read_to_string(&job).unwrap();
    text.push_str("  ddl-error-policy: park\n");
    std::fs::write(&job, text).unwrap();
    let jobs = job.display().to_string();
    let ddl_log = || {
        let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["ddl-log", "--config", &jobs])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Twice: the second run reads the parked table's messages again and holds them
    // once.
    for run in 0..2 {
        let st = spawn(&job, true).wait().unwrap();
        assert!(st.success(), "run {run}: {}", log_of(&job));
        assert_eq!(
            iceberg_table(&dir, "users").await,
            users_before,
            "run {run}"
        );
        for t in ["items", "tags", "events"] {
            assert_eq!(
                iceberg_table(&dir, t).await,
                expected(&feed, t),
                "run {run}: {t}"
            );
        }
        let log = ddl_log();
        assert_eq!(log.matches(" parked at ").count(), 1, "run {run}: {log}");
        assert!(log.contains("MODIFY id INT"), "run {run}: {log}");
    }
    let log = ddl_log();
    let seq = log
        .lines()
        .find_map(|l| {
            l.strip_prefix('#').and_then(|l| {
                let (n, rest) = l.split_once(' ')?;
                rest.starts_with("parked").then(|| n.to_owned())
            })
        })
        .unwrap();
    let held: usize = std::fs::read_dir(dir.join("state/held-rows/shop.users"))
        .unwrap()
        .map(|f| {
            let v: Value =
                serde_json::from_slice(&std::fs::read(f.unwrap().path()).unwrap()).unwrap();
            v.as_array()
                .unwrap()
                .iter()
                .filter(|i| i.get("Rows").is_some())
                .count()
        })
        .sum();
    assert_eq!(held, users_later, "each held message once");

    let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(["ddl-log", "--config", &jobs, "--resolve", &seq])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for run in 2..4 {
        let st = spawn(&job, true).wait().unwrap();
        assert!(st.success(), "run {run}: {}", log_of(&job));
        for t in TABLES {
            assert_eq!(
                iceberg_table(&dir, t).await,
                expected(&feed, t),
                "run {run}: {t}"
            );
        }
    }
    assert!(
        ddl_log().contains(&format!("#{seq} resolved")),
        "{}\n{}",
        ddl_log(),
        log_of(&job)
    );
    assert!(!dir.join("state/held-rows/shop.users").exists());
    // The table's snapshot holds its topic's offset: every message of it.
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
        dir.join("warehouse"),
    ))
    .await
    .unwrap();
    let users = cat
        .load(&runner::iceberg::catalog::ident("shop", "users").unwrap())
        .await
        .unwrap()
        .unwrap();
    let offsets = runner::iceberg::commit::kafka_offsets(&users.metadata);
    assert_eq!(
        offsets.get(&format!("{PREFIX}.shop.users/0")).copied(),
        Some(users_total),
        "{offsets:?}"
    );
    drop(broker);
}

/// A DDL on a captured table that the schema history cannot parse stops a Kafka job
/// under `ddl-error-policy: fail` (it was skipped silently as "outside the captured
/// tables": a statement that did not parse names no table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsed_ddl_on_a_captured_table_stops_a_kafka_job() {
    let (broker, pgs) = tokio::join!(Broker::start(), PgServer::start());
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    pgs.create_db("unparsed").await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(2, 0);
    feed.ddl("items", "ALTER TABLE items FROBNICATE COLUMN name", 900_000);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/unparsed\n",
        pgs.port
    );
    let job = write_job(&tmp.path().join("u"), &bootstrap, "unparsed", &sink);
    let st = spawn(&job, true).wait().unwrap();
    let log = log_of(&job);
    assert!(!st.success(), "the job must stop: {log}");
    assert!(
        log.contains("FROBNICATE") && log.contains("cannot be applied"),
        "{log}"
    );
}

/// A primary-key change split by a commit: Debezium writes it as delete + tombstone
/// + create at one source position. The first run commits the delete; the second
/// reads the create, whose position is not past the table's committed watermark but
/// whose offset is new: it must land (it was skipped, and Iceberg lost the row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_change_split_by_a_commit_lands_in_iceberg() {
    let broker = Broker::start().await;
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(3, 0);
    feed.key_change("tags", 6, 70, 50);
    let create = feed.msgs.pop().expect("the create");
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: iceberg\n  warehouse: {}\n",
        tmp.path().join("k").join("warehouse").display()
    );
    let job = write_job(&tmp.path().join("k"), &bootstrap, "key-change", &sink);
    let st = spawn(&job, true).wait().unwrap();
    assert!(st.success(), "{}", log_of(&job));
    let got = iceberg_table(&tmp.path().join("k"), "tags").await;
    assert!(
        !got.iter().any(|r| r[0].as_deref() == Some("tag6"))
            && !got.iter().any(|r| r[0].as_deref() == Some("tag70")),
        "after the delete: {got:?}"
    );
    produce(&bootstrap, vec![create]).await;
    let st = spawn(&job, true).wait().unwrap();
    assert!(st.success(), "{}", log_of(&job));
    for t in TABLES {
        let got = iceberg_table(&tmp.path().join("k"), t).await;
        assert_eq!(
            got,
            expected(&feed, t),
            "Iceberg shop.{t} differs from the topics"
        );
    }
}

/// A message that cannot be decoded (not JSON; a table the schema-change topic never
/// created) stopped every run at the same offset with no way past it. Now it follows
/// `row-error-policy`: `fail` stops with the message's topic, partition and offset and
/// the fix; `skip` writes it to the dead-letter file and the messages after it land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_cannot_be_decoded_follows_the_row_error_policy() {
    let (broker, pgs) = tokio::join!(Broker::start(), PgServer::start());
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(3, 0);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let ghost = json!({"before": null, "after": {"id": 1}, "source": source(Some("ghost"), 99),
                       "op": "c", "ts_ms": 1_700_000_000_000u64, "transaction": null})
    .to_string();
    // Envelope drift (issue 36 item 17): a field the captured DDL lacks was dropped,
    // and a column missing from the image was written as NULL, silently.
    let extra = json!({"before": null, "after": {"tag": "drift1", "n": 1, "color": "red"},
                       "source": source(Some("tags"), 98), "op": "c",
                       "ts_ms": 1_700_000_000_000u64, "transaction": null})
    .to_string();
    let lacking = json!({"before": null, "after": {"tag": "drift2"},
                         "source": source(Some("tags"), 97), "op": "c",
                         "ts_ms": 1_700_000_000_000u64, "transaction": null})
    .to_string();
    produce_raw(
        &bootstrap,
        &format!("{PREFIX}.shop.tags"),
        &[
            b"{not json",
            ghost.as_bytes(),
            extra.as_bytes(),
            lacking.as_bytes(),
        ],
    )
    .await;
    feed.workload(3, 10);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    pgs.create_db("failing").await;
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/failing\n",
        pgs.port
    );
    let job = write_job(&tmp.path().join("f"), &bootstrap, "bad-fail", &sink);
    for _ in 0..2 {
        let st = spawn(&job, true).wait().unwrap();
        let log = log_of(&job);
        assert!(!st.success(), "{log}");
        assert!(
            log.contains("dbz.shop.tags/0@")
                && log.contains("not JSON")
                && log.contains("row-error-policy: skip"),
            "{log}"
        );
    }
    let pg = pgs.create_db("skipping").await;
    pg.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/skipping\n",
        pgs.port
    );
    let dir = tmp.path().join("s");
    let job = write_job(&dir, &bootstrap, "bad-skip", &sink);
    let text = std::fs::read_to_string(&job).unwrap() + "  row-error-policy: skip\n";
    std::fs::write(&job, text).unwrap();
    let st = spawn(&job, true).wait().unwrap();
    assert!(st.success(), "{}", log_of(&job));
    assert!(pg_matches(&pg, &feed).await, "{}", log_of(&job));
    let dl = std::fs::read_to_string(dir.join("state/dead-letter.jsonl")).unwrap();
    let records: Vec<Value> = dl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 4, "{dl}");
    assert_eq!(records[0]["payload"], "{not json");
    let reason = |i: usize| records[i]["reason"].as_str().unwrap().to_owned();
    assert!(reason(1).contains("shop.ghost"), "{dl}");
    assert!(
        reason(2).contains("field `color`") && reason(2).contains("schema topic"),
        "{dl}"
    );
    assert!(reason(3).contains("lacks column `n`"), "{dl}");
    for r in &records {
        assert_eq!(r["kind"], "message");
        assert_eq!(r["topic"], "dbz.shop.tags");
    }
    assert_eq!(
        records[1]["offset"].as_i64().unwrap(),
        records[0]["offset"].as_i64().unwrap() + 1
    );
}

/// The graceful stop from Kafka: a job into Iceberg is stopped by SIGTERM, SIGINT and
/// a double SIGINT while a quarter of the messages at a time arrives; a catch-up after
/// the last stop leaves every table equal to the topics (nothing lost, nothing twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_job_stopped_by_signals_while_messages_arrive_loses_nothing() {
    let broker = Broker::start().await;
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(40, 0);
    let (schema, data): (Vec<_>, Vec<_>) = std::mem::take(&mut feed.msgs)
        .into_iter()
        .partition(|(t, _)| t == PREFIX);
    produce(&bootstrap, schema).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: iceberg\n  warehouse: {}\n",
        tmp.path().join("ice").join("warehouse").display()
    );
    let job = write_job(&tmp.path().join("ice"), &bootstrap, "stops", &sink);
    let quarter = data.len().div_ceil(4);
    let stops: [&[&str]; 4] = [&["TERM"], &["INT"], &["INT", "INT"], &["TERM"]];
    for (chunk, signals) in data.chunks(quarter).zip(stops) {
        let mut kid = spawn(&job, false);
        lakeshift_tests::wait_for_handlers(kid.id());
        produce(&bootstrap, chunk.to_vec()).await;
        for (i, s) in signals.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = Command::new("kill")
                .args([&format!("-{s}"), &kid.id().to_string()])
                .status();
        }
        let st = kid.wait().unwrap();
        let ok = match signals.len() {
            1 => st.success(),
            _ => matches!(st.code(), Some(0) | Some(130)),
        };
        assert!(ok, "{signals:?}: {st}: {}", log_of(&job));
    }
    let st = spawn(&job, true).wait().unwrap();
    assert!(st.success(), "catch-up: {}", log_of(&job));
    for t in TABLES {
        let got = iceberg_table(&tmp.path().join("ice"), t).await;
        assert_eq!(
            got,
            expected(&feed, t),
            "Iceberg shop.{t} differs from the topics"
        );
    }
}

/// A followed topic deleted on the broker: the tables keep what was committed, and a
/// run after it goes on with the other topics. (librdkafka 2.12.1, the newest
/// rdkafka-sys holds, crashes with SIGSEGV in its own thread, where every signal is
/// blocked, when tansu answers a fetch of the deleted topic with a leader-change tag
/// and no topic id: the first run may end so; nothing the process can catch.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_topic_is_deleted_the_tables_keep_their_rows_and_a_restart_goes_on() {
    let broker = Broker::start().await;
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.workload(20, 0);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ice");
    let sink = format!(
        "  type: iceberg\n  warehouse: {}\n",
        dir.join("warehouse").display()
    );
    let job = write_job(&dir, &bootstrap, "deleted", &sink);
    let mut kid = spawn(&job, false);
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
        dir.join("warehouse"),
    ))
    .await
    .unwrap();
    wait_lake("the topics mirrored", &cat, &feed, &[&job]).await;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let gone = format!("{PREFIX}.shop.tags");
    for r in admin
        .delete_topics(&[gone.as_str()], &AdminOptions::new())
        .await
        .unwrap()
    {
        r.unwrap();
    }
    // The job ends (the crash above) or runs on; either way it is stopped here.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while kid.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if kid.try_wait().unwrap().is_none() {
        let _ = Command::new("kill")
            .args(["-TERM", &kid.id().to_string()])
            .status();
        let st = kid.wait().unwrap();
        assert!(st.success(), "SIGTERM: {st}: {}", log_of(&job));
    }
    let log = log_of(&job);
    for t in TABLES {
        assert_eq!(
            iceberg_table(&dir, t).await,
            expected(&feed, t),
            "Iceberg shop.{t} keeps what was committed"
        );
    }
    feed.workload(5, 100);
    let more: Vec<_> = std::mem::take(&mut feed.msgs)
        .into_iter()
        .filter(|(t, _)| t != &gone)
        .collect();
    produce(&bootstrap, more).await;
    let st = spawn(&job, true).wait().unwrap();
    let again = log_of(&job)[log.len()..].to_owned();
    assert!(st.success(), "a restart: {again}");
    for t in TABLES.into_iter().filter(|t| *t != "tags") {
        assert_eq!(
            iceberg_table(&dir, t).await,
            expected(&feed, t),
            "Iceberg shop.{t} after the restart"
        );
    }
}

/// A schema-change message whose `tableChanges` is empty (a DDL Debezium did not
/// attribute to a table) is still delivered in order with the tables its statement
/// names: here `ALTER TABLE notes COMMENT`, after `CREATE TABLE notes`, while the
/// other tables' messages flow.
/// regression (found by the fuzzer's Kafka feed, Kafka->Pg seed 11): a DDL without
/// `tableChanges` was delivered before the first later message of *any* table, ahead
/// of the earlier `CREATE TABLE notes` (held for the table's own messages): `table
/// shop.notes is not known`, and the job stopped on every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_without_table_changes_waits_for_the_tables_it_names() {
    let (broker, pgs) = tokio::join!(Broker::start(), PgServer::start());
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    pgs.create_db("untagged").await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.ddl(
        "notes",
        "CREATE TABLE notes (id INT PRIMARY KEY, body TEXT)",
        150,
    );
    feed.msgs.push((
        PREFIX.to_owned(),
        json!({
            "source": source(None, 160), "ts_ms": 1_700_000_000_000u64,
            "databaseName": "shop", "schemaName": null,
            "ddl": "ALTER TABLE notes COMMENT = 'free text'", "tableChanges": []
        }),
    ));
    feed.workload(3, 0);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/untagged\n",
        pgs.port
    );
    let job = write_job(&tmp.path().join("u"), &bootstrap, "untagged", &sink);
    let st = spawn(&job, true).wait().unwrap();
    assert!(st.success(), "{}", log_of(&job));
    let c = pgs.client("untagged").await;
    for t in TABLES {
        assert_eq!(
            pg_table(&c, t).await.unwrap_or_default(),
            expected(&feed, t),
            "shop.{t}"
        );
    }
}

/// A table created and never written (no topic of its own) is made on the target:
/// its DDL waits for nothing unread.
/// regression (the fuzzer's Kafka feed, Kafka->Pg seed 12): its CREATE TABLE stayed
/// queued for the table's first message, and the target never had the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_and_never_written_reaches_the_target() {
    let (broker, pgs) = tokio::join!(Broker::start(), PgServer::start());
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap).await;
    pgs.create_db("empty").await;
    let mut feed = Feed::new();
    schema_ddl(&mut feed);
    feed.ddl(
        "notes",
        "CREATE TABLE notes (id INT PRIMARY KEY, body TEXT)",
        150,
    );
    feed.workload(2, 0);
    produce(&bootstrap, std::mem::take(&mut feed.msgs)).await;
    let tmp = tempfile::tempdir().unwrap();
    let sink = format!(
        "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/empty\n",
        pgs.port
    );
    let job = write_job(&tmp.path().join("e"), &bootstrap, "empty", &sink);
    let st = spawn(&job, true).wait().unwrap();
    assert!(st.success(), "{}", log_of(&job));
    let c = pgs.client("empty").await;
    assert_eq!(
        pg_table(&c, "notes").await,
        Some(Vec::new()),
        "shop.notes on the target: {}",
        log_of(&job)
    );
    for t in TABLES {
        assert_eq!(
            pg_table(&c, t).await.unwrap_or_default(),
            expected(&feed, t),
            "shop.{t}"
        );
    }
}

/// `lakeshift check` on a Kafka job: before Debezium made the schema-change topic it
/// is an error naming the topic; with it, the table topics are counted; an address
/// where no broker listens is an error too. Nothing is made (no state folder, no
/// warehouse).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_the_schema_change_topic_and_makes_nothing() {
    let broker = Broker::start().await;
    let bootstrap = broker.bootstrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ice");
    let sink = format!(
        "  type: iceberg\n  warehouse: {}\n",
        dir.join("warehouse").display()
    );
    let check = |job: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["check", "--config", &job.display().to_string()])
            .output()
            .unwrap();
        assert!(
            !dir.join("state").exists() && !dir.join("warehouse").exists(),
            "check made something"
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let job = write_job(&dir, &bootstrap, "checked", &sink);
    let (code, text) = check(&job);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("error:")
            && l.contains(&format!("schema-change topic {PREFIX} does not exist"))),
        "{text}"
    );
    create_topics(&bootstrap).await;
    let (code, text) = check(&job);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(&format!("{} table topic(s)", TABLES.len())),
        "{text}"
    );
    let nobody = format!("127.0.0.1:{}", free_port());
    let job = write_job(&dir, &nobody, "checked", &sink);
    let (code, text) = check(&job);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("error: source:"), "{text}");
}
