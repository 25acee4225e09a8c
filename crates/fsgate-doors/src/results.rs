//! The JSON result of a workspace operation, as the JSON-RPC doors give it: the ACP
//! result, and the structured content of MCP's contract tools (the same shape).

use serde_json::{Value, json};

use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Output, PathStyle};

/// Renders an [`Output`] as the ACP result (and MCP structured content).
pub(crate) fn render(gw: &Gateway, style: PathStyle, out: Output) -> Value {
    match out {
        Output::Text(content) => json!({ "content": content }),
        Output::File { content, encoding } => {
            json!({ "content": content, "encoding": encoding.as_str() })
        }
        // An opened file is the filesystem view's, never a door's answer.
        Output::Unit | Output::Opened(_) => Value::Null,
        Output::Entries {
            entries,
            truncated,
            next,
        } => {
            let list: Vec<Value> = entries
                .into_iter()
                .map(|e| {
                    let mut v = json!({
                        "name": e.name,
                        "path": gw.show_path(style, &e.path),
                        "type": e.kind.as_str(),
                    });
                    if let Some(s) = e.size {
                        v["size"] = s.into();
                    }
                    if let Some(m) = e.modified {
                        v["modified"] = m.into();
                    }
                    v
                })
                .collect();
            with_next(with_truncated(json!({ "entries": list }), truncated), next)
        }
        Output::Stat { path, info } => json!({ "stat": {
            "path": gw.show_path(style, &path),
            "type": info.kind,
            "size": info.size,
            "modified": info.modified,
            "permissions": info.permissions,
        }}),
        Output::Paths { paths, truncated } => {
            let list: Vec<String> = paths.iter().map(|p| gw.show_path(style, p)).collect();
            with_truncated(json!({ "matches": list }), truncated)
        }
        Output::Grep { hits, truncated } => {
            let list: Vec<Value> = hits
                .into_iter()
                .map(|h| {
                    json!({
                        "path": gw.show_path(style, &h.path),
                        "lineNumber": h.line_number,
                        "line": h.line,
                    })
                })
                .collect();
            with_truncated(json!({ "matches": list }), truncated)
        }
    }
}

/// Adds `"truncated": true` to a listing that stopped at the message limit (and
/// nothing to a complete one, whose shape stays as it always was).
pub(crate) fn with_truncated(mut v: Value, truncated: bool) -> Value {
    if truncated && let Some(m) = v.as_object_mut() {
        m.insert("truncated".into(), Value::Bool(true));
    }
    v
}

/// Adds `"nextCursor"` to a page of a listing that more entries follow: the request
/// that names it as `cursor` gets the next page.
pub(crate) fn with_next(mut v: Value, next: Option<String>) -> Value {
    if let (Some(c), Some(m)) = (next, v.as_object_mut()) {
        m.insert("nextCursor".into(), Value::String(c));
    }
    v
}

/// The size of `v` encoded as JSON, measured without building it; `None` once it passes
/// `max` (the count stops there). Used to refuse or bound an answer before allocating it.
pub(crate) fn json_len_upto(v: &impl serde::Serialize, max: usize) -> Option<usize> {
    /// Counts bytes written, and fails past `max`.
    struct Counter {
        n: usize,
        max: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.n += data.len();
            if self.n > self.max {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter { n: 0, max };
    serde_json::to_writer(&mut c, v).ok().map(|()| c.n)
}
