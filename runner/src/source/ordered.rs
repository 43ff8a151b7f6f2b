//! A snapshot's pieces (tables, key ranges) read side by side by several sessions
//! and delivered in order, so the pipeline sees the sequence one session gives.

use super::{SourceError, SourceEvent, SourceTable};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Pieces handed out ahead of the one being forwarded, per session.
pub const AHEAD_PER_SESSION: usize = 2;

/// Read `work` with `sessions`: each session takes the next piece and `read`s it
/// into that piece's own channel of two events; the pieces' events are forwarded to
/// `tx` in order, a table's `done` counted across its pieces. Pieces are handed out
/// only [`AHEAD_PER_SESSION`] per session ahead of the one being forwarded, so what
/// is read ahead stays bounded (that many pieces of two queued events and one being
/// read each), however many small tables there are. `read` gives its session back,
/// or None when the receiver went away; `end` closes a session after its last
/// piece. Returns the rows forwarded (None: the receiver went away).
pub async fn read_in_order<S, P, R, F, E, G>(
    sessions: Vec<S>,
    work: Vec<P>,
    read: R,
    end: E,
    tx: &mpsc::Sender<SourceEvent>,
) -> Result<Option<u64>, SourceError>
where
    S: Send + 'static,
    P: Send + 'static,
    R: Fn(S, P, mpsc::Sender<SourceEvent>) -> F + Send + Sync + 'static,
    F: Future<Output = Result<Option<S>, SourceError>> + Send + 'static,
    E: Fn(S) -> G + Send + Sync + 'static,
    G: Future<Output = ()> + Send + 'static,
{
    type Handed<P> = (P, mpsc::Sender<SourceEvent>);
    let ahead = AHEAD_PER_SESSION * sessions.len().max(1);
    let (hand, taken) = mpsc::channel::<Handed<P>>(ahead);
    let taken = Arc::new(tokio::sync::Mutex::new(taken));
    let (read, end) = (Arc::new(read), Arc::new(end));
    let mut tasks = tokio::task::JoinSet::new();
    for session in sessions {
        let (taken, read, end) = (taken.clone(), read.clone(), end.clone());
        tasks.spawn(async move {
            let mut session = session;
            loop {
                // Pieces are handed out in order: the one the forwarder waits for is
                // always being read.
                let next = taken.lock().await.recv().await;
                let Some((piece, s)) = next else {
                    break;
                };
                match read(session, piece, s).await? {
                    Some(s) => session = s,
                    None => return Ok(()),
                }
            }
            end(session).await;
            Ok::<(), SourceError>(())
        });
    }
    let fail = |e: tokio::task::JoinError| SourceError::Protocol(format!("snapshot reader: {e}"));
    let (mut total, mut table_done) = (0u64, 0u64);
    let mut current: Option<Arc<SourceTable>> = None;
    let mut work = work.into_iter();
    let mut hand = Some(hand);
    let mut receivers = std::collections::VecDeque::with_capacity(ahead);
    loop {
        // Keep `ahead` pieces handed out, the one forwarded among them (the hand
        // channel holds at most that many: a send never waits).
        while receivers.len() < ahead {
            let Some(h) = &hand else { break };
            let Some(piece) = work.next() else {
                // No more pieces: the sessions end when they find none.
                hand = None;
                break;
            };
            let (s, r) = mpsc::channel::<SourceEvent>(2);
            if h.send((piece, s)).await.is_err() {
                break;
            }
            receivers.push_back(r);
        }
        let Some(mut r) = receivers.pop_front() else {
            break;
        };
        loop {
            tokio::select! {
                ev = r.recv() => match ev {
                    Some(mut ev) => {
                        if let SourceEvent::SnapshotRows { table, rows, done, .. } = &mut ev {
                            if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, table)) {
                                current = Some(table.clone());
                                table_done = 0;
                            }
                            table_done += rows.num_rows() as u64;
                            total += rows.num_rows() as u64;
                            *done = table_done;
                        }
                        if tx.send(ev).await.is_err() {
                            tasks.abort_all();
                            return Ok(None);
                        }
                    }
                    None => break,
                },
                // A session that failed ends the snapshot with its error.
                Some(ended) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Err(e) = ended.map_err(fail)? {
                        tasks.abort_all();
                        return Err(e);
                    }
                }
            }
        }
    }
    drop(hand);
    while let Some(ended) = tasks.join_next().await {
        ended.map_err(fail)??;
    }
    Ok(Some(total))
}
