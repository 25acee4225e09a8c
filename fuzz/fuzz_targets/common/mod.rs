//! A gateway over a small temp workspace, shared by the dispatch targets: created once
//! per process, its contents reset before each run so a run does not depend on the
//! ones before it. Two policies: the built-in default and a permissive one.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fsgate_gateway::Gateway;
use fsgate_policy::Policy;
use fsgate_workspace::Workspace;

/// Allows everything, no secret names, no content rules, binary reads as base64.
const PERMISSIVE: &str = r#"
version = 1
[secrets]
builtin = false
[limits]
binary = "base64"
max_message_bytes = 65536
[[rule]]
id = "all"
effect = "allow"
ops = ["read", "list", "write", "delete"]
paths = ["**"]
"#;

/// What every run starts from.
const SEED: [(&str, &[u8]); 6] = [
    ("README.md", b"# hello\nworld\n"),
    ("src/main.rs", b"fn main() {\n    println!(\"hi\");\n}\n"),
    ("src/lib/mod.rs", b"pub mod x;\n"),
    (".env", b"TOKEN=abc\n"),
    ("docs/notes.txt", b"one\ntwo\nthree\n"),
    ("data.bin", b"\x00\x01\x02\xff"),
];

pub struct Gateways {
    pub root: PathBuf,
    pub default: Gateway,
    pub permissive: Gateway,
}

impl Gateways {
    /// The gateway for run `n`: alternates between the two policies.
    pub fn pick(&self, n: usize) -> &Gateway {
        if n % 2 == 0 {
            &self.default
        } else {
            &self.permissive
        }
    }
}

/// Held for one input: when it ends, waits until no helper thread of the workspace runs
/// a job (see `fsgate_workspace::fuzz::settle`), so the leak check that follows an input
/// finds nothing held mid-job on a helper's stack.
pub struct SettleOnDrop;

impl Drop for SettleOnDrop {
    fn drop(&mut self) {
        fsgate_workspace::fuzz::settle();
    }
}

/// The gateways, their workspace reset to [`SEED`].
pub fn gateways() -> &'static Gateways {
    static GW: OnceLock<Gateways> = OnceLock::new();
    let gw = GW.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        let root = tempfile::Builder::new()
            .prefix("fsgate-fuzz-ws-")
            .tempdir_in(base)
            .expect("temp dir")
            .keep();
        let root = root.canonicalize().expect("canonical root");
        let open = |text: Option<&str>| {
            let policy = match text {
                Some(t) => Policy::from_toml(t, "fuzz").expect("permissive policy"),
                None => Policy::builtin_default().expect("default policy"),
            };
            Gateway::new(policy, Workspace::open(&root).expect("workspace"))
        };
        Gateways {
            default: open(None),
            permissive: open(Some(PERMISSIVE)),
            root,
        }
    });
    reset(&gw.root);
    gw
}

/// Empties `root` and writes the seed files.
fn reset(root: &Path) {
    for entry in std::fs::read_dir(root).expect("read workspace") {
        let path = entry.expect("entry").path();
        let meta = std::fs::symlink_metadata(&path).expect("metadata");
        if meta.is_dir() {
            std::fs::remove_dir_all(&path).expect("remove dir");
        } else {
            std::fs::remove_file(&path).expect("remove file");
        }
    }
    for (rel, content) in SEED {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("seed");
    }
}
