//! MariaDB events read from raw bytes: rotate names (checksums), GTID lists.

use super::*;

/// Whether an event's last 4 data bytes are the CRC32 of its header and the rest.
pub(super) fn ends_with_checksum(
    h: &mysql_async::binlog::events::BinlogEventHeader,
    data: &[u8],
) -> bool {
    if data.len() < 4 {
        return false;
    }
    let (body, tail) = data.split_at(data.len() - 4);
    let mut header = Vec::with_capacity(19);
    header.extend_from_slice(&h.timestamp().to_le_bytes());
    header.push(h.event_type_raw());
    header.extend_from_slice(&h.server_id().to_le_bytes());
    header.extend_from_slice(&h.event_size().to_le_bytes());
    header.extend_from_slice(&h.log_pos().to_le_bytes());
    header.extend_from_slice(&h.flags_raw().to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    crc.update(body);
    crc.finalize().to_le_bytes() == tail
}

/// A binlog file name from a ROTATE event. The server's first (fake) ROTATE comes
/// before the format description, so the event reader cannot know the checksum yet
/// and can leave its 4 bytes on the name: `with_checksum` strips them.
pub(super) fn binlog_name(raw: &[u8], with_checksum: bool) -> String {
    let raw = if with_checksum && raw.len() > 4 {
        &raw[..raw.len() - 4]
    } else {
        raw
    };
    let s = String::from_utf8_lossy(raw);
    match s.rfind('.') {
        Some(dot) => {
            let digits = s[dot + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
            s[..dot + 1 + digits].to_owned()
        }
        None => s.into_owned(),
    }
}

pub(super) fn parse_gtid_list(d: &[u8]) -> Option<GtidState> {
    if d.len() < 4 {
        return None;
    }
    let n = (u32::from_le_bytes(d[0..4].try_into().ok()?) & 0x0FFF_FFFF) as usize;
    let mut st = GtidState::default();
    for i in 0..n {
        let o = 4 + i * 16;
        let e = d.get(o..o + 16)?;
        st.apply(Gtid {
            domain: u32::from_le_bytes(e[0..4].try_into().ok()?),
            server: u32::from_le_bytes(e[4..8].try_into().ok()?),
            seq: u64::from_le_bytes(e[8..16].try_into().ok()?),
        });
    }
    Some(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotate_names_lose_the_fake_events_checksum() {
        // Checksum bytes can look like digits: `binlog.000001` + "2\x8f\x01\x00".
        let raw = b"binlog.0000012\x8f\x01\x00";
        assert_eq!(binlog_name(raw, true), "binlog.000001");
        assert_eq!(binlog_name(b"binlog.000002", false), "binlog.000002");
    }
}
