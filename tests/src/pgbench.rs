//! What the PostgreSQL benches share: the server's tools, one in-process
//! `sync --until-end`, a slot dropped once its walsender lets go of it.

/// A PostgreSQL program (`psql`, `pg_recvlogical`) of the installed server.
pub fn pg_bin(name: &str) -> std::path::PathBuf {
    let out = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .unwrap();
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join(name)
}

/// One `sync --until-end` run of `job`, in process: the row changes it applied.
pub async fn sync_once(job: &runner::sync::job::SyncJob) -> u64 {
    let engine = runner::sync::engine::Engine::open(job.clone())
        .await
        .unwrap();
    let mut p = runner::sync::pipeline::Pipeline::new(job, engine);
    p.run(true).await.unwrap();
    p.sink.rows
}

/// Drop replication slot `slot` once its walsender has let go of it.
pub async fn drop_slot(pg: &tokio_postgres::Client, slot: &str) {
    for _ in 0..400 {
        let n = pg
            .execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active",
                &[&slot],
            )
            .await
            .unwrap();
        if n > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("slot {slot} stayed active");
}
