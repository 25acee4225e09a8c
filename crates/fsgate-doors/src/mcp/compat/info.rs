//! `get_file_info` in the reference server's shape: its `key: value` lines, times as
//! JavaScript's `Date.prototype.toString` writes them.

use fsgate_gateway::ops;
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::CallToolResult;

use super::shared::{handle, unexpected};
use crate::door::Ops;
use crate::mcp::args::PathArgs;
use crate::mcp::render::{ToolError, text};
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Op, Output};

/// `get_file_info`: size, created, modified, accessed, isDirectory, isFile and
/// permissions, in the reference server's order and formats. A time the file system
/// does not give (birth time on some) is `unknown` where the reference shows 1970.
pub(in crate::mcp) fn file_info(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: PathArgs,
) -> Result<CallToolResult, ToolError> {
    let stat = Op::Stat(ops::Stat {
        path: a.path,
        follow: true,
    });
    let Output::Stat { info, .. } = handle(gw, ctx, stat)? else {
        return Err(unexpected("get_file_info"));
    };
    let [modified, accessed, created] = info.times.map(|t| t.map_or("unknown".into(), js_date));
    let kind = info.mode & libc::S_IFMT;
    Ok(text(format!(
        "size: {}\ncreated: {created}\nmodified: {modified}\naccessed: {accessed}\n\
         isDirectory: {}\nisFile: {}\npermissions: {:03o}",
        info.size,
        kind == libc::S_IFDIR,
        kind == libc::S_IFREG,
        info.mode & 0o777,
    )))
}

/// Whole seconds since the epoch, rounded down (as a JavaScript Date shows them).
fn epoch_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => {
            let d = e.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(d.subsec_nanos() > 0)
        }
    }
}

/// `t` as JavaScript's `Date.prototype.toString` writes it in UTC:
/// `Mon Nov 23 2026 00:23:14 GMT+0000 (Coordinated Universal Time)`. Always UTC: the
/// reference writes the server's local zone, which is the same text where that is UTC.
fn js_date(t: SystemTime) -> String {
    let Ok(dt) = time::OffsetDateTime::from_unix_timestamp(epoch_seconds(t)) else {
        return "Invalid Date".into();
    };
    let weekday = &dt.weekday().to_string()[..3];
    let month = &dt.month().to_string()[..3];
    let year = dt.year();
    let sign = if year < 0 { "-" } else { "" };
    format!(
        "{weekday} {month} {:02} {sign}{:04} {:02}:{:02}:{:02} GMT+0000 (Coordinated Universal Time)",
        dt.day(),
        year.unsigned_abs(),
        dt.hour(),
        dt.minute(),
        dt.second(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_as_javascript_writes_them() {
        // new Date(1795393464123).toString() with TZ=UTC.
        let t = UNIX_EPOCH + Duration::from_millis(1_795_393_464_123);
        assert_eq!(
            js_date(t),
            "Mon Nov 23 2026 00:24:24 GMT+0000 (Coordinated Universal Time)"
        );
        assert_eq!(
            js_date(UNIX_EPOCH),
            "Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)"
        );
        // Before the epoch, a fraction rounds down: new Date(-500).
        let t = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(
            js_date(t),
            "Wed Dec 31 1969 23:59:59 GMT+0000 (Coordinated Universal Time)"
        );
        // Year 5 is written with four digits (a Date set with setUTCFullYear(5)).
        let t = UNIX_EPOCH - Duration::from_secs(62_009_366_400);
        assert_eq!(
            js_date(t),
            "Sat Jan 01 0005 00:00:00 GMT+0000 (Coordinated Universal Time)"
        );
    }
}
