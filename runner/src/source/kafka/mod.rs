//! The Kafka source: Debezium-format change events (JSON, with or without the
//! embedded `schema`/`payload` envelope) from one topic per table
//! (`<topic-prefix>.<database>.<table>`), and DDL from Debezium's schema-change topic
//! (`<topic-prefix>`), as the same [`SourceEvent`] stream the binlog gives.
//!
//! - One consumer group: several lakeshift processes with the same `group-id` split
//!   the table topics' partitions between them.
//! - Offsets are not committed to Kafka by the reader: the sink stores each
//!   partition's next offset in its own commit (and asserts the previous one); the
//!   group's Kafka offsets are set after that, only as a starting hint.
//! - The schema-change topic is read from its start by every process (it is the
//!   schema history) and is not ordered with the data topics: a DDL on a table is
//!   delivered just before the first of that table's messages with a later source
//!   position, or when that table's partitions are caught up.
//! - Messages without an embedded schema are decoded with the table's definition
//!   from the DDL history; Debezium's default encodings are understood (decimals as
//!   text, numbers or base64 unscaled bytes; DATE as days; DATETIME as epoch ms or
//!   µs by precision; TIMESTAMP as ISO-8601 text; TIME as µs; binary as base64).

mod debezium;
mod schema;

use debezium::{decode_row, payload, position_of};
use schema::{deliver_ddl, queue_ddl, read_schema_to_end, Ddl};

use super::decode::{append_snapshot_value, Ctx, Kind, RowsBuilder, SourceTable};
use super::history::SchemaHistory;
use super::position::Position;
use super::DecodeError;
use super::{Op, RowBatch, RowPos, SourceError, SourceEvent};
use base64::Engine as _;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use regex::Regex;
use serde_json::Value as J;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub use super::kafka_config::KafkaConfig;

/// Rebalances seen by the group consumer.
struct GroupContext {
    rebalanced: Arc<AtomicBool>,
}

impl ClientContext for GroupContext {}

impl ConsumerContext for GroupContext {
    fn post_rebalance(&self, _c: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = r {
            tracing::info!(
                "kafka: assigned {}",
                tpl.elements()
                    .iter()
                    .map(|e| format!("{}/{}", e.topic(), e.partition()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        self.rebalanced.store(true, Ordering::SeqCst);
    }
}

/// Partitions of the subscription this process does not own although nobody else
/// should, and how long that may last before it rejoins the group.
struct Orphaned {
    missing: usize,
    all: usize,
    patience: Duration,
}

/// Whether partitions of the subscription are left to nobody: this process owns fewer
/// than all, and the group is not a stable one of several members (who own the rest).
/// As the group's only stable member it must get every partition within a rebalance;
/// a group that does not settle (tansu 0.6.0 can leave one forming after a member
/// died, or not describe it) gets two session timeouts. `member`: the group gave this
/// process an assignment (perhaps an empty one); before that, None.
fn orphaned(
    consumer: &StreamConsumer<GroupContext>,
    group: &str,
    topics: &Regex,
    member: bool,
    session: Duration,
) -> Option<Orphaned> {
    if !member {
        return None;
    }
    let mine: BTreeSet<(String, i32)> = consumer
        .assignment()
        .ok()?
        .elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect();
    let md = consumer.fetch_metadata(None, Duration::from_secs(2)).ok()?;
    let all: Vec<(String, i32)> = md
        .topics()
        .iter()
        .filter(|t| topics.is_match(t.name()))
        .flat_map(|t| t.partitions().iter().map(|p| (t.name().to_owned(), p.id())))
        .collect();
    let missing = all.iter().filter(|x| !mine.contains(x)).count();
    if missing == 0 {
        return None;
    }
    let patience = match consumer.fetch_group_list(Some(group), Duration::from_secs(2)) {
        Ok(list) => match list.groups().first() {
            Some(g) if g.state() == "Stable" && g.members().len() > 1 => return None,
            Some(g) if g.state() == "Stable" => session / 2,
            Some(g) => {
                tracing::debug!(
                    "kafka: group {group} is {} with {} member(s)",
                    g.state(),
                    g.members().len()
                );
                session * 2
            }
            None => session * 2,
        },
        Err(e) => {
            tracing::debug!("kafka: describing group {group}: {e}");
            session * 2
        }
    };
    Some(Orphaned {
        missing,
        all: all.len(),
        patience,
    })
}

/// What the engine reports back: offsets the sink committed (set as the group's).
pub type Committed = super::Acknowledged;

/// Debezium-format topics as a [`super::Source`]: the group's offsets follow what the
/// sink acknowledges.
pub struct KafkaSource {
    config: Arc<super::config::Source>,
    acks: Option<mpsc::UnboundedSender<Committed>>,
}

impl KafkaSource {
    pub fn new(config: Arc<super::config::Source>) -> Self {
        KafkaSource { config, acks: None }
    }
}

impl super::Source for KafkaSource {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn start(
        &mut self,
        _from: super::Resume,
        stop_at_end: bool,
        tx: mpsc::Sender<SourceEvent>,
    ) -> tokio::task::JoinHandle<Result<(), SourceError>> {
        // Offsets are each sink's own (read per partition as it is first seen).
        let (ack, acks) = mpsc::unbounded_channel();
        self.acks = Some(ack);
        tokio::spawn(run(self.config.clone(), acks, tx, stop_at_end))
    }

    fn by_offsets(&self) -> bool {
        true
    }

    fn acknowledge(&mut self, done: Committed) {
        if let Some(a) = &self.acks {
            let _ = a.send(done);
        }
    }
}

/// `lakeshift check`: the brokers answer, the schema-change topic exists, and how
/// many table topics the prefix finds (nothing is made, no group is joined).
pub fn check(src: &super::config::Source) -> Result<super::Checked, SourceError> {
    let k = src.kafka().cloned().expect("a kafka source");
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &k.brokers)
        .create()
        .map_err(kerr)?;
    let md = c
        .fetch_metadata(None, Duration::from_secs(10))
        .map_err(|e| SourceError::Connect(format!("kafka brokers {}: {e}", k.brokers)))?;
    let names: Vec<&str> = md.topics().iter().map(|t| t.name()).collect();
    let schema = k.schema_topic();
    let pattern = Regex::new(&format!("^{}\\..*", regex::escape(&k.topic_prefix)))
        .expect("an escaped prefix");
    let tables = names.iter().filter(|n| pattern.is_match(n)).count();
    let mut out = super::Checked::default();
    if names.contains(&schema.as_str()) {
        out.notes.push(format!(
            "kafka brokers {}: schema-change topic {schema}, {tables} table topic(s) under {}.",
            k.brokers, k.topic_prefix
        ));
    } else {
        out.problems.push(format!(
            "the schema-change topic {schema} does not exist on {}: it is Debezium's `topic.prefix` (set source.schema-topic when it differs)",
            k.brokers
        ));
    }
    Ok(out)
}

fn kerr(e: KafkaError) -> SourceError {
    SourceError::Connect(format!("kafka: {e}"))
}

/// What the reader loop does next.
enum Flow {
    Go,
    /// The engine is gone, or every partition is at its end (`stop_at_end`).
    Stop,
}

/// The Kafka reader: the schema-change topic read whole as the schema history, one
/// group consumer over the table topics, and what it has delivered.
struct Reader {
    src: Arc<super::config::Source>,
    k: KafkaConfig,
    tx: mpsc::Sender<SourceEvent>,
    commits: mpsc::UnboundedReceiver<Committed>,
    stop_at_end: bool,
    schema: BaseConsumer,
    schema_next: i64,
    /// When the schema topic was last read to its end (unix ms).
    schema_checked_ms: i64,
    history: SchemaHistory,
    queue: Vec<Ddl>,
    consumer: StreamConsumer<GroupContext>,
    rebalanced: Arc<AtomicBool>,
    pattern: String,
    topics_re: Regex,
    orphans_checked: Instant,
    orphans_since: Option<Instant>,
    tables: HashMap<(String, String), Arc<SourceTable>>,
    /// Partitions at their end (as of the last idle moment).
    at_end: BTreeSet<(String, i32)>,
    /// The next offset of each partition after what was delivered.
    next_offset: HashMap<(String, i32), i64>,
    /// The source position of the last message read from each partition (delivered
    /// or held back).
    seen: HashMap<(String, i32), Position>,
    /// The group has given this process an assignment (perhaps empty).
    member: bool,
    /// Partitions paused at a message that waits for a DDL on several tables (until
    /// the other tables are read up to it), and since when.
    held: Vec<(String, i32, Instant)>,
    delivered: u64,
}

pub async fn run(
    src: Arc<super::config::Source>,
    commits: mpsc::UnboundedReceiver<Committed>,
    tx: mpsc::Sender<SourceEvent>,
    stop_at_end: bool,
) -> Result<(), SourceError> {
    let mut r = Reader::open(src, commits, tx, stop_at_end)?;
    loop {
        // The engine stopped (SIGTERM, an error): nothing more to read.
        if r.tx.is_closed() {
            return Ok(());
        }
        if let Flow::Stop = r.housekeeping().await? {
            return Ok(());
        }
        let msg = match tokio::time::timeout(Duration::from_millis(200), r.consumer.recv()).await {
            Err(_) => None,
            Ok(Ok(m)) => Some(m.detach()),
            Ok(Err(e)) => return Err(kerr(e)),
        };
        let flow = match msg {
            None => r.idle().await?,
            Some(m) => match r.message(&m).await {
                Err(SourceError::Decode(reason)) => r.bad_message(&m, reason).await?,
                other => other?,
            },
        };
        if let Flow::Stop = flow {
            return Ok(());
        }
    }
}

impl Reader {
    fn open(
        src: Arc<super::config::Source>,
        commits: mpsc::UnboundedReceiver<Committed>,
        tx: mpsc::Sender<SourceEvent>,
        stop_at_end: bool,
    ) -> Result<Reader, SourceError> {
        let k = src.kafka().cloned().expect("a kafka source");
        // The schema history: the whole schema-change topic, from its start.
        let schema: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &k.brokers)
            .set("group.id", format!("{}-schema-reader", k.group_id))
            .set("enable.auto.commit", "false")
            .create()
            .map_err(kerr)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&k.schema_topic(), 0, Offset::Beginning)
            .map_err(kerr)?;
        schema.assign(&tpl).map_err(kerr)?;
        let mut queue: Vec<Ddl> = Vec::new();
        let mut schema_next = 0i64;
        read_schema_to_end(&schema, &k.schema_topic(), &mut schema_next, &mut queue)?;
        tracing::info!(
            "kafka: {} DDL in the schema-change topic {}",
            queue.len(),
            k.schema_topic()
        );
        let rebalanced = Arc::new(AtomicBool::new(false));
        let consumer = group_consumer(&k, rebalanced.clone())?;
        let pattern = format!("^{}\\..*", regex::escape(&k.topic_prefix));
        consumer.subscribe(&[&pattern]).map_err(kerr)?;
        let topics_re = Regex::new(&pattern).expect("an escaped prefix");
        Ok(Reader {
            src,
            k,
            tx,
            commits,
            stop_at_end,
            schema,
            schema_next,
            schema_checked_ms: crate::calendar::now_ms(),
            history: SchemaHistory::in_memory(),
            queue,
            consumer,
            rebalanced,
            pattern,
            topics_re,
            orphans_checked: Instant::now(),
            orphans_since: None,
            tables: HashMap::new(),
            at_end: BTreeSet::new(),
            next_offset: HashMap::new(),
            seen: HashMap::new(),
            member: false,
            held: Vec::new(),
            delivered: 0,
        })
    }

    /// Between messages: rebalances, a stuck assignment, the sink's committed offsets,
    /// new DDL.
    async fn housekeeping(&mut self) -> Result<Flow, SourceError> {
        if self.rebalanced.swap(false, Ordering::SeqCst) {
            self.member = true;
            self.orphans_since = None;
            self.at_end.clear();
            self.next_offset.clear();
            self.seen.clear();
            self.held.clear();
            if self.tx.send(SourceEvent::Rebalanced).await.is_err() {
                return Ok(Flow::Stop);
            }
        }
        self.check_orphans()?;
        // Held partitions are read again now and then: their message is looked at
        // again (the tables it waits for may be read up to its DDL by now).
        if self
            .held
            .first()
            .is_some_and(|h| h.2.elapsed() >= Duration::from_millis(100))
        {
            let mut tpl = TopicPartitionList::new();
            for (t, p, _) in self.held.drain(..) {
                tpl.add_partition(&t, p);
            }
            if let Err(e) = self.consumer.resume(&tpl) {
                tracing::debug!("kafka: resuming held partitions: {e}");
            }
        }
        // Offsets the sink committed become the group's (a starting hint).
        while let Ok(c) = self.commits.try_recv() {
            let mut tpl = TopicPartitionList::new();
            for (t, p, o) in c {
                let _ = tpl.add_partition_offset(&t, p, Offset::Offset(o));
            }
            if tpl.count() > 0 {
                if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
                    tracing::debug!("kafka: group offset commit: {e}");
                }
            }
        }
        // New DDL.
        while let Some(r) = self.schema.poll(Duration::ZERO) {
            match r {
                Ok(m) => {
                    self.schema_next = m.offset() + 1;
                    queue_ddl(&mut self.queue, m.payload())?
                }
                Err(e) => return Err(kerr(e)),
            }
        }
        Ok(Flow::Go)
    }

    /// A coordinator may keep a dead member's assignment after evicting it (tansu
    /// 0.6.0 does: a rebalance it starts itself hands back the old assignment), or
    /// leave a group unsettled. Partitions nobody owns for longer than [`orphaned`]
    /// allows make this process rejoin as a new member, so the assignment is made anew.
    fn check_orphans(&mut self) -> Result<(), SourceError> {
        if self.orphans_checked.elapsed() < Duration::from_secs(2) {
            return Ok(());
        }
        self.orphans_checked = Instant::now();
        // No assignment at all yet (not even an empty one): a join the coordinator
        // never answers (tansu 0.6.0, after members were killed in a row, left a new
        // member waiting for good). Past three session timeouts it joins again.
        if !self.member {
            let since = *self.orphans_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.session() * 3 {
                tracing::warn!(
                    "kafka: group {} gave this process no assignment within {:.0} s (the coordinator did not answer its join); joining again",
                    self.k.group_id,
                    since.elapsed().as_secs_f64()
                );
                self.consumer.unsubscribe();
                self.consumer.subscribe(&[&self.pattern]).map_err(kerr)?;
                self.orphans_since = None;
            }
            return Ok(());
        }
        match orphaned(
            &self.consumer,
            &self.k.group_id,
            &self.topics_re,
            self.member,
            self.session(),
        ) {
            None => self.orphans_since = None,
            Some(o) => {
                let since = *self.orphans_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= o.patience {
                    tracing::warn!(
                        "kafka: this process owns {} of {} partitions and no other member of the group owns the rest (the coordinator kept a departed member's assignment or did not settle); rejoining the group",
                        o.all - o.missing,
                        o.all
                    );
                    self.consumer.unsubscribe();
                    self.consumer.subscribe(&[&self.pattern]).map_err(kerr)?;
                    self.orphans_since = None;
                }
            }
        }
        Ok(())
    }

    /// Idle: which assigned partitions are at their end (the next offset to read,
    /// delivered or the group's, at the high watermark)? DDL of tables caught up is
    /// delivered; with `stop_at_end`, the reader stops when everything is read.
    async fn idle(&mut self) -> Result<Flow, SourceError> {
        let assigned: Vec<(String, i32)> = self
            .consumer
            .assignment()
            .map(|a| {
                a.elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .collect()
            })
            .unwrap_or_default();
        let committed = self.consumer.committed(Duration::from_secs(2)).ok();
        self.at_end.clear();
        for (t, p) in &assigned {
            let Ok((lo, hi)) = self
                .consumer
                .fetch_watermarks(t, *p, Duration::from_secs(2))
            else {
                continue;
            };
            let pos = self
                .next_offset
                .get(&(t.clone(), *p))
                .copied()
                .or_else(|| {
                    committed
                        .as_ref()
                        .and_then(|c| c.find_partition(t, *p))
                        .and_then(|e| match e.offset() {
                            Offset::Offset(n) => Some(n),
                            _ => None,
                        })
                })
                .unwrap_or(lo);
            if pos >= hi {
                self.at_end.insert((t.clone(), *p));
            }
        }
        // Caught up: DDL of the tables whose partitions are all at their end, or that
        // have no topic at all (a table made and never written: nothing of it is
        // unread). Tables are found by their topic as Debezium names it.
        let at_end = &self.at_end;
        let idle: BTreeSet<String> = assigned
            .iter()
            .filter(|(t, _)| {
                assigned
                    .iter()
                    .all(|(u, p)| u != t || at_end.contains(&(u.clone(), *p)))
            })
            .map(|(t, _)| t.to_lowercase())
            .collect();
        // (the cluster's topics: asked only while DDL waits)
        let existing: Option<BTreeSet<String>> = (!self.queue.is_empty())
            .then(|| {
                self.consumer
                    .fetch_metadata(None, Duration::from_secs(2))
                    .ok()
            })
            .flatten()
            .map(|md| {
                md.topics()
                    .iter()
                    .map(|t| t.name().to_lowercase())
                    .collect()
            });
        let k = self.k.clone();
        let caught_up = |table: &str| {
            let topic = k.topic_of(table).to_lowercase();
            idle.contains(&topic) || existing.as_ref().is_some_and(|e| !e.contains(&topic))
        };
        let ready = |d: &Ddl| !d.tables.is_empty() && d.tables.iter().all(|t| caught_up(t));
        if let Flow::Stop = self.deliver_ddl_where(ready).await? {
            return Ok(Flow::Stop);
        }
        if self.stop_at_end
            && !assigned.is_empty()
            && assigned.iter().all(|a| self.at_end.contains(a))
            && !self
                .queue
                .iter()
                .any(|d| d.tables.iter().any(|t| caught_up(t)))
            // The group's only member owning part of the partitions (the broker kept
            // a departed member's): not the end; it rejoins (`check_orphans`).
            && orphaned(
                &self.consumer,
                &self.k.group_id,
                &self.topics_re,
                self.member,
                self.session(),
            )
            .is_none()
        {
            tracing::info!(
                "kafka: every assigned partition is at its end ({} messages)",
                self.delivered
            );
            return Ok(Flow::Stop);
        }
        Ok(Flow::Go)
    }

    fn session(&self) -> Duration {
        Duration::from_millis(u64::from(self.k.session_timeout_ms))
    }

    /// Queued DDL that `ready` accepts, delivered in order.
    async fn deliver_ddl_where(
        &mut self,
        ready: impl Fn(&Ddl) -> bool,
    ) -> Result<Flow, SourceError> {
        let go = deliver_ddl(
            &self.src,
            &mut self.history,
            &mut self.queue,
            &mut self.tables,
            &self.tx,
            ready,
        )
        .await?;
        Ok(if go { Flow::Go } else { Flow::Stop })
    }

    /// A message that cannot be decoded: with `row-error-policy: skip`, appended to
    /// the dead-letter file (topic, partition, offset, reason, the payload as text)
    /// and passed over, its offset delivered; otherwise the error, with the fix.
    async fn bad_message(&mut self, m: &OwnedMessage, reason: String) -> Result<Flow, SourceError> {
        let Some(path) = self.src.bad_messages_to.clone() else {
            return Err(SourceError::Decode(format!(
                "{reason}. Every run stops at this message: set `pipeline.row-error-policy: skip` to write it to the dead-letter file and go on"
            )));
        };
        let (topic, partition, offset) = (m.topic().to_owned(), m.partition(), m.offset());
        let record = serde_json::json!({
            "kind": "message",
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "reason": reason,
            "key": m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
            "payload": m.payload().map(|p| String::from_utf8_lossy(p).into_owned()),
        });
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)
                .map_err(|e| SourceError::Decode(format!("{}: {e}", d.display())))?;
        }
        crate::durable::append_line(&path, &record.to_string())
            .map_err(|e| SourceError::Decode(format!("{}: {e}", path.display())))?;
        tracing::warn!(
            "{topic}/{partition}@{offset}: a message that cannot be decoded was written to {} (row-error-policy: skip)",
            path.display()
        );
        let end = (topic, partition, offset + 1);
        Ok(deliver(&self.tx, None, Vec::new(), end, Position::new("kafka", 0)).await)
    }

    /// The decoder of a captured table, made from its definition in the history.
    fn table(&mut self, db: &str, table: &str, at: &str) -> Result<Arc<SourceTable>, SourceError> {
        if let Some(t) = self.tables.get(&(db.to_owned(), table.to_owned())) {
            return Ok(t.clone());
        }
        let ir = self.history.table(db, table).ok_or_else(|| {
            SourceError::Decode(format!(
                "{at}: table {db}.{table} has no definition in the schema-change topic {}",
                self.k.schema_topic()
            ))
        })?;
        let over = self.src.key_overrides.get(&format!("{db}.{table}"));
        // Debezium's JSON holds text as text: the columns' character sets (one the
        // binlog decoder has no table of, geostd8) play no part.
        let mut ir = ir.clone();
        for c in &mut ir.columns {
            c.charset = None;
            c.collation = None;
        }
        for k in ["charset", "collate", "collation"] {
            ir.options.remove(k);
        }
        let t = Arc::new(
            SourceTable::from_ir(db, &ir, over.map(|v| v.as_slice())).map_err(SourceError::from)?,
        );
        self.tables
            .insert((db.to_owned(), table.to_owned()), t.clone());
        Ok(t)
    }

    /// One message of a table topic: its DDL first, then its change, delivered whole
    /// with the offset after it.
    async fn message(&mut self, m: &OwnedMessage) -> Result<Flow, SourceError> {
        // The schema-change topic is not ordered with the data topics: a DDL that
        // precedes this message was written to it before this message was (Debezium
        // writes in binlog order). Unless this message is older than the last look
        // (by its timestamp, with a second of slack), read the schema topic up to its
        // end now, so the DDL is known before the message is decoded.
        let created = m.timestamp().to_millis();
        if created.is_none_or(|t| t >= self.schema_checked_ms - 1000) {
            let now = crate::calendar::now_ms();
            let topic = self.k.schema_topic();
            read_schema_to_end(&self.schema, &topic, &mut self.schema_next, &mut self.queue)?;
            self.schema_checked_ms = now;
        }
        let topic = m.topic().to_owned();
        let partition = m.partition();
        let offset = m.offset();
        let next = offset + 1;
        let at = format!("{topic}/{partition}@{offset}");
        let Some((db, table)) = self
            .k
            .table_of(&topic)
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        else {
            return Ok(Flow::Go);
        };
        let Some(bytes) = m.payload() else {
            // A tombstone (after a delete): nothing to apply; its offset still counts.
            self.next_offset.insert((topic.clone(), partition), next);
            let position = Position::new("kafka", 0);
            return Ok(deliver(
                &self.tx,
                None,
                Vec::new(),
                (topic, partition, next),
                position,
            )
            .await);
        };
        let v: J = serde_json::from_slice(bytes)
            .map_err(|e| SourceError::Decode(format!("{at}: not JSON: {e}")))?;
        let v = payload(v);
        let source = v.get("source").cloned().unwrap_or(J::Null);
        let position = position_of(&source).ok_or_else(|| {
            SourceError::Decode(format!(
                "{at}: no source position (source.file, source.pos)"
            ))
        })?;
        let db = source
            .get("db")
            .and_then(J::as_str)
            .unwrap_or(&db)
            .to_owned();
        let table = source
            .get("table")
            .and_then(J::as_str)
            .unwrap_or(&table)
            .to_owned();
        // DDL on this table from before this message comes first; a DDL that also
        // names other tables waits until they are read up to it (a rename's old
        // name may still have earlier messages unread): the partition is held.
        let name = format!("{db}.{table}").to_lowercase();
        self.seen
            .insert((topic.clone(), partition), position.clone());
        if self.waits(&name, &position) {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&topic, partition);
            self.consumer.pause(&tpl).map_err(kerr)?;
            self.consumer
                .seek(
                    &topic,
                    partition,
                    Offset::Offset(offset),
                    Duration::from_secs(10),
                )
                .map_err(kerr)?;
            self.held.push((topic, partition, Instant::now()));
            return Ok(Flow::Go);
        }
        self.next_offset.insert((topic.clone(), partition), next);
        let before =
            |d: &Ddl| d.position < position && (d.tables.is_empty() || d.tables.contains(&name));
        if let Flow::Stop = self.deliver_ddl_where(before).await? {
            return Ok(Flow::Stop);
        }
        if !self.src.captures(&db, &table) {
            return Ok(Flow::Go);
        }
        let st = self.table(&db, &table, &at)?;
        let end = (topic, partition, next);
        self.change(&v, &source, st, (&db, &table), &at, end, position)
            .await
    }

    /// Whether a message of table `name` at `position` must wait: a queued DDL before
    /// it names `name` and another table not yet read up to that DDL (a partition of
    /// it assigned here, not at its end, whose last message read is older).
    fn waits(&self, name: &str, position: &Position) -> bool {
        // (every message asks: the assignment is read only when a DDL before it
        // names this table and another)
        let multi =
            |d: &Ddl| d.position < *position && d.tables.contains(name) && d.tables.len() > 1;
        if !self.queue.iter().any(multi) {
            return false;
        }
        let assigned: Vec<(String, i32)> = match self.consumer.assignment() {
            Ok(a) => a
                .elements()
                .iter()
                .map(|e| (e.topic().to_owned(), e.partition()))
                .collect(),
            Err(_) => return false,
        };
        let reached = |table: &str, at: &Position| {
            let topic = self.k.topic_of(table).to_lowercase();
            assigned
                .iter()
                .filter(|(t, _)| t.to_lowercase() == topic)
                .all(|(t, p)| {
                    let key = (t.clone(), *p);
                    self.at_end.contains(&key) || self.seen.get(&key).is_some_and(|s| s > at)
                })
        };
        self.queue.iter().filter(|d| multi(d)).any(|d| {
            d.tables
                .iter()
                .any(|u| u != name && !reached(u, &d.position))
        })
    }

    /// A message's change: its row images decoded (a truncate: a schema event of its
    /// own), delivered with the offset after it.
    #[allow(clippy::too_many_arguments)]
    async fn change(
        &mut self,
        v: &J,
        source: &J,
        st: Arc<SourceTable>,
        (db, table): (&str, &str),
        at: &str,
        end: (String, i32, i64),
        position: Position,
    ) -> Result<Flow, SourceError> {
        let image = |key: &str| -> Result<Option<arrow_array::RecordBatch>, SourceError> {
            match v.get(key) {
                None | Some(J::Null) => Ok(None),
                Some(row) => decode_row(&st, row, key == "after")
                    .map(Some)
                    .map_err(|e| SourceError::Decode(format!("{at}: {e}"))),
            }
        };
        let (op, before, after) = match v.get("op").and_then(J::as_str).unwrap_or("") {
            "c" | "r" => (Op::Insert, None, image("after")?),
            "u" => match image("before")? {
                Some(b) => (Op::Update, Some(b), image("after")?),
                None => (Op::Insert, None, image("after")?),
            },
            "d" => (Op::Delete, image("before")?, None),
            "t" => {
                // A truncate: a schema event of its own, in order with the table's rows.
                let ev = SourceEvent::Schema {
                    position: position.clone(),
                    db: db.to_owned(),
                    ddl: format!(
                        "TRUNCATE TABLE `{db}`.`{table}` /* Debezium truncate event {at} */"
                    ),
                    changes: vec![ddl_core::SchemaChange::TruncateTable {
                        name: ddl_core::TableName::new(Some(db), table),
                    }],
                    tables: vec![format!("{db}.{table}")],
                    notes: Vec::new(),
                    after: self.history.table(db, table).cloned().into_iter().collect(),
                };
                self.delivered += 1;
                return Ok(deliver(&self.tx, Some(ev), Vec::new(), end, position).await);
            }
            other => return Err(SourceError::Decode(format!("{at}: unknown op `{other}`"))),
        };
        if before.is_none() && after.is_none() {
            return Ok(Flow::Go);
        }
        let ts = v
            .get("ts_ms")
            .or_else(|| source.get("ts_ms"))
            .and_then(J::as_u64)
            .map(|ms| (ms / 1000) as u32)
            .unwrap_or(0);
        let batch = RowBatch {
            table: st,
            op,
            before,
            after,
            positions: vec![RowPos {
                txn: 0,
                ordinal: position.ordinal as u32,
                at: ts,
            }],
            txns: Arc::new(vec![Position {
                ordinal: 0,
                ..position.clone()
            }]),
            unchanged: Vec::new(),
            complete: true,
        };
        self.delivered += 1;
        Ok(deliver(&self.tx, None, vec![batch], end, position).await)
    }
}

/// The group consumer over the table topics.
fn group_consumer(
    k: &KafkaConfig,
    rebalanced: Arc<AtomicBool>,
) -> Result<StreamConsumer<GroupContext>, SourceError> {
    let mut cfg = ClientConfig::new();
    // librdkafka's own debug contexts (LAKESHIFT_KAFKA_DEBUG=consumer,cgrp,fetch),
    // logged through LAKESHIFT_LOG=rdkafka=debug.
    if let Ok(d) = std::env::var("LAKESHIFT_KAFKA_DEBUG") {
        cfg.set("debug", d);
    }
    cfg.set("bootstrap.servers", &k.brokers)
        .set("group.id", &k.group_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        // Table topics have one partition each (Debezium's default): the range
        // assignor would give every topic's partition 0 to one member.
        .set("partition.assignment.strategy", "roundrobin")
        .set("session.timeout.ms", k.session_timeout_ms.to_string())
        .set(
            "heartbeat.interval.ms",
            (k.session_timeout_ms / 6).max(100).to_string(),
        )
        .set("topic.metadata.refresh.interval.ms", "2000")
        .create_with_context(GroupContext { rebalanced })
        .map_err(kerr)
}

/// Send a message whole: the change event it carries, if any (a truncate), then its
/// rows with where it ends; `Stop`: the engine is gone.
async fn deliver(
    tx: &mpsc::Sender<SourceEvent>,
    event: Option<SourceEvent>,
    rows: Vec<RowBatch>,
    (topic, partition, next): (String, i32, i64),
    position: Position,
) -> Flow {
    if let Some(e) = event {
        if tx.send(e).await.is_err() {
            return Flow::Stop;
        }
    }
    let m = super::Message {
        rows,
        topic,
        partition,
        next,
        position,
    };
    match tx.send(SourceEvent::Message(m)).await {
        Ok(()) => Flow::Go,
        Err(_) => Flow::Stop,
    }
}
