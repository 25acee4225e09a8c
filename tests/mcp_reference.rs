//! The reference MCP filesystem server next to fsgate: the same calls on both, on
//! workspaces seeded alike, so tests can compare what a client sees (issue: drop-in
//! parity). The reference is `@modelcontextprotocol/server-filesystem`, installed by
//! `scripts/install-peers.sh` into `.peers/reference`; missing, the tests go through
//! `crate::common::skip_or_fail` (a failure under CI).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::mcp_harness::{Dirs, McpGate};

/// The pinned reference version (the same as scripts/bench.sh and install-peers.sh).
pub const REFERENCE_VERSION: &str = "2026.8.31";

/// The reference server's entry point, if installed.
pub fn reference_js() -> Result<PathBuf, String> {
    let js = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        ".peers/reference/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    if js.exists() {
        Ok(js)
    } else {
        Err(format!(
            "{} is missing: run ./scripts/install-peers.sh",
            js.display()
        ))
    }
}

/// fsgate (default policy unless given) and the reference server, each on a workspace
/// seeded with the same files, both past the 2025-06-18 handshake.
pub struct Twins {
    pub fsgate: McpGate,
    pub reference: McpGate,
    next_id: u64,
}

impl Twins {
    /// Both servers, or None (after `skip_or_fail`) when the reference is not installed.
    pub fn start(test: &str, policy: Option<&str>, seed: &[(&str, &[u8])]) -> Option<Twins> {
        let js = match reference_js() {
            Ok(js) => js,
            Err(why) => {
                crate::common::skip_or_fail(test, &why);
                return None;
            }
        };
        let mut fsgate = McpGate::start(policy);
        let dirs = Dirs::new();
        let mut cmd = Command::new("node");
        // The reference writes times in the local zone; fsgate in UTC.
        cmd.arg(js)
            .arg(&dirs.root)
            .current_dir(&dirs.state)
            .env("TZ", "UTC");
        let mut reference = McpGate::spawn(cmd, dirs);
        for (rel, content) in seed {
            fsgate.dirs.put(rel, content);
            reference.dirs.put(rel, content);
        }
        fsgate.initialize("2025-06-18");
        reference.initialize("2025-06-18");
        Some(Twins {
            fsgate,
            reference,
            next_id: 1,
        })
    }

    /// The same tool call on both; `args` may use `{root}` for each server's workspace
    /// root. Returns (fsgate's result, the reference's result): the whole JSON-RPC
    /// `result` or `error` object, whichever came.
    pub fn both(&mut self, tool: &str, args: &str) -> (Value, Value) {
        self.next_id += 1;
        let id = self.next_id;
        let one = |gate: &mut McpGate| {
            let root = gate.dirs.root.display().to_string();
            let text = args.replace("{root}", &root);
            let args: Value = serde_json::from_str(&text).expect("args are JSON");
            gate.request(
                id,
                "tools/call",
                serde_json::json!({"name": tool, "arguments": args}),
            );
            let r = gate.response(id);
            r.get("result")
                .or_else(|| r.get("error"))
                .cloned()
                .unwrap_or(r)
        };
        (one(&mut self.fsgate), one(&mut self.reference))
    }

    /// `tools/list` on both: (fsgate's tools, the reference's tools).
    pub fn tools(&mut self) -> (Vec<Value>, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        let list = |gate: &mut McpGate| {
            gate.call(id, "tools/list", serde_json::json!({}))["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        (list(&mut self.fsgate), list(&mut self.reference))
    }
}

/// A tool result's text with each server's root replaced by `{root}`, for comparing.
pub fn rooted_text(result: &Value, gate: &McpGate) -> String {
    crate::mcp_harness::text_of(result).replace(&gate.dirs.root.display().to_string(), "{root}")
}

/// The reference server answers; a smoke test of the harness itself.
#[test]
fn twins_answer_the_same_read() {
    let Some(mut t) = Twins::start(
        "twins_answer_the_same_read",
        None,
        &[("a.txt", b"alpha\nbeta\n")],
    ) else {
        return;
    };
    let (f, r) = t.both("read_text_file", r#"{"path": "{root}/a.txt"}"#);
    assert_eq!(crate::mcp_harness::text_of(&f), "alpha\nbeta\n", "{f}");
    assert_eq!(crate::mcp_harness::text_of(&r), "alpha\nbeta\n", "{r}");
    // A 2025-era session gets no 2026 `resultType` (fsgate's direct path included).
    assert_eq!(f.get("resultType"), r.get("resultType"), "{f}\n{r}");
    let (ft, rt) = t.tools();
    assert!(
        ft.len() >= 14 && rt.len() == 14,
        "{} {}",
        ft.len(),
        rt.len()
    );
}
