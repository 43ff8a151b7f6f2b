//! Tables parked behind a DDL: their changes held, replayed when released.

use super::*;
use crate::sync::error::SyncError;

impl Engine {
    /// Keep a change of a parked table (written with the next checkpoint).
    pub(super) fn hold(&mut self, key: (String, String), item: HeldItem) {
        self.held.entry(key).or_default().push(item);
    }

    /// Whether a person asked to release parked DDL (`ddl-log --resolve`).
    pub(super) fn resolutions_waiting(&self) -> bool {
        !self.parked.is_empty() && !DdlLog::resolutions_in(&self.state_dir).is_empty()
    }

    /// Parked DDL a person resolved: each one's held changes (and those of DDL queued
    /// behind it on the same tables) are replayed, in source order, into the current
    /// checkpoint. Returns (entry number, tables released) for [`Self::released`].
    pub(super) async fn releases(
        &mut self,
    ) -> Result<Vec<(u64, Vec<(String, String)>)>, SyncError> {
        let mut out = Vec::new();
        for (seq, retry) in DdlLog::resolutions_in(&self.state_dir) {
            let log = DdlLog::load(&self.state_dir)?;
            let Some(i) = log.entries.iter().position(|e| e.seq == seq) else {
                log.clear_resolution(seq);
                continue;
            };
            if log.entries[i].status != Status::Parked {
                log.clear_resolution(seq);
                continue;
            }
            let mut tables: BTreeSet<String> = log.entries[i].tables.iter().cloned().collect();
            loop {
                let before = tables.len();
                for e in &log.entries[i + 1..] {
                    if e.status == Status::Held && e.tables.iter().any(|t| tables.contains(t)) {
                        tables.extend(e.tables.iter().cloned());
                    }
                }
                if tables.len() == before {
                    break;
                }
            }
            let keys: Vec<(String, String)> = tables.iter().map(|t| table_key(t)).collect();
            let mut streams = Vec::new();
            for (t, k) in tables.iter().zip(&keys) {
                let mut s = self.held_store.load(t)?;
                s.extend(self.held.remove(k).unwrap_or_default());
                streams.push(s);
                self.parked.remove(k);
            }
            let items = crate::sync::held::merge(streams);
            let parked_at = log.entries[i].position.clone();
            tracing::info!(
                "DDL #{seq} released{}: replaying {} held change(s) of {}",
                if retry { " (retrying it first)" } else { "" },
                items.len(),
                tables.iter().cloned().collect::<Vec<_>>().join(", ")
            );
            for item in items {
                self.replay(item, &parked_at, retry).await?;
            }
            out.push((seq, keys));
        }
        Ok(out)
    }

    /// One held change through the normal path (which recognises what landed before).
    pub(super) async fn replay(
        &mut self,
        item: HeldItem,
        parked_at: &str,
        retry: bool,
    ) -> Result<(), SyncError> {
        let overrides = self.job.source.key_overrides.clone();
        let over = |b: &HeldBatch| {
            overrides
                .get(&format!("{}.{}", b.db, b.table.name.name))
                .cloned()
        };
        match item {
            HeldItem::Ddl { position, .. } if position.to_string() == parked_at && !retry => Ok(()),
            HeldItem::Ddl {
                position,
                sql,
                changes,
                after,
            } => self.ddl(&position, &changes, &after, &sql).await,
            HeldItem::Rows {
                batches,
                kafka: None,
            } => {
                for b in batches {
                    let o = over(&b);
                    self.apply_rows(b.batch(o.as_deref())?, rows::Dedup::ByPosition)
                        .await?;
                }
                Ok(())
            }
            HeldItem::Rows {
                batches,
                kafka: Some(k),
            } => {
                let rows = batches
                    .iter()
                    .map(|b| b.batch(over(b).as_deref()))
                    .collect::<Result<Vec<_>, _>>()?;
                let Some(at) = rows.first().map(|r| r.position_after(0)) else {
                    return Ok(());
                };
                self.apply_message(rows, k.part, k.next, at).await
            }
        }
    }

    /// A release committed in checkpoint `n`: the entry is resolved (unless its retry
    /// was refused again), the held files it replayed are gone.
    pub(super) fn released(
        &mut self,
        seq: u64,
        tables: &[(String, String)],
        n: u64,
    ) -> Result<(), SyncError> {
        let mut log = DdlLog::load(&self.state_dir)?;
        if let Some(i) = log.entries.iter().position(|e| e.seq == seq) {
            if self.reparked.remove(&log.entries[i].position) {
                tracing::warn!("DDL #{seq} was refused again; its tables stay parked");
            } else {
                log.set(i, Status::Resolved, None)?;
            }
        }
        for (a, b) in tables {
            self.held_store.drop_before(&format!("{a}.{b}"), n)?;
        }
        log.clear_resolution(seq);
        Ok(())
    }
}
