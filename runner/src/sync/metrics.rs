//! Job metrics: shared counters, a progress line, and a Prometheus text endpoint
//! (`pipeline.metrics-port`).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
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
}

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
        Arc::new(m)
    }

    pub fn render(&self, job: &str) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let age = match self.checkpoint_at_ms.load(Ordering::Relaxed) {
            0 => -1.0,
            t => (now_ms() - t) as f64 / 1000.0,
        };
        let l = format!("{{job=\"{}\"}}", label_value(job));
        format!(
            "# HELP lakeshift_rows_total Row changes applied.\n# TYPE lakeshift_rows_total counter\nlakeshift_rows_total{l} {}\n\
             # HELP lakeshift_commits_total Iceberg commits.\n# TYPE lakeshift_commits_total counter\nlakeshift_commits_total{l} {}\n\
             # HELP lakeshift_commit_seconds Time spent committing.\n# TYPE lakeshift_commit_seconds summary\nlakeshift_commit_seconds_sum{l} {:.6}\nlakeshift_commit_seconds_count{l} {}\n\
             # HELP lakeshift_checkpoint_id Last checkpoint.\n# TYPE lakeshift_checkpoint_id gauge\nlakeshift_checkpoint_id{l} {}\n\
             # HELP lakeshift_checkpoint_age_seconds Seconds since the last checkpoint (-1: none).\n# TYPE lakeshift_checkpoint_age_seconds gauge\nlakeshift_checkpoint_age_seconds{l} {age:.3}\n\
             # HELP lakeshift_lag_bytes Binlog bytes not yet read (-1: unknown).\n# TYPE lakeshift_lag_bytes gauge\nlakeshift_lag_bytes{l} {}\n\
             # HELP lakeshift_lag_seconds Source time behind now (-1: unknown).\n# TYPE lakeshift_lag_seconds gauge\nlakeshift_lag_seconds{l} {}\n",
            g(&self.rows),
            g(&self.commits),
            g(&self.commit_micros) as f64 / 1e6,
            g(&self.commits),
            g(&self.checkpoint),
            self.lag_bytes.load(Ordering::Relaxed),
            self.lag_seconds.load(Ordering::Relaxed),
        )
    }
}

/// Serve `GET /metrics` on 127.0.0.1:`port` until the process ends.
pub async fn serve(port: u16, job: String, m: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let body = m.render(&job);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = sock.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_cannot_add_lines_to_the_metrics() {
        let m = Metrics::new();
        let out = m.render("evil\"} 1\nlakeshift_rows_total{job=\"x\\");
        // Every line is a comment or one of the known series, and each series once.
        let series: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(series.len(), 8, "{out}");
        assert!(series.iter().all(|l| l.starts_with("lakeshift_")), "{out}");
        assert!(
            out.contains(r#"job="evil\"} 1\nlakeshift_rows_total{job=\"x\\""#),
            "{out}"
        );
    }
}
