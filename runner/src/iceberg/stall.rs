//! A bound on the iceberg crate's reader going quiet.
//!
//! The crate's reader (0.10.1) can wait forever for an equality-delete file that
//! another of its tasks loaded: the loader swaps the notifier a waiter holds, and a
//! waiter that takes the notifier just before the load ends is never woken
//! (apache/iceberg-rust#2630). Sinks that write equality deletes (Kafka, `delete-mode:
//! equality`) make tables whose reads can hit it. The job's own reads of its tables
//! (maintenance's rewrite, filling an added column's default) take each batch within
//! [`READ_STALL`], so such a read fails with an error naming the cause, and the job's
//! usual retry (the next maintenance, a restart) reads again, instead of the job
//! hanging.

use futures::{Stream, StreamExt};
use std::time::Duration;

/// How long a read may go without a batch before it counts as stalled: far longer
/// than one batch of a data file takes, even over a slow object store.
pub const READ_STALL: Duration = Duration::from_secs(300);

/// The next batch of `s`, or an error when none comes within `limit` (`what` names
/// the read in the message).
pub async fn next_batch<S, T>(s: &mut S, limit: Duration, what: &str) -> iceberg::Result<Option<T>>
where
    S: Stream<Item = iceberg::Result<T>> + Unpin,
{
    match tokio::time::timeout(limit, s.next()).await {
        Ok(item) => item.transpose(),
        Err(_) => Err(iceberg::Error::new(
            iceberg::ErrorKind::Unexpected,
            format!(
                "reading {what}: the iceberg crate's reader produced nothing for {} s and was given up (a lost wake-up in its equality-delete loading, apache/iceberg-rust#2630); the read is tried again on the next run",
                limit.as_secs()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_read_that_goes_quiet_fails_and_one_that_flows_does_not() {
        let limit = Duration::from_millis(50);
        let mut quiet = futures::stream::pending::<iceberg::Result<u8>>();
        let e = next_batch(&mut quiet, limit, "t")
            .await
            .expect_err("a stalled read fails");
        assert!(e.to_string().contains("reading t"), "{e}");
        assert!(e.to_string().contains("iceberg-rust#2630"), "{e}");
        let mut flowing = futures::stream::iter([Ok(1u8), Ok(2)]);
        assert_eq!(next_batch(&mut flowing, limit, "t").await.unwrap(), Some(1));
        assert_eq!(next_batch(&mut flowing, limit, "t").await.unwrap(), Some(2));
        assert_eq!(next_batch(&mut flowing, limit, "t").await.unwrap(), None);
        let mut failing = futures::stream::iter([Err::<u8, _>(iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            "bad file",
        ))]);
        let e = next_batch(&mut failing, limit, "t").await.unwrap_err();
        assert!(e.to_string().contains("bad file"), "{e}");
    }
}
