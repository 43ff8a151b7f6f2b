//! Names that become one segment of a path or object key (a table's folder in the
//! warehouse, its files in the state folder): encoded so that no name, whatever it
//! holds, leaves its folder or collides with another name.
//!
//! Letters, digits, `_`, `-` and `.` stay as they are, except a leading `.` (so
//! neither `.` nor `..` nor a hidden file can come out); every other byte of the
//! UTF-8 name is `~` and two hex digits (`/` is `~2F`, `~` itself `~7E`). Plain
//! names come out unchanged, so folders made before this encoding keep their names.
//! `~` is unreserved in URIs: readers that decode `%` escapes of a location see the
//! same path as the writer. A name whose encoding passes [`MAX`] bytes is cut and
//! ends in `~~` and a hash of the whole name (no longer reversible: callers that
//! list folders back keep the name beside them).

/// The longest segment produced (file systems allow 255 bytes a name; room is left
/// for suffixes such as `.idx`, `.json`, `-1a2b3c4d`).
pub const MAX: usize = 200;

/// `name` as one safe path segment.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push('~');
            out.push_str(&format!("{b:02X}"));
        }
    }
    if name.is_empty() {
        out.push_str("~00");
    }
    if out.len() > MAX {
        let h = twox_hash::XxHash3_64::oneshot(name.as_bytes());
        out.truncate(MAX - 18);
        out.push_str(&format!("~~{h:016x}"));
    }
    out
}

/// A table's `db.table` name as one segment (a per-table file in the state folder).
pub fn table(key: &(String, String)) -> String {
    encode(&format!("{}.{}", key.0, key.1))
}

/// The name [`encode`] made `segment` from, when it is reversible (not cut).
pub fn decode(segment: &str) -> Option<String> {
    if segment.contains("~~") {
        return None;
    }
    let b = segment.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'~' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    if out == [0] {
        return Some(String::new());
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_and_nothing_leaves_its_folder() {
        assert_eq!(encode("orders"), "orders");
        assert_eq!(encode("shop.orders_2024-x"), "shop.orders_2024-x");
        for hostile in [
            "..",
            ".",
            "../../../esc",
            "a/b",
            "a\\b",
            "nul\0x",
            "~7E",
            ".hidden",
            "",
            "caf\u{e9} \u{1F600}",
        ] {
            let e = encode(hostile);
            assert!(
                !e.contains('/') && !e.contains('\\') && !e.contains('\0'),
                "{hostile:?} -> {e}"
            );
            assert!(!e.starts_with('.') && !e.is_empty(), "{hostile:?} -> {e}");
            assert_eq!(decode(&e).as_deref(), Some(hostile), "{hostile:?} -> {e}");
        }
        // Distinct names, distinct segments.
        assert_ne!(encode("a/b"), encode("a~2Fb"));
        assert_ne!(encode(".a"), encode("~2Ea"));
    }

    #[test]
    fn a_long_name_is_cut_with_a_hash_of_the_whole() {
        let a = "\u{4E2D}".repeat(64);
        let b = format!("{}x", "\u{4E2D}".repeat(63));
        let (ea, eb) = (encode(&a), encode(&b));
        assert!(
            ea.len() <= MAX && eb.len() <= MAX,
            "{} {}",
            ea.len(),
            eb.len()
        );
        assert_ne!(ea, eb);
        assert_eq!(decode(&ea), None);
        assert_eq!(encode(&"x".repeat(MAX)), "x".repeat(MAX));
    }
}
