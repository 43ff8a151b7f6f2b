//! The commands that run jobs and read their state: `sync`, `tail`, `apply`,
//! `status`, `ddl-log` (the `sync` feature).

use super::*;

pub(super) fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            None
        }
    }
}

pub(super) fn read_job(config: &std::path::Path) -> Result<runner::sync::job::SyncJob, ExitCode> {
    read_job_with(config, |k| std::env::var(k).ok())
}

/// [`read_job`] with `env` for the environment.
fn read_job_with(
    config: &std::path::Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<runner::sync::job::SyncJob, ExitCode> {
    let text = std::fs::read_to_string(config).map_err(|e| {
        eprintln!("error: cannot read {}: {e}", config.display());
        ExitCode::from(2)
    })?;
    runner::sync::job::parse(&text, env).map_err(|e| {
        eprintln!("error: {}", e.report(config));
        ExitCode::from(2)
    })
}

pub(super) fn sync(config: &std::path::Path, until_end: bool) -> ExitCode {
    let job = match read_job(config) {
        Ok(j) => j,
        Err(c) => return c,
    };
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    // One process per job: held until this function returns.
    let _lock = match runner::sync::owner::lock(&job.pipeline.state, &job.pipeline.name) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if job.sink.iceberg().is_some() {
        rt.block_on(run_job(&job, until_end, || {
            runner::sync::engine::Engine::open(job.clone())
        }))
    } else {
        rt.block_on(run_job(&job, until_end, || {
            runner::sync::rdb::RdbEngine::open(job.clone())
        }))
    }
}

/// Restarts in a row (without a commit between) of a Kafka group member fenced off
/// by another member, before it gives up.
const FENCED_RESTARTS: u32 = 20;

/// Why a job asked to stop exits 1 when its target does not answer: a stop does not
/// wait out an outage.
const STOPPED_WITHOUT_TARGET: &str = "stopping: the target did not answer, so what was read since the last checkpoint was not committed (the next run reads it again)";

/// The job's source joined to the sink `open` makes, with the metrics endpoint and
/// SIGTERM. A Kafka group member whose commit another member fenced off (a
/// rebalance moved a partition it had read, and the new owner committed first)
/// starts again from the offsets the target holds, as a restarted process would:
/// with two members fencing each other during one rebalance, stopping would leave
/// the group without either.
async fn run_job<S, F, Fut>(job: &runner::sync::job::SyncJob, until_end: bool, open: F) -> ExitCode
where
    S: runner::sync::pipeline::Sink,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<S, runner::sync::error::SyncError>>,
{
    let started = std::time::Instant::now();
    // The banner: what runs, from where, into what (no credentials).
    use runner::source::config::SourceKind;
    let source = match &job.source.kind {
        SourceKind::Binlog(c) => format!("{} {}:{}", c.kind, c.hostname, c.port),
        SourceKind::Postgres(c) => format!("postgres {}:{}/{}", c.hostname, c.port, c.database),
        SourceKind::Kafka(c) => format!("kafka {} (group {})", c.brokers, c.group_id),
    };
    tracing::info!(
        "lakeshift {}: job {}, source {source}, sink {}, state {}",
        crate::VERSION,
        job.pipeline.name,
        job.sink.kind(),
        job.pipeline.state.display()
    );
    let metrics = runner::sync::metrics::Metrics::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = runner::sync::metrics::BUILD.set((
        env!("CARGO_PKG_VERSION").to_owned(),
        include_str!(concat!(env!("OUT_DIR"), "/commit.txt")).to_owned(),
    ));
    if let Some(addr) = job.pipeline.metrics_addr() {
        let name = job.pipeline.name.clone();
        if let Err(e) = runner::sync::metrics::serve(&addr, name, metrics.clone()).await {
            eprintln!("error: metrics endpoint on {addr}: {e}");
            return ExitCode::from(1);
        }
        tracing::info!("metrics on http://{addr}/metrics (also /health and /ready)");
    }
    // SIGTERM and Ctrl-C: finish what was read, commit it, stop.
    tokio::spawn(stop_on_signal(stop.clone()));
    let mut restarts = 0;
    // Starts again while the target does not answer (each waits longer), for up to
    // `target-retry-seconds` from the first failure in a row.
    let mut retry = Retry::new(job.pipeline.target_retry_seconds);
    loop {
        let sink = match open().await {
            Ok(s) => s,
            // The target's connection failed or was lost while the sink opened (a
            // server restarting): tried again, for a bounded time.
            Err(e)
                if e.kind == runner::sync::error::ErrorKind::Transient
                    && !stop.load(std::sync::atomic::Ordering::SeqCst)
                    && retry.again(false, &e, "the target is unreachable") =>
            {
                metrics.set_not_ready(format!("the target is unreachable: {e}"));
                retry.wait().await;
                continue;
            }
            Err(e) => {
                eprintln!("error: {e}");
                runner::sync::status::record_error(&job.pipeline.state, &e.to_string());
                if e.kind == runner::sync::error::ErrorKind::Transient
                    && stop.load(std::sync::atomic::Ordering::SeqCst)
                {
                    eprintln!("{STOPPED_WITHOUT_TARGET}");
                }
                return ExitCode::from(1);
            }
        };
        let mut p = runner::sync::pipeline::Pipeline::new(job, sink);
        p.stop = stop.clone();
        p.metrics = metrics.clone();
        let res = p.run(until_end).await;
        let st = runner::sync::pipeline::Sink::status(&p.sink);
        match res {
            Ok(()) => {
                tracing::info!(
                    "done: {} row change(s), {} DDL, {} commit(s) in {:.1} s",
                    st.rows,
                    st.ddls,
                    st.commits,
                    started.elapsed().as_secs_f64()
                );
                runner::sync::status::clear_error(&job.pipeline.state);
                return ExitCode::from(0);
            }
            Err(e)
                if e.kind == runner::sync::error::ErrorKind::Fenced
                    && job.source.kafka().is_some()
                    && !stop.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                if st.commits > 0 {
                    restarts = 0;
                }
                restarts += 1;
                if restarts > FENCED_RESTARTS {
                    eprintln!("error: {e}");
                    runner::sync::status::record_error(&job.pipeline.state, &e.to_string());
                    eprintln!("fenced off {FENCED_RESTARTS} times in a row without a commit; the job stopped; run it again to resume from its last checkpoint");
                    return ExitCode::from(1);
                }
                tracing::warn!(
                    "{e}; starting again from the offsets the target holds (restart {restarts})"
                );
                drop(p);
                metrics.set_not_ready(format!("starting again after: {e}"));
                metrics
                    .restarts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(std::time::Duration::from_millis(250 * u64::from(restarts)))
                    .await;
            }
            // The target's connection was lost (a restart, a network fault): the job
            // starts again from the last checkpoint the target holds, as a new
            // process would. Also while stopping: the new run stops at once, cleanly,
            // and what the lost commit held is read again by the next run.
            Err(e)
                if e.kind == runner::sync::error::ErrorKind::Transient
                    && retry.again_after(
                        st.commits > 0,
                        stop.load(std::sync::atomic::Ordering::SeqCst),
                        &e,
                        "the target did not answer",
                    ) =>
            {
                drop(p);
                metrics.set_not_ready(format!("the target did not answer: {e}"));
                metrics
                    .restarts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                retry.wait().await;
            }
            Err(e) => {
                eprintln!("error: {e}");
                runner::sync::status::record_error(&job.pipeline.state, &e.to_string());
                if e.kind == runner::sync::error::ErrorKind::Transient
                    && stop.load(std::sync::atomic::Ordering::SeqCst)
                {
                    eprintln!("{STOPPED_WITHOUT_TARGET}");
                } else if e.kind == runner::sync::error::ErrorKind::Transient && retry.tries > 0 {
                    eprintln!(
                        "the target did not answer for {:.0} s (pipeline.target-retry-seconds: {})",
                        retry.since.map_or(0.0, |t| t.elapsed().as_secs_f64()),
                        job.pipeline.target_retry_seconds
                    );
                }
                if e.kind == runner::sync::error::ErrorKind::NeedsFix {
                    eprintln!("the job stopped; fix what the error names, then run it again (it resumes from its last checkpoint)");
                } else {
                    eprintln!("the job stopped; run it again to resume from its last checkpoint");
                }
                return ExitCode::from(1);
            }
        }
    }
}

/// Starting again while the target does not answer: growing waits (0.5 s more each
/// time, up to 8 s), for up to a time limit from the first failure in a row; a
/// commit between two failures starts a new row.
struct Retry {
    limit: std::time::Duration,
    since: Option<std::time::Instant>,
    tries: u32,
}

impl Retry {
    fn new(limit_seconds: f64) -> Self {
        Retry {
            limit: std::time::Duration::from_secs_f64(limit_seconds),
            since: None,
            tries: 0,
        }
    }

    /// Whether to start again after `e` (logged with `what` when so). A job asked
    /// to stop does not: a stop must not wait out an outage (an attempt on a store
    /// that does not answer takes opendal's timeouts, about 30 s), and what it read
    /// is read again by the next run.
    fn again(&mut self, stopping: bool, e: &runner::sync::error::SyncError, what: &str) -> bool {
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if stopping || since.elapsed() >= self.limit {
            return false;
        }
        self.tries += 1;
        tracing::warn!(
            "{what} ({e}); trying again from the last checkpoint in {:.1} s (attempt {}, {:.0} s of pipeline.target-retry-seconds left)",
            self.next_wait().as_secs_f64(),
            self.tries,
            self.limit.saturating_sub(since.elapsed()).as_secs_f64()
        );
        true
    }

    /// [`Retry::again`] after a run that committed (`progressed`: a new row of
    /// failures) or not.
    fn again_after(
        &mut self,
        progressed: bool,
        stopping: bool,
        e: &runner::sync::error::SyncError,
        what: &str,
    ) -> bool {
        if progressed {
            self.since = None;
            self.tries = 0;
        }
        self.again(stopping, e, what)
    }

    fn next_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis(500 * u64::from(self.tries.clamp(1, 16)))
    }

    async fn wait(&self) {
        tokio::time::sleep(self.next_wait()).await;
    }
}

async fn stop_on_signal(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    for n in 0.. {
        let term_recv = async {
            #[cfg(unix)]
            if let Some(s) = term.as_mut() {
                s.recv().await;
                return;
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term_recv => {}
        }
        if n == 0 {
            tracing::info!(
                "stopping: committing what was read (a second SIGINT or SIGTERM stops at once)"
            );
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        } else {
            // As a crash would: the next run resumes from the last checkpoint.
            eprintln!("stopped at once by a second signal: changes read since the last checkpoint are read again by the next run");
            std::process::exit(130);
        }
    }
}

pub(super) fn ddl_log(config: &std::path::Path, resolve: Option<u64>, retry: bool) -> ExitCode {
    let job = match read_job(config) {
        Ok(j) => j,
        Err(c) => return c,
    };
    if let Some(n) = resolve {
        return match runner::sync::ddllog::DdlLog::request_resolution(&job.pipeline.state, n, retry)
        {
            Ok(()) => {
                println!(
                    "DDL #{n}: release requested; the job applies its held changes at its next checkpoint{}",
                    if retry { " after running the DDL" } else { "" }
                );
                ExitCode::from(0)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    match runner::sync::rdb::ddl_log_report(&job) {
        Ok(t) => {
            print!("{t}");
            ExitCode::from(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

pub(super) fn status(config: &std::path::Path) -> ExitCode {
    // Only a PostgreSQL source's slot needs the source's password: without it (a
    // person looking at a job on another machine) the rest is reported.
    let text = std::fs::read_to_string(config).unwrap_or_default();
    let var = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("source")?
                .get("password-env")?
                .as_str()
                .map(str::to_owned)
        })
        .filter(|v| std::env::var_os(v).is_none());
    let job = match read_job_with(config, |k| {
        std::env::var(k)
            .ok()
            .or_else(|| (var.as_deref() == Some(k)).then(String::new))
    }) {
        Ok(j) => j,
        Err(c) => return c,
    };
    let unread = var.map(|v| format!("{v} (source.password-env) is not set"));
    run_report(job, |job| async move {
        runner::sync::status::report(&job, unread.as_deref()).await
    })
}

pub(super) fn check(config: &std::path::Path) -> ExitCode {
    let job = match read_job(config) {
        Ok(j) => j,
        Err(c) => return c,
    };
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    let found = rt.block_on(runner::sync::check::check(&job));
    // (A job whose last run failed: what stopped it, beside what check finds now.)
    if let Some(l) = runner::sync::status::last_error(&job.pipeline.state) {
        println!("note: {l}");
    }
    let mut problems = 0;
    for f in &found {
        if matches!(f, runner::sync::check::Finding::Problem(_)) {
            problems += 1;
        }
        println!("{f}");
    }
    if problems == 0 {
        println!(
            "the job can run: lakeshift sync --config {}",
            config.display()
        );
        ExitCode::from(0)
    } else {
        println!("{problems} problem(s): fix them, then check again");
        ExitCode::from(1)
    }
}

pub(super) fn drop_job(config: &std::path::Path, apply: bool) -> ExitCode {
    report(config, |job| async move {
        let mut text: String = runner::sync::dropjob::drop_job(&job, apply)
            .await?
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        if !apply {
            text.push_str("(nothing removed yet: run again with --apply to remove it)\n");
        }
        Ok(text)
    })
}

/// The job file's job given to `f` in a runtime: its text on standard output (exit
/// 0), or its error as `error: ...` (exit 1).
fn report<F, Fut>(config: &std::path::Path, f: F) -> ExitCode
where
    F: FnOnce(runner::sync::job::SyncJob) -> Fut,
    Fut: std::future::Future<Output = Result<String, runner::sync::error::SyncError>>,
{
    match read_job(config) {
        Ok(job) => run_report(job, f),
        Err(c) => c,
    }
}

/// Print what `f` reports of `job` (exit 0), or its error (exit 1).
fn run_report<F, Fut>(job: runner::sync::job::SyncJob, f: F) -> ExitCode
where
    F: FnOnce(runner::sync::job::SyncJob) -> Fut,
    Fut: std::future::Future<Output = Result<String, runner::sync::error::SyncError>>,
{
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    match rt.block_on(f(job)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::from(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

pub(super) fn pg_setup(config: &std::path::Path, apply: bool) -> ExitCode {
    let text = match std::fs::read_to_string(config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", config.display());
            return ExitCode::from(2);
        }
    };
    let src = match runner::source::config::parse_job(&text, |k| std::env::var(k).ok()) {
        Ok((_, s)) => s,
        Err(e) => {
            eprintln!("error: {}", e.report(config));
            return ExitCode::from(2);
        }
    };
    if src.postgres().is_none() {
        eprintln!(
            "error: {}: pg-setup is for PostgreSQL sources (source.type: postgres)",
            config.display()
        );
        return ExitCode::from(2);
    }
    // The DDL capture, and the job's publication and patterns registered with it (a
    // table made later that they match joins the publication as it is made).
    let pg = src.postgres().expect("postgres");
    let sql = format!(
        "{}\n{}",
        runner::source::pg::catalog::setup_sql(),
        runner::source::pg::catalog::register_sql(
            &pg.publication,
            &runner::source::config::written_patterns(&src.tables)
        )
    );
    if !apply {
        print!("{sql}");
        return ExitCode::from(0);
    }
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    rt.block_on(async move {
        let c = match runner::source::pg::connect(&src).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        match c.batch_execute(&sql).await {
            Ok(()) => {
                println!("installed the DDL capture (event triggers lakeshift_ddl, lakeshift_drop) in database {}", src.postgres().expect("postgres").database);
                ExitCode::from(0)
            }
            Err(e) => {
                eprintln!(
                    "error: installing the DDL capture: {} (event triggers need a superuser; print the SQL without --apply and have one run it)",
                    runner::source::pg::catalog::describe(&e)
                );
                ExitCode::from(1)
            }
        }
    })
}

pub(super) fn maintain(config: &std::path::Path, dry_run: bool) -> ExitCode {
    let job = match read_job(config) {
        Ok(j) => j,
        Err(c) => return c,
    };
    let Some(ice) = job.sink.iceberg() else {
        eprintln!("error: {}: maintain is for Iceberg sinks", config.display());
        return ExitCode::from(2);
    };
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    let opts = ice.maintenance.options(dry_run);
    let cat = ice.catalog_config();
    rt.block_on(async move {
        let catalog = match runner::iceberg::Catalog::open(&cat).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        let say = |line: String| println!("{line}");
        match runner::sync::maintain::run(&job, &catalog, &opts, false, say).await {
            Ok(0) => {
                println!("nothing to do");
                ExitCode::from(0)
            }
            Ok(_) => ExitCode::from(0),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        }
    })
}

pub(super) fn tail(
    config: &std::path::Path,
    from: Option<&str>,
    gtid: bool,
    state: Option<std::path::PathBuf>,
    until_end: bool,
) -> ExitCode {
    use runner::source::{config::parse_job, run, SourceEvent};
    let text = match std::fs::read_to_string(config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", config.display());
            return ExitCode::from(2);
        }
    };
    let (_, src) = match parse_job(&text, |k| std::env::var(k).ok()) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {}", e.report(config));
            return ExitCode::from(2);
        }
    };
    // regression: a Kafka job's source went to the binlog reader with no host.
    if src.postgres().is_some() {
        eprintln!(
            "error: {}: source.type is postgres; tail reads a MySQL/MariaDB binlog (run `lakeshift sync` for a PostgreSQL source)",
            config.display()
        );
        return ExitCode::from(2);
    }
    if src.kafka().is_some() {
        eprintln!(
            "error: {}: source.type is kafka; tail reads a MySQL/MariaDB binlog (read Debezium topics with a Kafka consumer, or run `lakeshift sync`)",
            config.display()
        );
        return ExitCode::from(2);
    }
    let resume = match from.map(str::parse::<runner::source::position::Position>) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("error: --from: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let opts = run::RunOptions {
            state_dir: state,
            resume,
            by_gtid: gtid,
            stop_at_end: until_end,
            snapshot_resume: None,
        };
        let task = tokio::spawn(run::run(std::sync::Arc::new(src), opts, tx));
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        let mut last_progress = std::time::Instant::now();
        let mut buf = Vec::new();
        while let Some(e) = rx.recv().await {
            if let SourceEvent::SnapshotRows {
                table,
                done,
                estimate,
                ..
            } = &e
            {
                if last_progress.elapsed().as_secs() >= 1 {
                    eprintln!(
                        "snapshot {}.{}: {done} of ~{estimate} rows",
                        table.db, table.name
                    );
                    last_progress = std::time::Instant::now();
                }
            }
            buf.clear();
            runner::source::json::write(&e, &mut buf);
            if out.write_all(&buf).is_err() {
                return ExitCode::from(0);
            }
            if matches!(
                e,
                SourceEvent::Commit { .. } | SourceEvent::Heartbeat { .. }
            ) {
                let _ = out.flush();
            }
        }
        let _ = out.flush();
        match task.await {
            Ok(Ok(())) => ExitCode::from(0),
            Ok(Err(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        }
    })
}

pub(super) fn apply(opts: runner::apply::ApplyOptions, files: &[String]) -> ExitCode {
    let texts = match read_inputs(files, opts.source == Dialect::MySql) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    match rt.block_on(runner::apply::apply(&opts, &texts, &mut out, &mut err)) {
        Ok(r) => {
            eprintln!(
                "{} statement(s), {} catalog commit(s){}",
                r.statements,
                r.commits,
                if r.failed {
                    ", stopped by an error"
                } else {
                    ""
                }
            );
            ExitCode::from(u8::from(r.failed))
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The named files, or standard input when none is named, as (name shown in
/// diagnostics, text), MySQL's binary strings as hex literals when `mysql`.
pub(super) fn read_inputs(files: &[String], mysql: bool) -> Result<Vec<(String, String)>, String> {
    if files.is_empty() {
        return Ok(vec![("<stdin>".to_owned(), read("-", mysql)?)]);
    }
    files
        .iter()
        .map(|p| Ok((p.clone(), read(p, mysql)?)))
        .collect()
}
