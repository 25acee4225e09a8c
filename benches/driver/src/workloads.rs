//! The timed workloads: N requests with K in flight over one connection, every answer
//! checked. A wrong answer fails the workload: no figures come from a failing call.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::Error;
use crate::server::{Door, Server, cpu_ticks, ticks_per_sec, vm_kib};
use crate::tree::{self, Sizes};

/// What one workload measured on one server.
#[derive(Debug, Clone)]
pub struct Run {
    /// Latency of each request, send to answer.
    pub lat: Vec<Duration>,
    /// First send to last answer (a write workload timed with its floor: the sum of
    /// its chunks').
    pub wall: Duration,
    /// Server CPU seconds (utime + stime) over the workload, if known.
    pub cpu_s: Option<f64>,
    /// Server peak RSS (VmHWM) after the workload, KiB.
    pub hwm_kib: Option<u64>,
    /// The driver's own CPU seconds over the workload (it shares the machine's cores
    /// with the server), if measured.
    pub driver_cpu_s: Option<f64>,
    /// The server's `fsync` + `fdatasync` calls over the workload, if counted.
    pub syncs: Option<u64>,
}

/// Where a workload runs: the server's tree and the repetition (for fresh names).
pub struct Ctx<'a> {
    /// The server's workspace root (canonical).
    pub root: &'a Path,
    /// The tree's sizes.
    pub sz: &'a Sizes,
    /// Repetition number.
    pub rep: usize,
}

/// A request and the check of its answer (its JSON text), for op `i`.
trait Op {
    fn request(&self, i: usize) -> Value;
    fn check(&self, i: usize, answer: &str) -> Result<(), Error>;
}

/// An op whose check reads the answer as a `Value`.
struct FnOp<R, C>(R, C);

impl<R: Fn(usize) -> Value, C: Fn(usize, &Value) -> Result<(), Error>> Op for FnOp<R, C> {
    fn request(&self, i: usize) -> Value {
        (self.0)(i)
    }
    fn check(&self, i: usize, answer: &str) -> Result<(), Error> {
        let v: Value = serde_json::from_str(answer)
            .map_err(|e| Error::Answer(format!("not JSON ({e}): {}", clip(answer))))?;
        (self.1)(i, &v)
    }
}

/// A read op: its check parses only the content it compares (the rest of the answer,
/// such as MCP's structured copy of the content, is skipped, not built), so that the
/// driver's own work per read stays small beside the servers'.
/// Op `i` reads `files[i % files.len()]` (workspace path, content).
struct ReadOp<'a> {
    door: Door,
    root: &'a Path,
    files: Vec<(String, String)>,
}

impl Op for ReadOp<'_> {
    fn request(&self, i: usize) -> Value {
        let (rel, _) = &self.files[i % self.files.len()];
        read_req(self.door, self.root, rel)
    }
    fn check(&self, i: usize, answer: &str) -> Result<(), Error> {
        let (rel, want) = &self.files[i % self.files.len()];
        if read_content(self.door, answer)? != want.as_str() {
            return Err(Error::Answer(format!("{rel}: wrong content")));
        }
        Ok(())
    }
}

/// Runs `n` ops with `k` in flight; checks every answer.
async fn drive(srv: &Server, n: usize, k: usize, op: &dyn Op) -> Result<Run, Error> {
    drive_range(srv, 0..n, k, op).await
}

/// Runs ops `ops` (their numbers) with `k` in flight; checks every answer.
async fn drive_range(
    srv: &Server,
    ops: std::ops::Range<usize>,
    k: usize,
    op: &dyn Op,
) -> Result<Run, Error> {
    let (n, end) = (ops.len(), ops.end);
    let next = std::sync::atomic::AtomicUsize::new(ops.start);
    let cpu0 = cpu_ticks(srv.pid)?;
    let own0 = rusage_cpu(libc::RUSAGE_SELF);
    let t0 = Instant::now();
    let worker = || async {
        let mut lat = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= end {
                return Ok::<_, Error>(lat);
            }
            let req = op.request(i);
            let t = Instant::now();
            let ans = srv.client.call_raw(req).await?;
            lat.push(t.elapsed());
            op.check(i, &ans)?;
        }
    };
    let results = join_all((0..k.max(1)).map(|_| worker())).await;
    let wall = t0.elapsed();
    let own1 = rusage_cpu(libc::RUSAGE_SELF);
    let cpu1 = cpu_ticks(srv.pid)?;
    let mut lat = Vec::with_capacity(n);
    for r in results {
        lat.extend(r?);
    }
    Ok(Run {
        lat,
        wall,
        cpu_s: Some((cpu1 - cpu0) as f64 / ticks_per_sec()),
        hwm_kib: vm_kib(srv.pid, "VmHWM").ok(),
        driver_cpu_s: Some(own1 - own0),
        syncs: None,
    })
}

fn short(v: &Value) -> String {
    clip(&v.to_string())
}

fn clip(s: &str) -> String {
    s.chars().take(600).collect()
}

fn mcp_call(name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": name, "arguments": args}})
}

/// The text of a successful MCP tool result.
fn mcp_text(v: &Value) -> Result<&str, Error> {
    if v.get("error").is_some() || v["result"]["isError"] == Value::Bool(true) {
        return Err(Error::Answer(format!("call failed: {}", short(v))));
    }
    v["result"]["content"][0]["text"]
        .as_str()
        .ok_or_else(|| Error::Answer(format!("no text in {}", short(v))))
}

/// A read request for `rel` on `door`.
fn read_req(door: Door, root: &Path, rel: &str) -> Value {
    let abs = root.join(rel).to_string_lossy().into_owned();
    match door {
        Door::Mcp => mcp_call("read_text_file", json!({ "path": abs })),
        Door::Acp => json!({"jsonrpc": "2.0", "method": "fs/read_text_file",
            "params": {"sessionId": "bench", "path": abs}}),
        Door::Ws => json!({"channel": "files", "type": "read", "path": format!("/{rel}")}),
    }
}

/// The content a read answer carries (the same checks as on a `Value`: an MCP answer
/// with `error` or `isError: true` fails, and the first content block's text counts).
fn read_content(door: Door, answer: &str) -> Result<Cow<'_, str>, Error> {
    let parsed = match door {
        Door::Mcp => serde_json::from_str::<McpRead>(answer).map(|a| match a {
            McpRead {
                error: None,
                result: Some(r),
            } if r.is_error != Some(true) => r.content.into_iter().next().and_then(|b| b.text),
            _ => None,
        }),
        Door::Acp => {
            serde_json::from_str::<AcpRead>(answer).map(|a| a.result.and_then(|r| r.content))
        }
        Door::Ws => serde_json::from_str::<WsRead>(answer).map(|a| a.data.and_then(|d| d.content)),
    };
    match parsed {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(Error::Answer(format!("read failed: {}", clip(answer)))),
        Err(e) => Err(Error::Answer(format!(
            "not a read answer ({e}): {}",
            clip(answer)
        ))),
    }
}

/// What a read check looks at in an MCP answer.
#[derive(Deserialize)]
struct McpRead<'a> {
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(borrow, default)]
    result: Option<McpResult<'a>>,
}

#[derive(Deserialize)]
struct McpResult<'a> {
    #[serde(borrow, default)]
    content: Vec<TextBlock<'a>>,
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct TextBlock<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

/// What a read check looks at in an ACP answer (`result.content`).
#[derive(Deserialize)]
struct AcpRead<'a> {
    #[serde(borrow, default)]
    result: Option<Content<'a>>,
}

/// What a read check looks at in a WebSocket answer (`data.content`).
#[derive(Deserialize)]
struct WsRead<'a> {
    #[serde(borrow, default)]
    data: Option<Content<'a>>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
}

/// `read_seq` / `read_pipe` and the ACP and WebSocket variants: 4 KiB files in turn.
pub async fn read_small(srv: &Server, cx: &Ctx<'_>, n: usize, k: usize) -> Result<Run, Error> {
    let files = (0..cx.sz.small_files)
        .map(|i| (format!("files/f{i}.txt"), tree::small(i)))
        .collect();
    let op = ReadOp {
        door: srv.door,
        root: cx.root,
        files,
    };
    drive(srv, n, k, &op).await
}

/// `read_big`: the 10 MiB file, whole.
pub async fn read_big(srv: &Server, cx: &Ctx<'_>, n: usize) -> Result<Run, Error> {
    let op = ReadOp {
        door: srv.door,
        root: cx.root,
        files: vec![("big.txt".to_string(), tree::big(cx.sz))],
    };
    drive(srv, n, 1, &op).await
}

fn write_content(rep: usize, i: usize, salt: u64) -> String {
    tree::text(salt + (rep as u64) * 10_000_000 + i as u64, tree::SMALL)
}

/// Work the driver times between the chunks of a write workload: the floor it is set
/// against, so that fsgate and its floor see the same minutes of the disk. It is called
/// once beside each chunk (in the order `steps` gives) with the number of writes the
/// chunk makes.
pub type Between<'a> = &'a mut dyn FnMut(usize) -> Result<(), Error>;

/// Into how many chunks a write workload with a floor [`Between`] its chunks is cut:
/// one at a time, 10 (of 100 writes in a full run); with `k` in flight, 4, so that a
/// chunk's start and end, with fewer in flight, weigh little.
pub fn chunks(k: usize) -> usize {
    if k > 1 { 4 } else { 10 }
}

/// `write_file` of op `i`'s content to `rel(i)`, `k` in flight, then (untimed) every
/// file checked on disk; with `between`, in chunks with the floor's beside them.
async fn writes(
    srv: &Server,
    cx: &Ctx<'_>,
    (n, k): (usize, usize),
    rel: &dyn Fn(usize) -> String,
    salt: u64,
    between: Option<Between<'_>>,
) -> Result<Run, Error> {
    let op = FnOp(
        |i| {
            let abs = cx.root.join(rel(i)).to_string_lossy().into_owned();
            mcp_call(
                "write_file",
                json!({"path": abs, "content": write_content(cx.rep, i, salt)}),
            )
        },
        |_, v: &Value| mcp_text(v).map(|_| ()),
    );
    let syncs = SyncCount::start(srv.pid);
    let run = match between {
        None => drive(srv, n, k, &op).await,
        Some(between) => chunked(srv, n, k, &op, between).await,
    };
    let syncs = syncs.and_then(SyncCount::stop);
    let mut run = run?;
    run.syncs = syncs;
    for i in 0..n {
        let p = cx.root.join(rel(i));
        let got = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
        if got != write_content(cx.rep, i, salt) {
            return Err(Error::Answer(format!(
                "{}: not the bytes written",
                p.display()
            )));
        }
    }
    Ok(run)
}

/// Ops `0..n` cut into `m` ranges in order, as even as can be.
fn chunk_ranges(n: usize, m: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let m = m.max(1);
    (0..m).map(move |c| n * c / m..n * (c + 1) / m)
}

/// One step of a write workload timed with its floor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// This many writes of the floor.
    Floor(usize),
    /// fsgate's ops with these numbers.
    Fsgate(std::ops::Range<usize>),
}

/// The steps of `n` ops `k` in flight with a floor: [`chunks`] chunks, each with as
/// many of the floor's writes beside it, the floor first in every other pair (floor,
/// fsgate, fsgate, floor, ...): whatever one side leaves running after its chunk (a
/// server's refills, the disk's writeback) lands on both sides' clocks alike.
fn steps(n: usize, k: usize) -> Vec<Step> {
    let mut out = Vec::new();
    for (c, ops) in chunk_ranges(n, chunks(k)).enumerate() {
        let floor = Step::Floor(ops.len());
        let fsgate = Step::Fsgate(ops);
        match c % 2 {
            0 => out.extend([floor, fsgate]),
            _ => out.extend([fsgate, floor]),
        }
    }
    out
}

/// `n` ops in [`steps`], with the floor's chunks run by `between`; fsgate's chunks as
/// one run: their latencies, their summed time and the driver's CPU over them; the
/// server's CPU over the whole (its work while the floor runs is its own).
async fn chunked(
    srv: &Server,
    n: usize,
    k: usize,
    op: &dyn Op,
    between: Between<'_>,
) -> Result<Run, Error> {
    let cpu0 = cpu_ticks(srv.pid)?;
    let mut all = Run {
        lat: Vec::with_capacity(n),
        wall: Duration::ZERO,
        cpu_s: None,
        hwm_kib: None,
        driver_cpu_s: Some(0.0),
        syncs: None,
    };
    for step in steps(n, k) {
        let ops = match step {
            Step::Floor(count) => {
                between(count)?;
                continue;
            }
            Step::Fsgate(ops) => ops,
        };
        let run = drive_range(srv, ops, k, op).await?;
        all.lat.extend(run.lat);
        all.wall += run.wall;
        all.driver_cpu_s = all.driver_cpu_s.zip(run.driver_cpu_s).map(|(a, b)| a + b);
        all.hwm_kib = run.hwm_kib;
    }
    let cpu1 = cpu_ticks(srv.pid)?;
    all.cpu_s = Some((cpu1 - cpu0) as f64 / ticks_per_sec());
    Ok(all)
}

/// `write_new` (`k` = 32) and `write_new_serial` (1): 4 KiB to files that do not exist
/// yet, `k` in flight.
pub async fn write_new(
    srv: &Server,
    cx: &Ctx<'_>,
    (n, k): (usize, usize),
    between: Option<Between<'_>>,
) -> Result<Run, Error> {
    let dir = format!("new/k{k}-r{}", cx.rep);
    let d = cx.root.join(&dir);
    std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    let rel = |i| format!("{dir}/w{i}.txt");
    writes(srv, cx, (n, k), &rel, 20_000_000, between).await
}

/// `overwrite` (`k` = 32) and `overwrite_serial` (1): 4 KiB over files that exist (each
/// op its own file), `k` in flight.
pub async fn overwrite(
    srv: &Server,
    cx: &Ctx<'_>,
    (n, k): (usize, usize),
    between: Option<Between<'_>>,
) -> Result<Run, Error> {
    let dir = format!("over/k{k}-r{}", cx.rep);
    let d = cx.root.join(&dir);
    std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    for i in 0..n {
        let p = d.join(format!("o{i}.txt"));
        std::fs::write(&p, write_content(cx.rep, i, 30_000_000)).map_err(|e| Error::io(&p, e))?;
    }
    // The files on disk before the clock starts, as the floor's are: not written back
    // during the server's syncs.
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    let rel = |i| format!("{dir}/o{i}.txt");
    writes(srv, cx, (n, k), &rel, 40_000_000, between).await
}

/// `perf stat` counting a server's `fsync` and `fdatasync` calls (all its threads, and
/// those it starts later) while a workload runs: the syncs per operation, a figure the
/// machine's noise does not move. None where `perf` is missing or may not trace.
pub struct SyncCount {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl SyncCount {
    /// Starts counting the syscalls of process `pid`.
    pub fn start(pid: u32) -> Option<SyncCount> {
        let out = std::env::temp_dir().join(format!("fsgate-bench-syncs-{pid}.txt"));
        let child = std::process::Command::new("perf")
            .args(["stat", "-x,", "-e"])
            .arg("syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync")
            .arg("-p")
            .arg(pid.to_string())
            .arg("-o")
            .arg(&out)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        // perf prints nothing once attached: give it the time it takes here (~50 ms).
        std::thread::sleep(Duration::from_millis(300));
        Some(SyncCount { child, out })
    }

    /// Stops counting; the calls counted.
    pub fn stop(mut self) -> Option<u64> {
        let pid = libc::pid_t::try_from(self.child.id()).ok()?;
        // SAFETY: kill(2) of our own child; SIGINT makes perf print its counts.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).ok()?;
        let _ = std::fs::remove_file(&self.out);
        let counts: Vec<u64> = text
            .lines()
            .filter(|l| l.contains("sys_enter_f"))
            .map(|l| l.split(',').next().and_then(|c| c.trim().parse().ok()))
            .collect::<Option<Vec<u64>>>()?;
        (counts.len() == 2).then(|| counts.iter().sum())
    }
}

/// `stat`: `get_file_info` of the 4 KiB files in turn.
pub async fn stat(srv: &Server, cx: &Ctx<'_>, n: usize) -> Result<Run, Error> {
    let nf = cx.sz.small_files;
    let op = FnOp(
        |i| {
            let abs = cx.root.join(format!("files/f{}.txt", i % nf));
            mcp_call("get_file_info", json!({"path": abs.to_string_lossy()}))
        },
        |_, v: &Value| {
            let t = mcp_text(v)?;
            let size = format!("size: {}", tree::SMALL);
            if !t.lines().any(|l| l == size) || !t.lines().any(|l| l == "isFile: true") {
                return Err(Error::Answer(format!("get_file_info: {}", short(v))));
            }
            Ok(())
        },
    );
    drive(srv, n, 1, &op).await
}

/// `list`: `list_directory` of the 1,000-entry directory; every name must be there.
pub async fn list(srv: &Server, cx: &Ctx<'_>, n: usize) -> Result<Run, Error> {
    let want: BTreeSet<String> = (0..cx.sz.list_entries)
        .map(|i| format!("[FILE] entry-{i:05}.txt"))
        .collect();
    let abs = cx.root.join("list").to_string_lossy().into_owned();
    let op = FnOp(
        |_| mcp_call("list_directory", json!({ "path": abs })),
        |_, v: &Value| {
            let got: BTreeSet<String> = mcp_text(v)?.lines().map(str::to_string).collect();
            if got != want {
                return Err(Error::Answer(format!(
                    "list_directory: {} lines, not the {} names",
                    got.len(),
                    want.len()
                )));
            }
            Ok(())
        },
    );
    drive(srv, n, 1, &op).await
}

/// Files and directories in a `directory_tree` answer.
fn count_tree(nodes: &Value, files: &mut usize, dirs: &mut usize) -> Result<(), Error> {
    let list = nodes
        .as_array()
        .ok_or_else(|| Error::Answer("directory_tree: not an array".into()))?;
    for n in list {
        match n["type"].as_str() {
            Some("file") => *files += 1,
            Some("directory") => {
                *dirs += 1;
                count_tree(&n["children"], files, dirs)?;
            }
            _ => return Err(Error::Answer(format!("directory_tree node {}", short(n)))),
        }
    }
    Ok(())
}

/// `tree`: `directory_tree` of the 10,000-file tree; every file and directory counted.
pub async fn dir_tree(srv: &Server, cx: &Ctx<'_>, n: usize) -> Result<Run, Error> {
    let abs = cx.root.join("tree").to_string_lossy().into_owned();
    let (want_d, want_f) = (cx.sz.tree_dirs, cx.sz.tree_dirs * cx.sz.tree_files_per_dir);
    let op = FnOp(
        |_| mcp_call("directory_tree", json!({ "path": abs })),
        |_, v: &Value| {
            let tree: Value = serde_json::from_str(mcp_text(v)?)
                .map_err(|e| Error::Answer(format!("directory_tree: not JSON: {e}")))?;
            let (mut f, mut d) = (0, 0);
            count_tree(&tree, &mut f, &mut d)?;
            if (f, d) != (want_f, want_d) {
                return Err(Error::Answer(format!(
                    "directory_tree: {f} files and {d} dirs, want {want_f} and {want_d}"
                )));
            }
            Ok(())
        },
    );
    drive(srv, n, 1, &op).await
}

/// The (workspace-relative path, line) of each match in a `grep` answer.
fn grep_hits(root: &Path, v: &Value) -> Result<BTreeSet<(String, u64)>, Error> {
    let text = mcp_text(v)?;
    let parsed;
    let body = match v["result"].get("structuredContent") {
        Some(s) => s,
        None => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| Error::Answer(format!("grep: not JSON: {e}")))?;
            &parsed
        }
    };
    if body.get("truncated").is_some() {
        return Err(Error::Answer("grep: answer truncated".into()));
    }
    let prefix = format!("{}/", root.display());
    let mut out = BTreeSet::new();
    for m in body["matches"].as_array().into_iter().flatten() {
        let (Some(p), Some(l)) = (m["path"].as_str(), m["lineNumber"].as_u64()) else {
            return Err(Error::Answer(format!("grep match {}", short(m))));
        };
        out.insert((p.strip_prefix(&prefix).unwrap_or(p).to_string(), l));
    }
    Ok(out)
}

/// `search_literal` / `search_regex`: fsgate's `grep` over the tree.
pub async fn search(srv: &Server, cx: &Ctx<'_>, n: usize, literal: bool) -> Result<Run, Error> {
    let want = tree::expected_matches(cx.sz, literal);
    let pattern = if literal { tree::LITERAL } else { tree::REGEX };
    let abs = cx.root.join("tree").to_string_lossy().into_owned();
    let op = FnOp(
        |_| {
            mcp_call(
                "grep",
                json!({"pattern": pattern, "path": abs, "maxResults": 100_000}),
            )
        },
        |_, v: &Value| {
            let got = grep_hits(cx.root, v)?;
            if got != want {
                return Err(Error::Answer(format!(
                    "grep {pattern}: {} matches, want {}",
                    got.len(),
                    want.len()
                )));
            }
            Ok(())
        },
    );
    drive(srv, n, 1, &op).await
}

/// `rg` on the same tree with the same pattern, run `n` times; each run's matches must
/// be the expected ones. CPU from the children's rusage.
pub fn rg(rg: &Path, cx: &Ctx<'_>, n: usize, literal: bool) -> Result<Run, Error> {
    let want = tree::expected_matches(cx.sz, literal);
    let pattern = if literal { tree::LITERAL } else { tree::REGEX };
    let cpu0 = rusage_cpu(libc::RUSAGE_CHILDREN);
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = std::process::Command::new(rg)
            .args([
                "--no-config",
                "--no-heading",
                "--with-filename",
                "-n",
                "-e",
                pattern,
                "tree",
            ])
            .current_dir(cx.root)
            .output()
            .map_err(|e| Error::io(rg, e))?;
        lat.push(t.elapsed());
        let text = String::from_utf8_lossy(&out.stdout);
        let got: BTreeSet<(String, u64)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ':');
                Some((it.next()?.to_string(), it.next()?.parse().ok()?))
            })
            .collect();
        if !out.status.success() || got != want {
            return Err(Error::Answer(format!(
                "rg {pattern}: {} matches, want {} ({})",
                got.len(),
                want.len(),
                out.status
            )));
        }
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

/// CPU seconds (user + system) of `who`: `RUSAGE_SELF` (the driver, all its threads),
/// `RUSAGE_CHILDREN` (its waited-for children) or `RUSAGE_THREAD` (the calling thread).
pub fn rusage_cpu(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunks of a write workload cover its ops once each, in order, and differ in
    /// size by one at most.
    #[test]
    fn chunks_cover_every_op_once_in_order() {
        for (n, m) in [
            (1000, 10),
            (2000, 4),
            (20, 10),
            (40, 4),
            (7, 10),
            (0, 4),
            (5, 0),
        ] {
            let got: Vec<_> = chunk_ranges(n, m).collect();
            assert_eq!(got.len(), m.max(1));
            let ops: Vec<usize> = got.iter().cloned().flatten().collect();
            assert_eq!(ops, (0..n).collect::<Vec<_>>(), "{n} in {m}");
            let (lo, hi) = got
                .iter()
                .map(|r| r.len())
                .fold((n, 0), |(a, b), l| (a.min(l), b.max(l)));
            assert!(hi - lo <= 1, "{n} in {m}: {got:?}");
        }
        assert_eq!((chunks(1), chunks(32)), (10, 4));
    }

    /// With a floor, every op runs once in order, the floor makes as many writes as
    /// fsgate's chunk beside it, and the floor goes first in every other pair.
    #[test]
    fn steps_pair_each_chunk_with_as_many_floor_writes_in_turn() {
        for (n, k) in [(1000, 1), (2000, 32), (20, 1), (40, 32), (3, 1)] {
            let got = steps(n, k);
            assert_eq!(got.len(), 2 * chunks(k), "{n}/{k}");
            let mut ops = Vec::new();
            for (c, pair) in got.chunks(2).enumerate() {
                let (floor, fsgate) = match (c % 2, &pair[0], &pair[1]) {
                    (0, Step::Floor(f), Step::Fsgate(r)) => (*f, r.clone()),
                    (1, Step::Fsgate(r), Step::Floor(f)) => (*f, r.clone()),
                    _ => panic!("{n}/{k}: pair {c} out of turn: {pair:?}"),
                };
                assert_eq!(floor, fsgate.len(), "{n}/{k}: pair {c}");
                ops.extend(fsgate);
            }
            assert_eq!(ops, (0..n).collect::<Vec<_>>(), "{n}/{k}");
        }
    }
}
