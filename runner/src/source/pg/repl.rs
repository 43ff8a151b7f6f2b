//! A logical replication session: PostgreSQL's streaming replication protocol over
//! TCP, with the `postgres-protocol` crate's frontend messages and authentication
//! (cleartext, MD5, SCRAM-SHA-256). No TLS, as the job file offers none.
//!
//! The session runs replication commands (`CREATE_REPLICATION_SLOT ...
//! EXPORT_SNAPSHOT`, whose snapshot stays valid while the session waits for its
//! next command), then `START_REPLICATION` with pgoutput's protocol version 2 and
//! `streaming 'on'`: a large transaction arrives in blocks while it runs instead of
//! being spilled on the server until it commits. Standby status updates go out
//! every second from a task of their own, so a slow sink never lets the server's
//! `wal_sender_timeout` end the session.

use crate::source::SourceError;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use postgres_protocol::message::frontend;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// What the server sends while streaming.
#[derive(Debug)]
pub enum Frame {
    /// One pgoutput message.
    XLog { data: Bytes },
    /// The server's end of sent WAL (a status update went back if it asked).
    KeepAlive { end: u64 },
}

/// Where the session reports it is (standby status updates).
#[derive(Default)]
pub struct Progress {
    /// Received up to here.
    pub received: AtomicU64,
    /// Committed by the sinks: the slot's confirmed flush position.
    pub flushed: AtomicU64,
    stop: AtomicBool,
}

pub struct Session {
    /// The reading side; moved to the reader task at `start`.
    reader: Option<Reader>,
    /// While streaming: frames from the reader task, which reads and frames the
    /// socket beside the decoding.
    frames: Option<tokio::sync::mpsc::Receiver<Result<Vec<Frame>, SourceError>>>,
    pending: std::collections::VecDeque<Frame>,
    wr: Arc<Mutex<OwnedWriteHalf>>,
    /// The server's major version (from its `server_version` parameter).
    pub server_major: u32,
    status: Option<tokio::task::JoinHandle<()>>,
    read_task: Option<tokio::task::JoinHandle<()>>,
    pub progress: Arc<Progress>,
}

/// The socket's reading side and what was read of it.
struct Reader {
    rd: OwnedReadHalf,
    buf: BytesMut,
}

impl Reader {
    /// The next message: (tag, body). Cancel-safe (what was read stays in the
    /// buffer).
    async fn read_msg(&mut self) -> Result<(u8, BytesMut), SourceError> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes(self.buf[1..5].try_into().expect("4")) as usize;
                if len < 4 {
                    return Err(SourceError::Protocol(format!(
                        "a message of length {len} from the server"
                    )));
                }
                if self.buf.len() > len {
                    let tag = self.buf[0];
                    let mut m = self.buf.split_to(1 + len);
                    m.advance(5);
                    return Ok((tag, m));
                }
                self.buf.reserve(1 + len - self.buf.len());
            }
            let n = self
                .rd
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| lost("reading", e))?;
            if n == 0 {
                return Err(SourceError::Lost(
                    "the replication session was closed by the server".into(),
                ));
            }
        }
    }

    /// The next frame of the stream (answering a keepalive that asks for a status
    /// update), and every further one already read.
    async fn frames(
        &mut self,
        wr: &Mutex<OwnedWriteHalf>,
        progress: &Progress,
    ) -> Result<Vec<Frame>, SourceError> {
        let mut out = vec![self.frame(wr, progress).await?];
        while out.len() < 256 && self.complete() {
            out.push(self.frame(wr, progress).await?);
        }
        Ok(out)
    }

    /// Whether a whole CopyData message is buffered (one that yields a frame without
    /// waiting for the socket).
    fn complete(&self) -> bool {
        self.buf.len() >= 5
            && self.buf[0] == b'd'
            && self.buf.len() > u32::from_be_bytes(self.buf[1..5].try_into().expect("4")) as usize
    }

    async fn frame(
        &mut self,
        wr: &Mutex<OwnedWriteHalf>,
        progress: &Progress,
    ) -> Result<Frame, SourceError> {
        loop {
            let (tag, mut body) = self.read_msg().await?;
            match tag {
                b'd' if !body.is_empty() => match body.get_u8() {
                    b'w' if body.len() >= 24 => {
                        let start = body.get_u64();
                        let _end = body.get_u64();
                        let _time = body.get_i64();
                        progress.received.fetch_max(start, Ordering::Relaxed);
                        return Ok(Frame::XLog {
                            data: body.freeze(),
                        });
                    }
                    b'k' if body.len() >= 17 => {
                        let end = body.get_u64();
                        let _time = body.get_i64();
                        let reply = body.get_u8() != 0;
                        if reply {
                            send_status(wr, progress)
                                .await
                                .map_err(|e| lost("status update", e))?;
                        }
                        return Ok(Frame::KeepAlive { end });
                    }
                    other => {
                        return Err(SourceError::Protocol(format!(
                            "replication stream: unknown CopyData kind {:?}",
                            other as char
                        )))
                    }
                },
                b'E' => return Err(server_error("replication stream", &body)),
                b'c' => {
                    return Err(SourceError::Lost(
                        "the server ended the replication stream".into(),
                    ))
                }
                _ => {}
            }
        }
    }
}

fn lost(what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Lost(format!("replication session: {what}: {e}"))
}

/// An ErrorResponse's fields: (SQLSTATE, message).
fn error_fields(mut b: &[u8]) -> (String, String) {
    let (mut code, mut msg) = (String::new(), String::new());
    while let Some((&kind, rest)) = b.split_first() {
        if kind == 0 {
            break;
        }
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        let v = String::from_utf8_lossy(&rest[..end]).into_owned();
        match kind {
            b'C' => code = v,
            b'M' => msg = v,
            _ => {}
        }
        b = rest.get(end + 1..).unwrap_or(&[]);
    }
    (code, msg)
}

fn server_error(what: &str, body: &[u8]) -> SourceError {
    let (code, msg) = error_fields(body);
    let text = format!("{what}: {msg} (SQLSTATE {code})");
    match code.as_str() {
        // Authentication and authorization failures: definite.
        c if c.starts_with("28") || c == "42501" => SourceError::Refused(text),
        // The server shutting down, connection exceptions.
        c if c.starts_with("57") || c.starts_with("08") => SourceError::Lost(text),
        // The slot still held by the walsender of a run that was killed (the server
        // has not noticed its connection is gone yet): it ends, and the slot is free.
        // (A second process of the job is refused before, by the job's lease.)
        "55006" => SourceError::Lost(text),
        // pgoutput reads the publication as of each change's place in the WAL: one
        // dropped and made again in a single transaction is missing there for good.
        "42704" if msg.starts_with("publication") => SourceError::Preflight(format!(
            "{text}: the publication did not exist at that point of the stream (dropped and made again in one transaction?), and PostgreSQL cannot decode this slot past it; the changes made meanwhile are lost to it: take a new snapshot ({new})",
            new = super::NEW_SNAPSHOT
        )),
        _ => SourceError::Protocol(text),
    }
}

impl Session {
    /// Connect as `user` to `database` in replication mode and authenticate.
    pub async fn connect(
        host: &str,
        port: u16,
        user: &str,
        password: Option<&str>,
        database: &str,
        options: &str,
    ) -> Result<Session, SourceError> {
        let sock = TcpStream::connect((host, port))
            .await
            .map_err(|e| lost(&format!("connecting to {host}:{port}"), e))?;
        let _ = sock.set_nodelay(true);
        let (rd, wr) = sock.into_split();
        let mut s = Session {
            reader: Some(Reader {
                rd,
                buf: BytesMut::with_capacity(64 << 10),
            }),
            frames: None,
            pending: std::collections::VecDeque::new(),
            wr: Arc::new(Mutex::new(wr)),
            server_major: 0,
            status: None,
            read_task: None,
            progress: Arc::new(Progress::default()),
        };
        let mut out = BytesMut::new();
        frontend::startup_message(
            [
                ("user", user),
                ("database", database),
                ("replication", "database"),
                ("application_name", "lakeshift"),
                ("options", options),
            ],
            &mut out,
        )
        .map_err(|e| lost("startup", e))?;
        s.write(&out).await?;
        let pw = || -> Result<&[u8], SourceError> {
            password.map(str::as_bytes).ok_or_else(|| {
                SourceError::Refused(format!(
                    "the server asks a password of {user}: set source.password or source.password-env"
                ))
            })
        };
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, body) = s.read_msg().await?;
            match tag {
                b'R' => {
                    let mut b = &body[..];
                    let code = b.get_i32();
                    let mut out = BytesMut::new();
                    match code {
                        0 => continue,
                        3 => frontend::password_message(pw()?, &mut out)
                            .map_err(|e| lost("password", e))?,
                        5 => {
                            let salt: [u8; 4] = b[..4].try_into().expect("4 bytes of salt");
                            let h =
                                postgres_protocol::authentication::md5_hash(user.as_bytes(), pw()?, salt);
                            frontend::password_message(h.as_bytes(), &mut out)
                                .map_err(|e| lost("password", e))?;
                        }
                        10 => {
                            let offered = String::from_utf8_lossy(b).into_owned();
                            if !offered.split('\0').any(|m| m == "SCRAM-SHA-256") {
                                return Err(SourceError::Refused(format!(
                                    "the server offers SASL mechanisms {offered:?}; lakeshift speaks SCRAM-SHA-256"
                                )));
                            }
                            let sc = ScramSha256::new(pw()?, ChannelBinding::unsupported());
                            frontend::sasl_initial_response("SCRAM-SHA-256", sc.message(), &mut out)
                                .map_err(|e| lost("SASL", e))?;
                            scram = Some(sc);
                        }
                        11 => {
                            let sc = scram.as_mut().ok_or_else(|| lost("SASL", "continue before start"))?;
                            sc.update(b)
                                .map_err(|e| SourceError::Refused(format!("SCRAM: {e}")))?;
                            frontend::sasl_response(sc.message(), &mut out)
                                .map_err(|e| lost("SASL", e))?;
                        }
                        12 => {
                            let sc = scram.as_mut().ok_or_else(|| lost("SASL", "final before start"))?;
                            sc.finish(b)
                                .map_err(|e| SourceError::Refused(format!("SCRAM: {e}")))?;
                            continue;
                        }
                        other => {
                            return Err(SourceError::Refused(format!(
                                "the server asks for authentication method {other}, which lakeshift does not speak (use password, md5 or scram-sha-256)"
                            )))
                        }
                    }
                    s.write(&out).await?;
                }
                b'S' => {
                    let mut parts = body[..].split(|&c| c == 0);
                    if parts.next() == Some(b"server_version") {
                        let v =
                            String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                        s.server_major = v
                            .split(|c: char| !c.is_ascii_digit())
                            .next()
                            .and_then(|m| m.parse().ok())
                            .unwrap_or(0);
                    }
                }
                b'Z' => return Ok(s),
                b'E' => return Err(server_error("replication session", &body)),
                _ => {}
            }
        }
    }

    async fn write(&mut self, b: &[u8]) -> Result<(), SourceError> {
        self.wr
            .lock()
            .await
            .write_all(b)
            .await
            .map_err(|e| lost("writing", e))
    }

    async fn read_msg(&mut self) -> Result<(u8, BytesMut), SourceError> {
        self.reader
            .as_mut()
            .ok_or_else(|| SourceError::Protocol("the session is streaming".into()))?
            .read_msg()
            .await
    }

    /// Run a replication command; its rows, every value as text.
    pub async fn simple_query(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, SourceError> {
        let mut out = BytesMut::new();
        frontend::query(sql, &mut out).map_err(|e| lost("query", e))?;
        self.write(&out).await?;
        let mut rows = Vec::new();
        let mut err = None;
        loop {
            let (tag, mut body) = self.read_msg().await?;
            match tag {
                b'D' => {
                    let n = body.get_u16() as usize;
                    let mut row = Vec::with_capacity(n);
                    for _ in 0..n {
                        let len = body.get_i32();
                        if len < 0 {
                            row.push(None);
                        } else {
                            let v = body.split_to(len as usize);
                            row.push(Some(String::from_utf8_lossy(&v).into_owned()));
                        }
                    }
                    rows.push(row);
                }
                b'E' => err = Some(server_error(sql, &body)),
                b'Z' => break,
                _ => {}
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }

    /// Start streaming slot `slot` from `lsn`, publication `publication`; status
    /// updates from then on report `progress`.
    pub async fn start(
        &mut self,
        slot: &str,
        lsn: u64,
        publication: &str,
    ) -> Result<(), SourceError> {
        if self.server_major < 14 {
            return Err(SourceError::Preflight(format!(
                "PostgreSQL {} is too old: the source needs 14 or newer (pgoutput's logical messages and streaming)",
                self.server_major
            )));
        }
        let sql = format!(
            "START_REPLICATION SLOT {slot} LOGICAL {:X}/{:X} (proto_version '2', streaming 'on', messages 'true', publication_names '\"{publication}\"')",
            lsn >> 32,
            lsn & 0xffff_ffff
        );
        let mut out = BytesMut::new();
        frontend::query(&sql, &mut out).map_err(|e| lost("query", e))?;
        self.write(&out).await?;
        loop {
            let (tag, body) = self.read_msg().await?;
            match tag {
                b'W' => break,
                b'E' => return Err(server_error("START_REPLICATION", &body)),
                _ => {}
            }
        }
        self.progress.received.store(lsn, Ordering::Relaxed);
        let (wr, progress) = (self.wr.clone(), self.progress.clone());
        let mut reader = self.reader.take().expect("not streaming yet");
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        self.frames = Some(rx);
        let (wr2, progress2) = (self.wr.clone(), self.progress.clone());
        self.read_task = Some(tokio::spawn(async move {
            loop {
                // Every frame already buffered goes in one batch.
                let batch = reader.frames(&wr2, &progress2).await;
                let end = batch.is_err();
                if tx.send(batch).await.is_err() || end {
                    return;
                }
            }
        }));
        self.status = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                if progress.stop.load(Ordering::Relaxed)
                    || send_status(&wr, &progress).await.is_err()
                {
                    return;
                }
            }
        }));
        Ok(())
    }

    /// The next frame of the stream.
    pub async fn recv(&mut self) -> Result<Frame, SourceError> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Ok(f);
            }
            let rx = self
                .frames
                .as_mut()
                .ok_or_else(|| SourceError::Protocol("the stream is not started".into()))?;
            match rx.recv().await {
                Some(Ok(batch)) => self.pending.extend(batch),
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(SourceError::Lost(
                        "the replication stream's reader ended".into(),
                    ))
                }
            }
        }
    }

    /// Report the sinks' commits now (a clean stop), end the stream and the session.
    pub async fn stop(mut self) {
        self.progress.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.status.take() {
            t.abort();
        }
        if let Some(t) = self.read_task.take() {
            t.abort();
        }
        let _ = send_status(&self.wr, &self.progress).await;
        let mut out = BytesMut::new();
        frontend::copy_done(&mut out);
        frontend::terminate(&mut out);
        let _ = self.write(&out).await;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(t) = self.status.take() {
            t.abort();
        }
        if let Some(t) = self.read_task.take() {
            t.abort();
        }
    }
}

/// A standby status update: received, flushed (= applied) positions.
async fn send_status(wr: &Mutex<OwnedWriteHalf>, p: &Progress) -> std::io::Result<()> {
    let flushed = p.flushed.load(Ordering::Relaxed);
    let received = p.received.load(Ordering::Relaxed).max(flushed);
    // Microseconds since 2000-01-01.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64 - 946_684_800_000_000)
        .unwrap_or(0);
    let mut b = BytesMut::with_capacity(40);
    b.put_u8(b'd');
    b.put_u32(4 + 1 + 8 * 4 + 1);
    b.put_u8(b'r');
    b.put_u64(received);
    b.put_u64(flushed);
    b.put_u64(flushed);
    b.put_i64(now);
    b.put_u8(0);
    wr.lock().await.write_all(&b).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_fields_give_code_and_message() {
        let body = b"SERROR\0C42704\0Mreplication slot \"x\" does not exist\0\0";
        assert_eq!(
            error_fields(body),
            (
                "42704".to_owned(),
                "replication slot \"x\" does not exist".to_owned()
            )
        );
        assert!(matches!(
            server_error("q", b"C28P01\0Mpassword authentication failed\0\0"),
            SourceError::Refused(_)
        ));
    }
}
