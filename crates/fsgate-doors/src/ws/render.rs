//! The `data` of a successful operation, as the channel writes it: paths
//! workspace-rooted, times ISO 8601 with milliseconds.

use base64::Engine;

use serde_json::{Value, json};

use fsgate_gateway::Gateway;

use fsgate_gateway::ops::format_permissions;
use fsgate_gateway::ops::{Encoding, Output, PathStyle};

/// The `data` of a successful operation, paths workspace-rooted.
pub(crate) fn render(gw: &Gateway, out: Output, base64: bool) -> Value {
    let style = PathStyle::Rooted;
    match out {
        Output::File { content, encoding } => {
            if base64 && encoding == Encoding::Utf8 {
                let b64 = base64::engine::general_purpose::STANDARD.encode(content.as_bytes());
                json!({"content": b64, "encoding": Encoding::Base64.as_str()})
            } else {
                json!({"content": content, "encoding": encoding.as_str()})
            }
        }
        Output::Text(content) => json!({"content": content, "encoding": Encoding::Utf8.as_str()}),
        Output::Unit => json!({}),
        Output::Entries {
            entries,
            truncated,
            next,
        } => {
            let list: Vec<Value> = entries
                .into_iter()
                .map(|e| {
                    json!({
                        "name": e.name,
                        "type": e.kind.as_str(),
                        "size": e.size,
                        "modified": iso8601(e.modified.as_deref()),
                        "permissions": e.mode.map(format_permissions),
                        "path": gw.show_path(style, &e.path),
                    })
                })
                .collect();
            let v = crate::results::with_truncated(json!({"entries": list}), truncated);
            crate::results::with_next(v, next)
        }
        Output::Stat { path, info } => json!({
            "name": path.file_name().unwrap_or_default(),
            "type": info.kind,
            "size": info.size,
            "modified": iso8601(info.modified.as_deref()),
            "permissions": info.permissions,
            "path": gw.show_path(style, &path),
        }),
        // Search results have the JSON-RPC doors' shape, workspace-rooted.
        out @ (Output::Paths { .. } | Output::Grep { .. } | Output::Opened(_)) => {
            crate::results::render(gw, style, out)
        }
    }
}

/// A modification time as the channel writes it: ISO 8601 UTC with milliseconds
/// (`2026-05-01T12:00:00.000Z`, what JavaScript's `Date.toISOString` gives).
fn iso8601(rfc3339: Option<&str>) -> Value {
    use time::format_description::well_known::Rfc3339;
    let Some(t) = rfc3339.and_then(|s| time::OffsetDateTime::parse(s, &Rfc3339).ok()) else {
        return Value::Null;
    };
    let t = t.to_offset(time::UtcOffset::UTC);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&fmt).map_or(Value::Null, Value::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso_8601_with_milliseconds() {
        assert_eq!(
            iso8601(Some("2026-05-01T12:00:00.123456789Z")),
            json!("2026-05-01T12:00:00.123Z")
        );
        assert_eq!(
            iso8601(Some("2026-05-01T12:00:00Z")),
            json!("2026-05-01T12:00:00.000Z")
        );
        assert_eq!(iso8601(None), Value::Null);
    }
}
