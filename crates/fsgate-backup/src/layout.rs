//! On-disk layout of the backup store: directory names, timestamps, records.
//!
//! ```text
//! <store>/FORMAT                                      "fsgate-backups 2"
//! <store>/versions/<xx>/<escaped path>@<ts>.backup    content + record (see `packed`)
//! <store>/files/<escaped path>/<ts>.data              layout 1: the content
//! <store>/files/<escaped path>/<ts>.json              layout 1: its sidecar record
//! ```
//!
//! New versions are one file each in one of 256 shard directories (`<xx>`: the first
//! byte of the SHA-256 of the workspace path, in hex), so a backup allocates one inode
//! and a shard directory is created at most once. A version exists once its trailer is
//! complete; a crash can leave a file without one, which is a leftover, never a version.
//! Stores of layout 1 (`files/`, one directory per path, the sidecar renamed into place
//! last) are still read, listed, restored from and pruned; nothing new is written there.
//! `<escaped path>` is the workspace path with every byte outside `[A-Za-z0-9._-]`
//! written as `%XX`, so it is one file name that decodes back to the path (and `@`
//! never occurs in it). Names that would be too long become a prefix, `~` and a SHA-256
//! of the full path (`~` is always escaped in the plain form, so the two forms cannot
//! collide); the record then says which path it is.

use cap_std::fs::Dir;
use fsgate_base::sha256::Sha256;
use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use crate::error::BackupError;

/// Sub-directory of a layout-1 store holding one directory per backed-up path.
pub(crate) const FILES_DIR: &str = "files";
/// Sub-directory holding the shard directories of one-file versions.
pub(crate) const VERSIONS_DIR: &str = "versions";
/// Marker file naming the layout version.
pub(crate) const FORMAT_FILE: &str = "FORMAT";
/// The shard the next pass over the store starts at, written by a pass cut short.
pub(crate) const RESUME_FILE: &str = "RETENTION-NEXT";
/// Contents of [`FORMAT_FILE`].
pub(crate) const FORMAT_TEXT: &str = "fsgate-backups 2\n";
/// Contents of [`FORMAT_FILE`] in a store of layout 1 (upgraded when opened).
pub(crate) const FORMAT_TEXT_1: &str = "fsgate-backups 1\n";
/// Suffix of one-file versions.
pub(crate) const PACKED_SUFFIX: &str = ".backup";
/// Suffix of content files.
pub(crate) const DATA_SUFFIX: &str = ".data";
/// Suffix of sidecar files.
pub(crate) const META_SUFFIX: &str = ".json";
/// Suffix of files being written.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Longest escaped name used as is; longer ones are shortened with a hash.
const MAX_PLAIN_NAME: usize = 180;
/// Bytes of the escaped name kept in front of the hash when shortening.
const HASHED_PREFIX: usize = 120;

/// Compact timestamp used in file names: fixed width, sorts by time.
const COMPACT: &[BorrowedFormatItem<'static>] =
    format_description!("[year][month][day]T[hour][minute][second].[subsecond digits:9]Z");
/// RFC 3339 with nanoseconds, used in sidecars, ids shown to people and the audit log.
const RFC3339_NANOS: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");

/// The sidecar record stored next to each version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Sidecar {
    /// Layout version, 1.
    pub format: u32,
    /// Workspace-relative path of the file the content came from.
    pub path: String,
    /// When the backup was taken (UTC, RFC 3339 with nanoseconds).
    pub ts: String,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
    /// Size of the content in bytes.
    pub size: u64,
    /// Bytes of data the copy stores (a sparse file's holes excluded); absent in
    /// versions saved before it was recorded, which stored `size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<u64>,
    /// The content the file had before the gateway's first change to it in a session
    /// (a gateway run); retention by count or bytes keeps the newest such version.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub original: bool,
    /// The permission bits (`0o777` at most) of the file the content came from; absent
    /// in versions saved before it was recorded, and in those saved from a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

/// Checks that `rel` is a plain workspace-relative path: non-empty, `/`-separated, no
/// empty, `.` or `..` component, no NUL, not absolute.
pub(crate) fn validate_rel_path(rel: &str) -> Result<(), BackupError> {
    let bad = |reason: &'static str| BackupError::InvalidPath {
        path: rel.to_owned(),
        reason,
    };
    if rel.is_empty() {
        return Err(bad("empty path"));
    }
    if rel.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    if rel.starts_with('/') || (cfg!(windows) && rel.contains('\\')) {
        return Err(bad("not workspace-relative"));
    }
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad("empty, '.' or '..' component"));
    }
    Ok(())
}

/// The directory name holding the versions of workspace path `rel`.
pub(crate) fn dir_name(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len() + 8);
    for b in rel.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push_str(&format!("{b:02X}"));
        }
    }
    if out.len() > MAX_PLAIN_NAME {
        out.truncate(HASHED_PREFIX);
        out.push('~');
        out.push_str(&hex::encode(Sha256::digest(rel.as_bytes()))[..32]);
    }
    out
}

/// The shard directory holding the one-file versions of `rel`.
pub(crate) fn shard(rel: &str) -> String {
    hex::encode(&Sha256::digest(rel.as_bytes())[..1])
}

/// Whether `name` is a shard directory's name: two lowercase hex digits.
pub(crate) fn is_shard_name(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The file name of a one-file version: escaped path, `@`, compact timestamp.
pub(crate) fn packed_name(dir_name: &str, stem: &str) -> String {
    format!("{dir_name}@{stem}{PACKED_SUFFIX}")
}

/// Splits a one-file version's name into escaped path and compact timestamp.
pub(crate) fn parse_packed_name(name: &str) -> Option<(&str, &str)> {
    let (dir_name, stem) = name.strip_suffix(PACKED_SUFFIX)?.split_once('@')?;
    (!dir_name.is_empty() && !stem.is_empty() && !stem.contains('@')).then_some((dir_name, stem))
}

/// Decodes a plain (not hashed) directory name back into the workspace path.
pub(crate) fn decode_dir_name(name: &str) -> Option<String> {
    if name.contains('~') {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Formats `ts` for file names (`20250102T030405.123456789Z`).
pub(crate) fn compact_ts(ts: OffsetDateTime) -> String {
    // The description only has numeric fields, so formatting cannot fail for a UTC time
    // in years 0..=9999; fall back to the unix-nanos form rather than panic.
    ts.format(COMPACT)
        .unwrap_or_else(|_| format!("{:020}Z", ts.unix_timestamp_nanos()))
}

/// Formats `ts` as RFC 3339 with nanoseconds (`2025-01-02T03:04:05.123456789Z`).
pub(crate) fn rfc3339_ts(ts: OffsetDateTime) -> String {
    ts.format(RFC3339_NANOS)
        .unwrap_or_else(|_| format!("{:020}Z", ts.unix_timestamp_nanos()))
}

/// Parses a time given by a user or read from a file name: the compact form, RFC 3339
/// (any offset, any sub-second precision), or a bare date `YYYY-MM-DD` (midnight UTC).
pub(crate) fn parse_ts(text: &str) -> Result<OffsetDateTime, BackupError> {
    let text = text.trim();
    if let Ok(t) = time::PrimitiveDateTime::parse(text, COMPACT) {
        return Ok(t.assume_utc());
    }
    if let Ok(t) = OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339) {
        return Ok(t.to_offset(time::UtcOffset::UTC));
    }
    if let Ok(d) = time::Date::parse(text, format_description!("[year]-[month]-[day]")) {
        return Ok(d.midnight().assume_utc());
    }
    Err(BackupError::BadTimestamp(text.to_owned()))
}

/// The names in a directory (names that are not UTF-8 are not the store's: skipped).
pub(crate) fn names(dir: &Dir, shown: &str) -> Result<Vec<String>, BackupError> {
    let mut out = Vec::new();
    for entry in dir.entries().map_err(BackupError::io("list", shown))? {
        let entry = entry.map_err(BackupError::io("list", shown))?;
        if let Ok(name) = entry.file_name().into_string() {
            out.push(name);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_never_collide() {
        let paths = [
            "src/main.rs",
            "src%2Fmain.rs",
            "a b/ü~x",
            ".env",
            "dir/.hidden",
            "x/y/z.tar.gz",
        ];
        let mut seen = std::collections::HashSet::new();
        for p in paths {
            let name = dir_name(p);
            assert!(!name.contains('/'), "{name}");
            assert!(name != "." && name != "..");
            assert_eq!(decode_dir_name(&name).as_deref(), Some(p));
            assert!(!name.contains('@'), "{name}");
            let packed = packed_name(&name, "20231114T221320.000000001Z");
            assert_eq!(
                parse_packed_name(&packed),
                Some((name.as_str(), "20231114T221320.000000001Z"))
            );
            assert!(packed.len() <= 255, "{packed}");
            assert_eq!(shard(p).len(), 2);
            assert!(seen.insert(name), "collision for {p}");
        }
    }

    #[test]
    fn long_names_are_hashed_and_distinct() {
        let a = format!("{}/a", "d".repeat(300));
        let b = format!("{}/b", "d".repeat(300));
        let (na, nb) = (dir_name(&a), dir_name(&b));
        assert!(na.len() <= 255 && nb.len() <= 255);
        assert_ne!(na, nb);
        assert!(na.contains('~'));
        assert_eq!(decode_dir_name(&na), None);
    }

    #[test]
    fn rel_paths_are_checked() {
        for ok in ["a", "a/b.txt", ".env", "..x/y"] {
            assert!(validate_rel_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "./a",
            "a//b",
            "a/",
            "..",
            "a\0b",
        ] {
            assert!(validate_rel_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn timestamps_sort_and_parse() {
        let t1 = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_000_000_001)
            .expect("valid time");
        let t2 = t1 + time::Duration::nanoseconds(999);
        let (c1, c2) = (compact_ts(t1), compact_ts(t2));
        assert_eq!(c1, "20231114T221320.000000001Z");
        assert!(c1 < c2);
        assert_eq!(parse_ts(&c1).ok(), Some(t1));
        assert_eq!(rfc3339_ts(t1), "2023-11-14T22:13:20.000000001Z");
        assert_eq!(parse_ts(&rfc3339_ts(t2)).ok(), Some(t2));
        assert_eq!(
            parse_ts("2023-11-14T23:13:20+01:00").ok(),
            OffsetDateTime::from_unix_timestamp(1_700_000_000).ok()
        );
        assert!(parse_ts("2023-11-14").is_ok());
        assert!(parse_ts("yesterday").is_err());
    }

    proptest::proptest! {
        /// Any path gives one file name within NAME_MAX, without `/` or `@`, that names
        /// it alone: plain names decode back to it, shortened ones carry its hash.
        #[test]
        fn any_path_makes_one_short_name(
            path in "[^\\u{0}]{1,300}",
            other in "[^\\u{0}]{1,300}",
        ) {
            let name = dir_name(&path);
            let packed = packed_name(&name, "20231114T221320.000000001Z");
            proptest::prop_assert!(packed.len() <= 255, "{}", packed.len());
            proptest::prop_assert!(!name.contains('/') && !name.contains('@'));
            proptest::prop_assert_eq!(
                parse_packed_name(&packed),
                Some((name.as_str(), "20231114T221320.000000001Z"))
            );
            match decode_dir_name(&name) {
                Some(back) => proptest::prop_assert_eq!(&back, &path),
                None => proptest::prop_assert!(name.contains('~')),
            }
            if other != path {
                proptest::prop_assert_ne!(name, dir_name(&other));
            }
        }
    }
}
