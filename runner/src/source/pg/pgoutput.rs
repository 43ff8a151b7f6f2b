//! pgoutput messages (logical replication protocol version 2: version 1 and the
//! streaming of in-progress transactions) from the bytes of one XLogData payload:
//! transaction boundaries, relations, row changes, truncates, logical messages and
//! the stream blocks of large transactions. Pure: no I/O, unit tests below.
//!
//! Reference: PostgreSQL's "Logical Replication Message Formats".

use super::super::DecodeError;

/// One column of a relation as the publisher describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelColumn {
    /// Part of the replica identity (the key sent with updates and deletes).
    pub key: bool,
    pub name: String,
    pub type_oid: u32,
    pub typmod: i32,
}

/// A Relation message: what the following row changes of `oid` look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub oid: u32,
    pub namespace: String,
    pub name: String,
    /// `d` default (primary key), `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    pub columns: Vec<RelColumn>,
}

/// One value of a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    Null,
    /// A TOASTed value the change did not touch: not sent.
    Unchanged,
    Text(&'a str),
    Binary(&'a [u8]),
}

/// A row change. `old` is the key (`K`, replica identity columns only) or the whole
/// old row (`O`, REPLICA IDENTITY FULL), when sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    Insert {
        rel: u32,
        new: Vec<Value<'a>>,
    },
    Update {
        rel: u32,
        old: Option<(u8, Vec<Value<'a>>)>,
        new: Vec<Value<'a>>,
    },
    Delete {
        rel: u32,
        old: (u8, Vec<Value<'a>>),
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg<'a> {
    Relation(Relation),
    Change(Change<'a>),
    Truncate {
        rels: Vec<u32>,
    },
    Begin {
        /// The commit's LSN.
        final_lsn: u64,
        /// Microseconds since 2000-01-01.
        time: i64,
        xid: u32,
    },
    Commit {
        /// Where the commit record ends (the next transaction starts at or after).
        end_lsn: u64,
        time: i64,
    },
    /// `pg_logical_emit_message`.
    Message {
        transactional: bool,
        prefix: &'a str,
        content: &'a [u8],
    },
    /// A block of a large transaction's changes follows, each message prefixed with
    /// the (sub)transaction id.
    StreamStart {
        xid: u32,
    },
    StreamStop,
    /// The streamed transaction `xid` committed at `commit_lsn`.
    StreamCommit {
        xid: u32,
        commit_lsn: u64,
        end_lsn: u64,
        time: i64,
    },
    /// The streamed transaction `xid` (or its subtransaction `subxid`) rolled back.
    StreamAbort {
        xid: u32,
        subxid: u32,
    },
    /// Type, Origin and anything else that changes no row.
    Other(u8),
}

/// The tags of messages that carry a (sub)transaction id inside a stream block.
pub fn carries_xid(tag: u8) -> bool {
    matches!(tag, b'R' | b'Y' | b'I' | b'U' | b'D' | b'T' | b'M')
}

struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.b.len() - self.at < n {
            return Err(format!(
                "pgoutput message truncated at byte {} (needed {n} more)",
                self.at
            )
            .into());
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn cstr(&mut self) -> Result<&'a str, DecodeError> {
        let rest = &self.b[self.at..];
        let end = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or("pgoutput string without its terminating zero")?;
        let s = std::str::from_utf8(&rest[..end]).map_err(|e| e.to_string())?;
        self.at += end + 1;
        Ok(s)
    }
    fn tuple(&mut self) -> Result<Vec<Value<'a>>, DecodeError> {
        let n = self.u16()? as usize;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(match self.u8()? {
                b'n' => Value::Null,
                b'u' => Value::Unchanged,
                kind @ (b't' | b'b') => {
                    let len = self.u32()? as usize;
                    let bytes = self.take(len)?;
                    if kind == b't' {
                        Value::Text(std::str::from_utf8(bytes).map_err(|e| {
                            format!("a text value that is not UTF-8 (server_encoding must be UTF8): {e}")
                        })?)
                    } else {
                        Value::Binary(bytes)
                    }
                }
                other => {
                    return Err(format!("pgoutput tuple: unknown column kind {:?}", other as char).into())
                }
            });
        }
        Ok(out)
    }
}

/// Split the (sub)transaction id off a message inside a stream block: (xid, the
/// message as outside a stream).
pub fn split_xid(b: &[u8]) -> Result<(u32, Vec<u8>), DecodeError> {
    if b.len() < 5 || !carries_xid(b[0]) {
        return Err(format!(
            "pgoutput: a message {:?} of {} bytes inside a stream block",
            b.first().map(|c| *c as char),
            b.len()
        )
        .into());
    }
    let xid = u32::from_be_bytes(b[1..5].try_into().expect("4"));
    let mut out = Vec::with_capacity(b.len() - 4);
    out.push(b[0]);
    out.extend_from_slice(&b[5..]);
    Ok((xid, out))
}

/// Parse one pgoutput message (outside a stream block; see `split_xid`).
pub fn parse(b: &[u8]) -> Result<Msg<'_>, DecodeError> {
    let mut r = Rd { b, at: 0 };
    let tag = r.u8()?;
    Ok(match tag {
        b'B' => Msg::Begin {
            final_lsn: r.u64()?,
            time: r.u64()? as i64,
            xid: r.u32()?,
        },
        b'C' => {
            let _flags = r.u8()?;
            let _commit_lsn = r.u64()?;
            Msg::Commit {
                end_lsn: r.u64()?,
                time: r.u64()? as i64,
            }
        }
        b'M' => {
            let flags = r.u8()?;
            let _lsn = r.u64()?;
            let prefix = r.cstr()?;
            let n = r.u32()? as usize;
            Msg::Message {
                transactional: flags & 1 == 1,
                prefix,
                content: r.take(n)?,
            }
        }
        b'S' => {
            let xid = r.u32()?;
            let _first = r.u8()?;
            Msg::StreamStart { xid }
        }
        b'E' => Msg::StreamStop,
        b'c' => {
            let xid = r.u32()?;
            let _flags = r.u8()?;
            Msg::StreamCommit {
                xid,
                commit_lsn: r.u64()?,
                end_lsn: r.u64()?,
                time: r.u64()? as i64,
            }
        }
        b'A' => Msg::StreamAbort {
            xid: r.u32()?,
            subxid: r.u32()?,
        },
        b'R' => {
            let oid = r.u32()?;
            let namespace = r.cstr()?;
            // The publisher sends an empty namespace for pg_catalog.
            let namespace = if namespace.is_empty() {
                "pg_catalog"
            } else {
                namespace
            };
            let name = r.cstr()?.to_owned();
            let replica_identity = r.u8()?;
            let n = r.u16()? as usize;
            let mut columns = Vec::with_capacity(n);
            for _ in 0..n {
                let flags = r.u8()?;
                let name = r.cstr()?.to_owned();
                let type_oid = r.u32()?;
                let typmod = r.u32()? as i32;
                columns.push(RelColumn {
                    key: flags & 1 == 1,
                    name,
                    type_oid,
                    typmod,
                });
            }
            Msg::Relation(Relation {
                oid,
                namespace: namespace.to_owned(),
                name,
                replica_identity,
                columns,
            })
        }
        b'I' => {
            let rel = r.u32()?;
            expect(r.u8()?, b'N', "insert")?;
            Msg::Change(Change::Insert {
                rel,
                new: r.tuple()?,
            })
        }
        b'U' => {
            let rel = r.u32()?;
            let mut old = None;
            let mut k = r.u8()?;
            if k == b'K' || k == b'O' {
                old = Some((k, r.tuple()?));
                k = r.u8()?;
            }
            expect(k, b'N', "update")?;
            Msg::Change(Change::Update {
                rel,
                old,
                new: r.tuple()?,
            })
        }
        b'D' => {
            let rel = r.u32()?;
            let k = r.u8()?;
            if k != b'K' && k != b'O' {
                return Err(
                    format!("pgoutput delete: expected K or O, got {:?}", k as char).into(),
                );
            }
            Msg::Change(Change::Delete {
                rel,
                old: (k, r.tuple()?),
            })
        }
        b'T' => {
            let n = r.u32()? as usize;
            let _options = r.u8()?;
            let mut rels = Vec::with_capacity(n);
            for _ in 0..n {
                rels.push(r.u32()?);
            }
            Msg::Truncate { rels }
        }
        other => Msg::Other(other),
    })
}

fn expect(got: u8, want: u8, what: &str) -> Result<(), DecodeError> {
    if got != want {
        return Err(format!(
            "pgoutput {what}: expected {:?}, got {:?}",
            want as char, got as char
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(vals: &[Option<&str>]) -> Vec<u8> {
        let mut b = (vals.len() as u16).to_be_bytes().to_vec();
        for v in vals {
            match v {
                None => b.push(b'n'),
                Some("\u{0}toast") => b.push(b'u'),
                Some(s) => {
                    b.push(b't');
                    b.extend((s.len() as u32).to_be_bytes());
                    b.extend(s.as_bytes());
                }
            }
        }
        b
    }

    #[test]
    fn relations_and_changes_parse() {
        let mut rel = vec![b'R'];
        rel.extend(16384u32.to_be_bytes());
        rel.extend(b"shop\0items\0d");
        rel.extend(2u16.to_be_bytes());
        rel.push(1);
        rel.extend(b"id\0");
        rel.extend(23u32.to_be_bytes());
        rel.extend((-1i32).to_be_bytes());
        rel.push(0);
        rel.extend(b"name\0");
        rel.extend(25u32.to_be_bytes());
        rel.extend((-1i32).to_be_bytes());
        let Msg::Relation(r) = parse(&rel).unwrap() else {
            panic!("relation")
        };
        assert_eq!((r.namespace.as_str(), r.name.as_str()), ("shop", "items"));
        assert!(r.columns[0].key && !r.columns[1].key);
        assert_eq!(r.columns[1].type_oid, 25);

        let mut upd = vec![b'U'];
        upd.extend(16384u32.to_be_bytes());
        upd.push(b'K');
        upd.extend(tuple(&[Some("1"), None]));
        upd.push(b'N');
        upd.extend(tuple(&[Some("2"), Some("\u{0}toast")]));
        assert_eq!(
            parse(&upd).unwrap(),
            Msg::Change(Change::Update {
                rel: 16384,
                old: Some((b'K', vec![Value::Text("1"), Value::Null])),
                new: vec![Value::Text("2"), Value::Unchanged],
            })
        );

        let mut t = vec![b'T'];
        t.extend(2u32.to_be_bytes());
        t.push(0);
        t.extend(1u32.to_be_bytes());
        t.extend(7u32.to_be_bytes());
        assert_eq!(parse(&t).unwrap(), Msg::Truncate { rels: vec![1, 7] });
    }

    #[test]
    fn truncated_messages_are_errors_not_panics() {
        let mut ins = vec![b'I'];
        ins.extend(1u32.to_be_bytes());
        ins.push(b'N');
        ins.extend(tuple(&[Some("hello")]));
        for cut in 1..ins.len() {
            assert!(parse(&ins[..cut]).is_err(), "cut at {cut}");
        }
        assert!(parse(&ins).is_ok());
    }

    #[test]
    fn transaction_and_stream_messages_parse() {
        let mut b = vec![b'B'];
        b.extend(0x1_0000_0010u64.to_be_bytes());
        b.extend(5i64.to_be_bytes());
        b.extend(77u32.to_be_bytes());
        assert_eq!(
            parse(&b).unwrap(),
            Msg::Begin {
                final_lsn: 0x1_0000_0010,
                time: 5,
                xid: 77
            }
        );
        let mut c = vec![b'c'];
        c.extend(77u32.to_be_bytes());
        c.push(0);
        c.extend(100u64.to_be_bytes());
        c.extend(120u64.to_be_bytes());
        c.extend(9i64.to_be_bytes());
        assert_eq!(
            parse(&c).unwrap(),
            Msg::StreamCommit {
                xid: 77,
                commit_lsn: 100,
                end_lsn: 120,
                time: 9
            }
        );
        let mut a = vec![b'A'];
        a.extend(77u32.to_be_bytes());
        a.extend(78u32.to_be_bytes());
        assert_eq!(
            parse(&a).unwrap(),
            Msg::StreamAbort {
                xid: 77,
                subxid: 78
            }
        );
        // A message inside a stream block: the xid follows the tag.
        let mut m = vec![b'M'];
        m.extend(78u32.to_be_bytes());
        m.push(1);
        m.extend(42u64.to_be_bytes());
        m.extend(b"lakeshift\0");
        m.extend(3u32.to_be_bytes());
        m.extend(b"abc");
        let (xid, rest) = split_xid(&m).unwrap();
        assert_eq!(xid, 78);
        assert_eq!(
            parse(&rest).unwrap(),
            Msg::Message {
                transactional: true,
                prefix: "lakeshift",
                content: b"abc"
            }
        );
        assert!(split_xid(&[b'B', 0, 0, 0, 1]).is_err());
    }
}
