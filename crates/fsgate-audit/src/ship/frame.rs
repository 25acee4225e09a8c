//! The syslog messages a record travels in: RFC 5424 (octet-counted on TCP, RFC 6587),
//! or the local format `syslog(3)` writes to `/dev/log`. The record line is the MSG,
//! byte for byte, so the chain verifies from the collector's copy.

use std::io::Write;

/// Severity of every shipped record: notice (5), as the checkpoint sink uses.
const SEVERITY_NOTICE: u8 = 5;
/// Every record line starts with its seq (audit/FORMAT.md: fields in a fixed order).
const SEQ_PREFIX: &[u8] = b"{\"seq\":";
/// ... then its timestamp.
const TS_PREFIX: &[u8] = b",\"ts\":\"";

/// The header fields a destination stamps on every message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// PRI's facility code.
    pub facility: u8,
    /// HOSTNAME.
    pub hostname: String,
    /// APP-NAME.
    pub app_name: String,
    /// PROCID: the log id, constant for one chain across restarts, so a collector can
    /// tell sibling chains (two gateways on one workspace) apart.
    pub log_id: String,
    /// The gateway's pid, for the local format's `APP[PID]`.
    pub pid: u32,
}

/// The seq a record line starts with, or None if the line is not a record.
pub(crate) fn seq_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(SEQ_PREFIX)?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    if end == 0 || end > 20 {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// The record's `ts` (`YYYY-MM-DDTHH:MM:SS.ffffffZ`), which is also a valid RFC 5424
/// TIMESTAMP.
fn ts_of(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(SEQ_PREFIX)?;
    let after_seq = rest.iter().position(|b| !b.is_ascii_digit())?;
    let ts = rest[after_seq..].strip_prefix(TS_PREFIX)?;
    let ts = ts.get(..crate::canonical::TS_LEN)?;
    std::str::from_utf8(ts).ok()
}

/// Appends `line` (one record, without its newline) as an RFC 5424 message with
/// octet-counted framing: `LEN SP <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID - MSG`,
/// where MSGID is the record's seq.
pub(crate) fn push_octet_counted(out: &mut Vec<u8>, h: &Header, seq: u64, line: &[u8]) {
    let head = rfc5424_header(h, seq, line);
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{} {head}", head.len() + line.len());
    out.extend_from_slice(line);
}

/// Everything of an RFC 5424 message before its MSG.
fn rfc5424_header(h: &Header, seq: u64, line: &[u8]) -> String {
    let pri = u32::from(h.facility) * 8 + u32::from(SEVERITY_NOTICE);
    let ts = ts_of(line).unwrap_or("-");
    format!(
        "<{pri}>1 {ts} {} {} {} {seq} - ",
        h.hostname, h.app_name, h.log_id
    )
}

/// Appends one message in the local format `syslog(3)` sends to `/dev/log`:
/// `<PRI>Mmm dd hh:mm:ss APP[PID]: MSG` (the time is the record's, in UTC).
pub(crate) fn push_local(out: &mut Vec<u8>, h: &Header, line: &[u8]) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let pri = u32::from(h.facility) * 8 + u32::from(SEVERITY_NOTICE);
    let stamp = ts_of(line).and_then(|ts| {
        let month: usize = ts.get(5..7)?.parse().ok()?;
        let day: u8 = ts.get(8..10)?.parse().ok()?;
        Some(format!(
            "{} {day:>2} {}",
            MONTHS.get(month.checked_sub(1)?)?,
            ts.get(11..19)?
        ))
    });
    let stamp = stamp.unwrap_or_else(|| "Jan  1 00:00:00".into());
    let _ = write!(out, "<{pri}>{stamp} {}[{}]: ", h.app_name, h.pid);
    out.extend_from_slice(line);
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &[u8] = br#"{"seq":42,"ts":"2026-03-05T07:08:09.123456Z","kind":"request","path":"caf\u00e9 \"x\"","prev":"00","hash":"11"}"#;

    fn header() -> Header {
        Header {
            facility: 4,
            hostname: "gw.example".into(),
            app_name: "fsgate".into(),
            log_id: "0123456789abcdef0123456789abcdef".into(),
            pid: 77,
        }
    }

    #[test]
    fn seq_and_ts_come_from_the_line() {
        assert_eq!(seq_of(LINE), Some(42));
        assert_eq!(ts_of(LINE), Some("2026-03-05T07:08:09.123456Z"));
        assert_eq!(seq_of(b"{\"seq\":,"), None);
        assert_eq!(seq_of(b"{\"ts\":1}"), None);
        assert_eq!(seq_of(b"{\"seq\":123456789012345678901,"), None);
    }

    #[test]
    fn rfc5424_octet_counted_frame_carries_the_line_byte_exact() {
        let mut out = b"x".to_vec();
        push_octet_counted(&mut out, &header(), 42, LINE);
        let text = &out[1..];
        let (len, msg) = text.split_at(text.iter().position(|&b| b == b' ').unwrap());
        let msg = &msg[1..];
        assert_eq!(std::str::from_utf8(len).unwrap(), msg.len().to_string());
        let head = "<37>1 2026-03-05T07:08:09.123456Z gw.example fsgate 0123456789abcdef0123456789abcdef 42 - ";
        assert!(msg.starts_with(head.as_bytes()));
        assert_eq!(&msg[head.len()..], LINE);
    }

    #[test]
    fn local_format_is_what_syslog3_sends() {
        let mut out = Vec::new();
        push_local(&mut out, &header(), LINE);
        let head = "<37>Mar  5 07:08:09 fsgate[77]: ";
        assert!(
            out.starts_with(head.as_bytes()),
            "{}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(&out[head.len()..], LINE);
    }
}
