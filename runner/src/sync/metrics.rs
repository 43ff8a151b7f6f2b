//! Job metrics: shared counters, a progress line, and an HTTP endpoint
//! (`pipeline.metrics-address` or `metrics-port`) serving Prometheus text on
//! `/metrics`, liveness on `/health` and readiness on `/ready`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Default)]
pub struct Metrics {
    pub rows: AtomicU64,
    pub commits: AtomicU64,
    pub commit_micros: AtomicU64,
    pub checkpoint: AtomicU64,
    /// Unix milliseconds of the last checkpoint.
    pub checkpoint_at_ms: AtomicI64,
    /// Binlog bytes between the server's end and the job's position (-1: unknown).
    pub lag_bytes: AtomicI64,
    /// Seconds between now and the source time of the last transaction (-1: unknown).
    pub lag_seconds: AtomicI64,
    /// DDL applied to the target, and skipped (a policy, or nothing to do).
    pub ddl_applied: AtomicU64,
    pub ddl_skipped: AtomicU64,
    /// Runs started again after an error (the target unreachable, a lost source).
    pub restarts: AtomicU64,
    /// Snapshot rows read (the initial copy and tables read again).
    pub snapshot_rows: AtomicU64,
    /// The table a snapshot reads now: rows read of it, and the source's estimate.
    pub snapshot: Mutex<Option<(String, u64, u64)>>,
    /// Row changes read per source table (`db.table`).
    pub tables: Mutex<BTreeMap<String, u64>>,
    /// Reading the source and committing: what `/ready` answers.
    pub ready: AtomicBool,
    /// Why not ready (empty while ready).
    pub not_ready: Mutex<String>,
}

/// The version and commit this binary was built from, for `lakeshift_build_info`.
pub static BUILD: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

/// When the next progress line is due, and the rate since the last one.
#[derive(Debug)]
pub struct ProgressClock {
    last: std::time::Instant,
    rows_at: u64,
}

impl ProgressClock {
    pub fn new() -> Self {
        ProgressClock {
            last: std::time::Instant::now(),
            rows_at: 0,
        }
    }

    /// Every `every` seconds (0: never): row changes per second since the last line.
    pub fn due(&mut self, every: f64, rows: u64) -> Option<f64> {
        let secs = self.last.elapsed().as_secs_f64();
        if every <= 0.0 || secs < every {
            return None;
        }
        let rate = rows.saturating_sub(self.rows_at) as f64 / secs;
        self.last = std::time::Instant::now();
        self.rows_at = rows;
        Some(rate)
    }
}

impl Default for ProgressClock {
    fn default() -> Self {
        Self::new()
    }
}

pub use crate::calendar::now_ms;

/// A Prometheus label value: backslash, double quote and line feed escaped, so a job
/// name cannot end the label or add lines to the output.
fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let m = Metrics::default();
        m.lag_bytes.store(-1, Ordering::Relaxed);
        m.lag_seconds.store(-1, Ordering::Relaxed);
        *m.not_ready.lock().unwrap() = "starting".into();
        Arc::new(m)
    }

    /// Ready: the source is read and commits go through.
    pub fn set_ready(&self) {
        if !self.ready.swap(true, Ordering::Relaxed) {
            self.not_ready.lock().unwrap().clear();
        }
    }

    /// Not ready, and why (said by `/ready`).
    pub fn set_not_ready(&self, why: impl Into<String>) {
        self.ready.store(false, Ordering::Relaxed);
        *self.not_ready.lock().unwrap() = why.into();
    }

    /// `n` row changes of source table `table` read.
    pub fn table_rows(&self, table: &str, n: u64) {
        let mut t = self.tables.lock().unwrap();
        match t.get_mut(table) {
            Some(c) => *c += n,
            None => {
                t.insert(table.to_owned(), n);
            }
        }
    }

    /// The Prometheus text of every series. A value that is not known yet (no
    /// checkpoint, no lag measured) is left out rather than given as a sentinel.
    pub fn render(&self, job: &str) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let j = label_value(job);
        let l = format!("{{job=\"{j}\"}}");
        let mut out = String::new();
        let one = |v: String| vec![(l.clone(), v)];
        let (version, commit) = BUILD.get().cloned().unwrap_or_default();
        family(
            &mut out,
            "lakeshift_build_info",
            "gauge",
            "The lakeshift version and commit this process runs.",
            &[(
                format!(
                    "{{job=\"{j}\",version=\"{}\",commit=\"{}\"}}",
                    label_value(&version),
                    label_value(&commit)
                ),
                "1".into(),
            )],
        );
        family(
            &mut out,
            "lakeshift_ready",
            "gauge",
            "1 while the source is read and commits go through (what /ready answers).",
            &one(u8::from(self.ready.load(Ordering::Relaxed)).to_string()),
        );
        family(
            &mut out,
            "lakeshift_rows_total",
            "counter",
            "Row changes applied to the target.",
            &one(g(&self.rows).to_string()),
        );
        family(
            &mut out,
            "lakeshift_commits_total",
            "counter",
            "Commits to the target (Iceberg commits, or target transactions).",
            &one(g(&self.commits).to_string()),
        );
        out.push_str(&format!(
            "# HELP lakeshift_commit_seconds Time spent committing.\n# TYPE lakeshift_commit_seconds summary\nlakeshift_commit_seconds_sum{l} {:.6}\nlakeshift_commit_seconds_count{l} {}\n",
            g(&self.commit_micros) as f64 / 1e6,
            g(&self.commits)
        ));
        family(
            &mut out,
            "lakeshift_checkpoint_id",
            "gauge",
            "The last checkpoint committed.",
            &one(g(&self.checkpoint).to_string()),
        );
        let at = self.checkpoint_at_ms.load(Ordering::Relaxed);
        family(
            &mut out,
            "lakeshift_checkpoint_age_seconds",
            "gauge",
            "Seconds since the last checkpoint this process committed (absent before the first).",
            &if at == 0 {
                Vec::new()
            } else {
                one(format!("{:.3}", (now_ms() - at) as f64 / 1000.0))
            },
        );
        let known = |v: i64| {
            if v < 0 {
                Vec::new()
            } else {
                one(v.to_string())
            }
        };
        family(
            &mut out,
            "lakeshift_lag_bytes",
            "gauge",
            "Source log bytes not yet read (absent until measured).",
            &known(self.lag_bytes.load(Ordering::Relaxed)),
        );
        family(
            &mut out,
            "lakeshift_lag_seconds",
            "gauge",
            "Source commit time of the last transaction read, behind now (absent until one is read).",
            &known(self.lag_seconds.load(Ordering::Relaxed)),
        );
        family(
            &mut out,
            "lakeshift_ddl_total",
            "counter",
            "DDL met in the source, by what became of it.",
            &[
                (
                    format!("{{job=\"{j}\",outcome=\"applied\"}}"),
                    g(&self.ddl_applied).to_string(),
                ),
                (
                    format!("{{job=\"{j}\",outcome=\"skipped\"}}"),
                    g(&self.ddl_skipped).to_string(),
                ),
            ],
        );
        family(
            &mut out,
            "lakeshift_restarts_total",
            "counter",
            "Runs started again after an error (an unreachable target, a lost source).",
            &one(g(&self.restarts).to_string()),
        );
        family(
            &mut out,
            "lakeshift_snapshot_rows_total",
            "counter",
            "Rows read by snapshots (the initial copy, tables read again).",
            &one(g(&self.snapshot_rows).to_string()),
        );
        let snap = self.snapshot.lock().unwrap().clone();
        family(
            &mut out,
            "lakeshift_snapshot_in_progress",
            "gauge",
            "1 while a snapshot is read.",
            &one(u8::from(snap.is_some()).to_string()),
        );
        let table_label = |t: &str| format!("{{job=\"{j}\",table=\"{}\"}}", label_value(t));
        let (done, estimate) = match &snap {
            Some((t, d, e)) => (
                vec![(table_label(t), d.to_string())],
                vec![(table_label(t), e.to_string())],
            ),
            None => (Vec::new(), Vec::new()),
        };
        family(
            &mut out,
            "lakeshift_snapshot_table_rows_read",
            "gauge",
            "Rows read of the table a snapshot reads now.",
            &done,
        );
        family(
            &mut out,
            "lakeshift_snapshot_table_rows_estimate",
            "gauge",
            "The source's estimate of the rows of the table a snapshot reads now.",
            &estimate,
        );
        let tables: Vec<(String, String)> = self
            .tables
            .lock()
            .unwrap()
            .iter()
            .map(|(t, n)| (table_label(t), n.to_string()))
            .collect();
        family(
            &mut out,
            "lakeshift_table_changes_total",
            "counter",
            "Row changes read per source table and handed to the sink (committed at the next checkpoint).",
            &tables,
        );
        out
    }
}

/// One metric family: its HELP and TYPE lines and its samples (labels, value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    for (labels, v) in samples {
        out.push_str(&format!("{name}{labels} {v}\n"));
    }
}

/// Serve `/metrics`, `/health` and `/ready` on `addr` until the process ends.
pub async fn serve(addr: &str, job: String, m: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let (m, job) = (m.clone(), job.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let (status, kind, body) = answer(&buf[..n], &job, &m);
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    Ok(())
}

/// The status line, content type and body for a request's first bytes.
fn answer(request: &[u8], job: &str, m: &Metrics) -> (&'static str, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    let line = String::from_utf8_lossy(request);
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .split('?')
        .next()
        .unwrap_or("/");
    match path {
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", m.render(job)),
        "/health" | "/healthz" => ("200 OK", TEXT, "ok\n".into()),
        "/ready" | "/readyz" if m.ready.load(Ordering::Relaxed) => {
            ("200 OK", TEXT, "ready\n".into())
        }
        "/ready" | "/readyz" => (
            "503 Service Unavailable",
            TEXT,
            format!("not ready: {}\n", m.not_ready.lock().unwrap()),
        ),
        _ => (
            "404 Not Found",
            TEXT,
            "not found: /metrics, /health and /ready are served\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_cannot_add_lines_to_the_metrics() {
        let m = Metrics::new();
        m.table_rows("shop.\"x\ny", 3);
        let out = m.render("evil\"} 1\nlakeshift_rows_total{job=\"x\\");
        // Every line is a comment or a series of lakeshift's.
        let series: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(series.iter().all(|l| l.starts_with("lakeshift_")), "{out}");
        assert_eq!(
            series
                .iter()
                .filter(|l| l.starts_with("lakeshift_rows_total"))
                .count(),
            1,
            "{out}"
        );
        assert!(
            out.contains(r#"job="evil\"} 1\nlakeshift_rows_total{job=\"x\\""#),
            "{out}"
        );
        assert!(out.contains(r#"table="shop.\"x\ny"} 3"#), "{out}");
    }

    #[test]
    fn values_not_known_yet_are_left_out_not_given_as_sentinels() {
        let m = Metrics::new();
        let out = m.render("j");
        for name in [
            "lakeshift_lag_seconds",
            "lakeshift_lag_bytes",
            "lakeshift_checkpoint_age_seconds",
        ] {
            assert!(out.contains(&format!("# TYPE {name} gauge")), "{out}");
            assert!(!out.contains(&format!("{name}{{")), "{name}: {out}");
        }
        m.lag_seconds.store(0, Ordering::Relaxed);
        assert!(m.render("j").contains("lakeshift_lag_seconds{job=\"j\"} 0"));
        assert!(!out.lines().any(|l| l.ends_with(" -1")), "{out}");
    }

    #[test]
    fn health_ready_and_metrics_are_served_by_path() {
        let m = Metrics::new();
        let get = |path: &str| answer(format!("GET {path} HTTP/1.1\r\n").as_bytes(), "j", &m);
        assert_eq!(get("/health").0, "200 OK");
        let (status, _, body) = get("/ready");
        assert_eq!(
            (status, body.as_str()),
            ("503 Service Unavailable", "not ready: starting\n")
        );
        m.set_ready();
        assert_eq!(get("/ready").0, "200 OK");
        m.set_not_ready("the target did not answer");
        assert!(get("/ready").2.contains("the target did not answer"));
        let (status, kind, body) = get("/metrics?x=1");
        assert_eq!((status, kind), ("200 OK", "text/plain; version=0.0.4"));
        assert!(body.contains("lakeshift_ready{job=\"j\"} 0"), "{body}");
        assert_eq!(get("/").0, "404 Not Found");
    }

    /// The Grafana dashboard in docs/ asks only for series the job exports.
    #[test]
    fn the_dashboard_reads_only_exported_series() {
        let m = Metrics::new();
        m.table_rows("a.b", 1);
        *m.snapshot.lock().unwrap() = Some(("a.b".into(), 1, 2));
        m.lag_seconds.store(1, Ordering::Relaxed);
        m.lag_bytes.store(1, Ordering::Relaxed);
        m.checkpoint_at_ms.store(1, Ordering::Relaxed);
        let out = m.render("j");
        let exported: std::collections::BTreeSet<&str> = out
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .collect();
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/grafana-dashboard.json")).unwrap();
        let mut asked = 0;
        for p in dashboard["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().unwrap() {
                let expr = t["expr"].as_str().unwrap();
                let mut rest = expr;
                while let Some(i) = rest.find("lakeshift_") {
                    let name: String = rest[i..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    assert!(
                        exported.contains(name.as_str()),
                        "{name} ({expr}) is not exported: {exported:?}"
                    );
                    asked += 1;
                    rest = &rest[i + name.len()..];
                }
            }
        }
        assert!(asked >= 12, "{asked}");
        // And every family the job exports is on the dashboard.
        for name in &exported {
            let base = name.trim_end_matches("_sum").trim_end_matches("_count");
            assert!(
                dashboard.to_string().contains(base),
                "{name} is exported but on no panel"
            );
        }
    }
}
