//! The scripted model API (tests/agents/model_stub.py), started on loopback port 0.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

use crate::acp_proxy::editor::repo;

/// A running fake: its port and its request log; stopped on drop.
pub struct Fake {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its loopback port.
    pub port: u16,
    log: PathBuf,
}

impl Fake {
    /// Starts the fake, logging to `log`.
    pub fn start(log: &Path) -> Fake {
        let mut child = Command::new("python3")
            .arg(repo().join("tests/agents/model_stub.py"))
            .arg("--log")
            .arg(log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the model fake (python3)");
        let mut line = String::new();
        let out = child.stdout.take().expect("fake stdout");
        BufReader::new(out)
            .read_line(&mut line)
            .expect("fake port line");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("fake said {line:?}"));
        let stdin = child.stdin.take();
        Fake {
            child,
            stdin,
            port,
            log: log.to_path_buf(),
        }
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request it answered so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The requests of the agent's tool loop (the ones that offered tools).
    pub fn main_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["kind"] == "main")
            .collect()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool names offered in a logged request.
pub fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
