//! The monorepo workloads: `directory_tree`, `glob **/*.rs` and a literal `grep` on a
//! generated monorepo (see [`crate::mono`]), each against `fd` or `rg` on the same tree;
//! and the paged listing of one very wide directory. Every answer is checked: fsgate's
//! must be exactly what the generator made less the secret files; `fd`'s and `rg`'s
//! exactly what it made, secrets included.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

use crate::Error;
use crate::mono::{self, Kind, Mono};
use crate::server::{Server, cpu_ticks, ticks_per_sec, vm_kib};
use crate::workloads::{Run, rusage_cpu};

/// The package `mono_tree` lists (one package: its answer fits one message).
pub const TREE_PACKAGE: &str = "pkg-00";

fn mcp_call(name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": args}})
}

fn clip(s: &str) -> String {
    s.chars().take(600).collect()
}

/// The structured content of a successful tool result (or its text parsed as JSON).
fn structured(v: &Value) -> Result<Value, Error> {
    if v.get("error").is_some() || v["result"]["isError"] == Value::Bool(true) {
        return Err(Error::Answer(format!(
            "call failed: {}",
            clip(&v.to_string())
        )));
    }
    if let Some(s) = v["result"].get("structuredContent") {
        return Ok(s.clone());
    }
    let text = v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    serde_json::from_str(text).map_err(|e| Error::Answer(format!("not JSON: {e}")))
}

/// Sends `req` `n` times on `srv`, timing each from send to the answer's text (as `fd`
/// and `rg` are timed to their whole output), then checking it untimed with `check`;
/// CPU and peak RSS of the server.
async fn timed(
    srv: &Server,
    n: usize,
    req: &Value,
    check: impl Fn(&Value) -> Result<(), Error>,
) -> Result<Run, Error> {
    let cpu0 = cpu_ticks(srv.pid)?;
    let own0 = rusage_cpu(libc::RUSAGE_SELF);
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let text = srv.client.call_raw(req.clone()).await?;
        lat.push(t.elapsed());
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Error::Answer(format!("not JSON ({e}): {}", clip(&text))))?;
        check(&v)?;
    }
    Ok(Run {
        lat,
        wall: t0.elapsed(),
        cpu_s: Some((cpu_ticks(srv.pid)? - cpu0) as f64 / ticks_per_sec()),
        hwm_kib: vm_kib(srv.pid, "VmHWM").ok(),
        driver_cpu_s: Some(rusage_cpu(libc::RUSAGE_SELF) - own0),
        syncs: None,
    })
}

/// Runs a command `n` times, checking each output with `check`; CPU of the children.
fn timed_cmd(
    mut cmd: impl FnMut() -> Command,
    n: usize,
    check: impl Fn(&str) -> Result<(), Error>,
) -> Result<Run, Error> {
    let cpu0 = rusage_cpu(libc::RUSAGE_CHILDREN);
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = cmd();
        let t = Instant::now();
        let out = c
            .output()
            .map_err(|e| Error::Setup(format!("{c:?}: {e}")))?;
        lat.push(t.elapsed());
        if !out.status.success() {
            return Err(Error::Answer(format!("{c:?}: {}", out.status)));
        }
        check(&String::from_utf8_lossy(&out.stdout))?;
    }
    Ok(Run {
        lat,
        wall: t0.elapsed(),
        cpu_s: Some(rusage_cpu(libc::RUSAGE_CHILDREN) - cpu0),
        hwm_kib: None,
        driver_cpu_s: None,
        syncs: None,
    })
}

/// What the monorepo holds, as the checks need it.
pub struct Expect {
    /// Every file (relative path), secrets included.
    pub files: BTreeSet<String>,
    /// The secret files.
    pub secrets: BTreeSet<String>,
    /// Every directory (relative path).
    pub dirs: BTreeSet<String>,
    /// (path, line) of every planted literal, secrets included.
    pub needles: BTreeSet<(String, u64)>,
}

impl Expect {
    /// Everything the generator made (no file is read back).
    pub fn of(m: &Mono) -> Expect {
        let mut e = Expect {
            files: BTreeSet::new(),
            secrets: BTreeSet::new(),
            dirs: (0..m.dir_count()).map(|k| m.dir(k)).collect(),
            needles: BTreeSet::new(),
        };
        for f in 0..m.files {
            let (path, kind) = m.file(f);
            if matches!(kind, Kind::Secret | Kind::Plain { needle: true }) {
                let line = m.content(f, &kind).lines().count() as u64;
                e.needles.insert((path.clone(), line));
            }
            if kind == Kind::Secret {
                e.secrets.insert(path.clone());
            }
            e.files.insert(path);
        }
        e
    }

    fn rs(&self, with_secrets: bool) -> BTreeSet<String> {
        self.files
            .iter()
            .filter(|p| p.ends_with(".rs") && (with_secrets || !self.secrets.contains(*p)))
            .cloned()
            .collect()
    }

    /// Files and directories beneath `top` (not `top` itself).
    fn under(&self, top: &str, with_secrets: bool) -> (usize, usize) {
        let prefix = format!("{top}/");
        let files = self
            .files
            .iter()
            .filter(|p| p.starts_with(&prefix) && (with_secrets || !self.secrets.contains(*p)))
            .count();
        let dirs = self.dirs.iter().filter(|d| d.starts_with(&prefix)).count();
        (files, dirs)
    }
}

/// Files and directories in a `directory_tree` answer.
fn count_tree(nodes: &Value, files: &mut usize, dirs: &mut usize) -> Result<(), Error> {
    for n in nodes.as_array().into_iter().flatten() {
        match n["type"].as_str() {
            Some("file") => *files += 1,
            Some("directory") => {
                *dirs += 1;
                count_tree(&n["children"], files, dirs)?;
            }
            _ => return Err(Error::Answer("directory_tree: a node without type".into())),
        }
    }
    Ok(())
}

fn text_of(v: &Value) -> Result<&str, Error> {
    if v.get("error").is_some() || v["result"]["isError"] == Value::Bool(true) {
        return Err(Error::Answer(format!(
            "call failed: {}",
            clip(&v.to_string())
        )));
    }
    v["result"]["content"][0]["text"]
        .as_str()
        .ok_or_else(|| Error::Answer("no text".into()))
}

/// `mono_tree`: `directory_tree` of one package; every file but the secrets, every
/// directory.
pub async fn tree(srv: &Server, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    let abs = root.join(TREE_PACKAGE).to_string_lossy().into_owned();
    let want = ex.under(TREE_PACKAGE, false);
    let req = mcp_call("directory_tree", json!({ "path": abs }));
    timed(srv, n, &req, |v| {
        let tree: Value = serde_json::from_str(text_of(v)?)
            .map_err(|e| Error::Answer(format!("directory_tree: not JSON: {e}")))?;
        let (mut f, mut d) = (0, 0);
        count_tree(&tree, &mut f, &mut d)?;
        if (f, d) != want {
            return Err(Error::Answer(format!(
                "directory_tree: {f} files and {d} dirs, want {want:?}"
            )));
        }
        Ok(())
    })
    .await
}

/// `mono_tree_root`: `directory_tree` of the whole monorepo. It answers whole (every
/// file but the secrets, every directory) or, when the tree is more than one answer may
/// hold, refuses naming the limit it met (the message's bytes, or the entries a tree
/// may hold): the full monorepo's is the refusal.
pub async fn tree_root(srv: &Server, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    let abs = root.to_string_lossy().into_owned();
    let req = mcp_call("directory_tree", json!({ "path": abs }));
    let want = (ex.files.len() - ex.secrets.len(), ex.dirs.len());
    timed(srv, n, &req, |v| {
        let text = v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        if v["result"]["isError"] == Value::Bool(true) {
            let named = text.contains("limits.max_message_bytes") || text.contains("max_entries");
            return if named {
                Ok(())
            } else {
                Err(Error::Answer(format!(
                    "directory_tree of the root: {}",
                    clip(text)
                )))
            };
        }
        let tree: Value = serde_json::from_str(text)
            .map_err(|e| Error::Answer(format!("directory_tree: not JSON: {e}")))?;
        let (mut f, mut d) = (0, 0);
        count_tree(&tree, &mut f, &mut d)?;
        if (f, d) != want {
            return Err(Error::Answer(format!(
                "directory_tree of the root: {f} files and {d} dirs, want {want:?}"
            )));
        }
        Ok(())
    })
    .await
}

/// `mono_glob`: fsgate's `glob **/*.rs`; every `.rs` file but the secret ones.
pub async fn glob(srv: &Server, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    let want = ex.rs(false);
    let prefix = format!("{}/", root.display());
    let req = mcp_call("glob", json!({"pattern": "**/*.rs"}));
    timed(srv, n, &req, |v| {
        let s = structured(v)?;
        if s.get("truncated").is_some() {
            return Err(Error::Answer("glob: answer truncated".into()));
        }
        let got: BTreeSet<String> = s["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .map(|p| p.strip_prefix(&prefix).unwrap_or(p).to_string())
            .collect();
        if got != want {
            return Err(Error::Answer(format!(
                "glob **/*.rs: {} paths, want {}",
                got.len(),
                want.len()
            )));
        }
        Ok(())
    })
    .await
}

/// `mono_grep`: fsgate's `grep` of the literal over the whole tree; every planted
/// line but those in secret files.
pub async fn grep(srv: &Server, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    let want: BTreeSet<(String, u64)> = ex
        .needles
        .iter()
        .filter(|(p, _)| !ex.secrets.contains(p))
        .cloned()
        .collect();
    let prefix = format!("{}/", root.display());
    let abs = root.to_string_lossy().into_owned();
    let args = json!({"pattern": mono::NEEDLE, "path": abs, "maxResults": 100_000});
    timed(srv, n, &mcp_call("grep", args), |v| {
        let s = structured(v)?;
        if s.get("truncated").is_some() {
            return Err(Error::Answer("grep: answer truncated".into()));
        }
        let mut got = BTreeSet::new();
        for m in s["matches"].as_array().into_iter().flatten() {
            let (Some(p), Some(l)) = (m["path"].as_str(), m["lineNumber"].as_u64()) else {
                return Err(Error::Answer("grep: a match without path or line".into()));
            };
            got.insert((p.strip_prefix(&prefix).unwrap_or(p).to_string(), l));
        }
        if got != want {
            return Err(Error::Answer(format!(
                "grep {}: {} matches, want {}",
                mono::NEEDLE,
                got.len(),
                want.len()
            )));
        }
        Ok(())
    })
    .await
}

/// Relative paths printed one a line (`./` dropped, directories' trailing `/` too).
fn lines_set(out: &str) -> BTreeSet<String> {
    out.lines()
        .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn fd_cmd(fd: &Path, root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(fd);
    // Hidden and ignored files too: the secrets are among what fd finds.
    c.args(["--hidden", "--no-ignore", "--color", "never"]);
    c.args(args).current_dir(root);
    c
}

/// `fd` listing every entry of the package `mono_tree` lists.
pub fn fd_tree(fd: &Path, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    let (files, dirs) = ex.under(TREE_PACKAGE, true);
    timed_cmd(
        || fd_cmd(fd, root, &[".", TREE_PACKAGE]),
        n,
        |out| {
            let got = lines_set(out).len();
            if got != files + dirs {
                return Err(Error::Answer(format!(
                    "fd . {TREE_PACKAGE}: {got} entries, want {}",
                    files + dirs
                )));
            }
            Ok(())
        },
    )
}

/// `fd` finding every `.rs` file (the secret ones too).
pub fn fd_glob(fd: &Path, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    let want = ex.rs(true);
    timed_cmd(
        || fd_cmd(fd, root, &["--type", "f", "--glob", "*.rs"]),
        n,
        |out| {
            let got = lines_set(out);
            if got != want {
                return Err(Error::Answer(format!(
                    "fd *.rs: {} paths, want {}",
                    got.len(),
                    want.len()
                )));
            }
            Ok(())
        },
    )
}

/// `rg` finding every planted line (the secret files' too).
pub fn rg_grep(rg: &Path, root: &Path, ex: &Expect, n: usize) -> Result<Run, Error> {
    timed_cmd(
        || {
            let mut c = Command::new(rg);
            c.args([
                "--no-config",
                "-uuu",
                "--no-heading",
                "--with-filename",
                "-n",
            ])
            .args(["-F", "-e", mono::NEEDLE])
            .current_dir(root);
            c
        },
        n,
        |out| {
            let got: BTreeSet<(String, u64)> = out
                .lines()
                .filter_map(|l| {
                    let mut it = l.splitn(3, ':');
                    let p = it.next()?.trim_start_matches("./").to_string();
                    Some((p, it.next()?.parse().ok()?))
                })
                .collect();
            if got != ex.needles {
                return Err(Error::Answer(format!(
                    "rg {}: {} matches, want {}",
                    mono::NEEDLE,
                    got.len(),
                    ex.needles.len()
                )));
            }
            Ok(())
        },
    )
}

/// `list_wide`: the wide directory `dir` (relative) listed whole with `ls`, page after
/// page (`cursor`); every name once, in order, and no page over the bound.
pub async fn list_pages(
    srv: &Server,
    root: &Path,
    dir: &str,
    entries: usize,
    n: usize,
) -> Result<Run, Error> {
    let abs = root.join(dir).to_string_lossy().into_owned();
    let cpu0 = cpu_ticks(srv.pid)?;
    let own0 = rusage_cpu(libc::RUSAGE_SELF);
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let seen = list_all(srv, &abs).await?;
        lat.push(t.elapsed());
        if seen != entries {
            return Err(Error::Answer(format!(
                "ls pages: {seen} entries, want {entries}"
            )));
        }
    }
    Ok(Run {
        lat,
        wall: t0.elapsed(),
        cpu_s: Some((cpu_ticks(srv.pid)? - cpu0) as f64 / ticks_per_sec()),
        hwm_kib: vm_kib(srv.pid, "VmHWM").ok(),
        driver_cpu_s: Some(rusage_cpu(libc::RUSAGE_SELF) - own0),
        syncs: None,
    })
}

/// Lists the wide directory `abs` page after page; the count of its entries, each
/// checked to be the next name.
async fn list_all(srv: &Server, abs: &str) -> Result<usize, Error> {
    let mut cursor: Option<String> = None;
    let mut seen = 0usize;
    loop {
        let mut args = json!({ "path": abs });
        if let Some(c) = &cursor {
            args["cursor"] = c.clone().into();
        }
        let s = structured(&srv.client.call(mcp_call("ls", args)).await?)?;
        let list = s["entries"].as_array().cloned().unwrap_or_default();
        for e in &list {
            if e["name"].as_str() != Some(mono::wide_name(seen).as_str()) {
                return Err(Error::Answer(format!(
                    "ls page: entry {seen} is {}",
                    e["name"]
                )));
            }
            seen += 1;
        }
        match s["nextCursor"].as_str() {
            Some(c) if !list.is_empty() => cursor = Some(c.to_string()),
            Some(_) => return Err(Error::Answer("ls: an empty page with a cursor".into())),
            None => return Ok(seen),
        }
    }
}

/// Threads reading at once in [`warm`]: on a cold cache the reads wait on the disk, not
/// the cores, so more than the cores keep it busy.
const WARM_THREADS: usize = 16;

/// Reads every file under `root` once, untimed, so that each tool compared then finds
/// the tree in the page cache: whichever ran first on a cold cache would otherwise be
/// timed on the disk (a cold walk of the full monorepo takes minutes here). Returns the
/// files read.
pub fn warm(root: &Path) -> Result<usize, Error> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let e = e.map_err(|e| Error::io(&d, e))?;
            let kind = e.file_type().map_err(|err| Error::io(&e.path(), err))?;
            if kind.is_dir() {
                dirs.push(e.path());
            } else if kind.is_file() {
                files.push(e.path());
            }
        }
    }
    let next = AtomicUsize::new(0);
    let read = |files: &[PathBuf]| -> Result<(), Error> {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(p) = files.get(i) else { return Ok(()) };
            let mut f = std::fs::File::open(p).map_err(|e| Error::io(p, e))?;
            while std::io::Read::read(&mut f, &mut buf).map_err(|e| Error::io(p, e))? > 0 {}
        }
    };
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..WARM_THREADS)
            .map(|_| s.spawn(|| read(&files)))
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(Error::Setup("a warm-up reader panicked".into())))
        })
    })?;
    Ok(files.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every regular file beneath is read once; symlinks are not followed.
    #[test]
    fn warm_reads_every_file_beneath_and_follows_no_link() {
        let root = std::env::temp_dir().join(format!("fsgate-warm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        for (i, p) in ["top.rs", "a/one.rs", "a/b/two.rs", "a/b/c/three.rs"]
            .iter()
            .enumerate()
        {
            std::fs::write(root.join(p), vec![b'x'; 70_000 * i]).unwrap();
        }
        std::os::unix::fs::symlink("/etc", root.join("a/outside")).unwrap();
        assert_eq!(warm(&root).unwrap(), 4);
        std::fs::remove_dir_all(&root).unwrap();
        assert!(
            matches!(warm(&root), Err(Error::Io { .. })),
            "a missing tree is an error"
        );
    }
}
