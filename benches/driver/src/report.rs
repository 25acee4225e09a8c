//! Figures, medians, the targets, and the table / JSON / Markdown of a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::suite::{ChainProbe, Config, SyncProbe};
use crate::tree::Sizes;
use crate::workloads::Run;

/// One workload on one server (one repetition, or the medians).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// Requests per second (`None` where it means nothing: startup, idle).
    pub ops_per_s: Option<f64>,
    /// Median latency, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency, ms.
    pub p99_ms: Option<f64>,
    /// Server CPU (utime + stime) per request, µs.
    pub cpu_us_per_op: Option<f64>,
    /// Server peak RSS (VmHWM), MiB; for `idle_rss`, VmRSS.
    pub rss_mib: Option<f64>,
    /// The driver's own CPU per request, µs (it shares the cores with the server).
    pub driver_cpu_us_per_op: Option<f64>,
    /// The server's `fsync` + `fdatasync` calls per request (write workloads, where
    /// `perf` may count them).
    pub syncs_per_op: Option<f64>,
}

fn pct(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    pct(&v, 0.5)
}

impl Figures {
    /// The figures of one timed run.
    pub fn from_run(r: &Run) -> Figures {
        let mut ms: Vec<f64> = r.lat.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let n = r.lat.len() as f64;
        let wall = r.wall.as_secs_f64();
        Figures {
            ops_per_s: (wall > 0.0).then(|| n / wall),
            p50_ms: pct(&ms, 0.5),
            p99_ms: pct(&ms, 0.99),
            cpu_us_per_op: r.cpu_s.filter(|_| n > 0.0).map(|c| c * 1e6 / n),
            rss_mib: r.hwm_kib.map(|k| k as f64 / 1024.0),
            driver_cpu_us_per_op: r.driver_cpu_s.filter(|_| n > 0.0).map(|c| c * 1e6 / n),
            syncs_per_op: r.syncs.filter(|_| n > 0.0).map(|c| c as f64 / n),
        }
    }

    /// Startup: latencies only.
    pub fn startup_only(mut self) -> Figures {
        self.ops_per_s = None;
        self
    }

    /// Idle memory: VmRSS only.
    pub fn rss_only(kib: u64) -> Figures {
        Figures {
            rss_mib: Some(kib as f64 / 1024.0),
            ..Figures::default()
        }
    }

    /// One line for the progress log.
    pub fn brief(&self) -> String {
        format!(
            "{} ops/s, p50 {} ms, p99 {} ms, cpu {} us/op, rss {} MiB, syncs {}/op",
            num(self.ops_per_s, 0),
            num(self.p50_ms, 3),
            num(self.p99_ms, 3),
            num(self.cpu_us_per_op, 1),
            num(self.rss_mib, 1),
            num(self.syncs_per_op, 2)
        )
    }

    fn medians(all: &[Figures]) -> Figures {
        let m = |f: fn(&Figures) -> Option<f64>| median(all.iter().filter_map(f).collect());
        Figures {
            ops_per_s: m(|f| f.ops_per_s),
            p50_ms: m(|f| f.p50_ms),
            p99_ms: m(|f| f.p99_ms),
            cpu_us_per_op: m(|f| f.cpu_us_per_op),
            rss_mib: m(|f| f.rss_mib),
            driver_cpu_us_per_op: m(|f| f.driver_cpu_us_per_op),
            syncs_per_op: m(|f| f.syncs_per_op),
        }
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// One target: what was measured against what was asked.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// The measured value, as text.
    pub measured: String,
    /// The goal, as text.
    pub goal: String,
    /// `None` when a figure is missing (a failed workload, no reference).
    pub met: Option<bool>,
    /// What this machine allows, measured in the same run, where a floor of the
    /// machine (a sync per answer, the driver's own CPU) bounds the figure.
    pub limit: Option<String>,
}

/// Medians of a run, with the failures and targets.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// UTC date and time of the report.
    pub date: String,
    /// `nproc` of the machine.
    pub nproc: usize,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// The command that ran.
    pub command: String,
    /// Repetitions.
    pub reps: usize,
    /// Quick mode (tiny counts: not figures to compare).
    pub quick: bool,
    /// p50 of 4 KiB write + fdatasync on the runs' disk, µs (median over repetitions).
    pub fdatasync_p50_us: f64,
    /// The same with 400-byte appends (about one audit record), µs.
    pub fdatasync_record_p50_us: f64,
    /// Mean time of one 400-byte append + fdatasync, µs.
    pub fdatasync_record_mean_us: f64,
    /// CPU of one 400-byte append + fdatasync (the probing thread's), µs.
    pub fdatasync_record_cpu_us: f64,
    /// The p50 of a durable write's other syncs (content, backup, directory), µs.
    pub chain: ChainProbe,
    /// The tree's sizes.
    pub sizes: Sizes,
    /// (workload, server) -> medians.
    pub figures: Vec<(String, String, Figures)>,
    /// Every failed workload run.
    pub failures: Vec<String>,
    /// The targets.
    pub targets: Vec<Target>,
}

impl Report {
    /// Medians and targets of the runs.
    pub fn new(
        cfg: &Config,
        (syncs, chain): ([SyncProbe; 2], ChainProbe),
        runs: BTreeMap<(String, String), Vec<Figures>>,
        failures: Vec<String>,
        sz: &Sizes,
    ) -> Report {
        let figures: Vec<(String, String, Figures)> = order(runs)
            .into_iter()
            .map(|((w, s), all)| (w, s, Figures::medians(&all)))
            .collect();
        let mut r = Report {
            date: utc_now(),
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: cpu_model(),
            command: cfg.command.clone(),
            reps: cfg.reps,
            quick: cfg.quick,
            fdatasync_p50_us: syncs[0].p50_us,
            fdatasync_record_p50_us: syncs[1].p50_us,
            fdatasync_record_mean_us: syncs[1].mean_us,
            fdatasync_record_cpu_us: syncs[1].cpu_us,
            chain,
            sizes: sz.clone(),
            figures,
            failures,
            targets: Vec::new(),
        };
        r.targets = crate::report::targets(&r);
        r
    }

    /// The medians of `w` on `server`.
    pub fn get(&self, w: &str, server: &str) -> Option<&Figures> {
        self.figures
            .iter()
            .find(|(a, b, _)| a == w && b == server)
            .map(|(_, _, f)| f)
    }

    /// True if every workload ran and every answer checked.
    pub fn all_ran(&self) -> bool {
        self.failures.is_empty()
    }

    /// The figures and targets as Markdown tables (also the terminal output).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## Latest run\n");
        let _ = writeln!(
            s,
            "{} UTC; `nproc` {}; CPU {}; {} repetition(s), medians{}; `fdatasync` p50 of this disk: {:.0} us (4 KiB append + `fdatasync`, space reserved ahead as the audit log does, 1,000 times, measured by the driver just before `read_seq` in each repetition, same disk; median of the repetitions; with 400-byte appends, about one audit record: p50 {:.0} us, mean {:.0} us, {:.0} us of CPU each).\n",
            self.date,
            self.nproc,
            self.cpu_model,
            self.reps,
            if self.quick {
                " (QUICK mode: tiny counts, not figures)"
            } else {
                ""
            },
            self.fdatasync_p50_us,
            self.fdatasync_record_p50_us,
            self.fdatasync_record_mean_us,
            self.fdatasync_record_cpu_us
        );
        let _ = writeln!(s, "Command: `{}`\n", self.command);
        let _ = writeln!(
            s,
            "| workload | server | ops/s | p50 ms | p99 ms | server CPU us/op | peak RSS MiB | driver CPU us/op | syncs/op |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        for (w, srv, f) in &self.figures {
            let _ = writeln!(
                s,
                "| {w} | {srv} | {} | {} | {} | {} | {} | {} | {} |",
                num(f.ops_per_s, 0),
                num(f.p50_ms, 3),
                num(f.p99_ms, 3),
                num(f.cpu_us_per_op, 1),
                num(f.rss_mib, 1),
                num(f.driver_cpu_us_per_op, 1),
                num(f.syncs_per_op, 2)
            );
        }
        let _ = writeln!(
            s,
            "\n| target | measured | goal | met | what this machine allows (same run) |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|");
        for t in &self.targets {
            let met = match t.met {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "no figure",
            };
            let limit = t.limit.as_deref().unwrap_or("");
            let _ = writeln!(
                s,
                "| {} | {} | {} | {met} | {limit} |",
                t.name, t.measured, t.goal
            );
        }
        if !self.failures.is_empty() {
            let _ = writeln!(s, "\nFailed (no figures taken from these runs):\n");
            for f in &self.failures {
                let _ = writeln!(s, "- {f}");
            }
        }
        s
    }
}

/// Runs in the suite's workload order, not alphabetical.
fn order(runs: BTreeMap<(String, String), Vec<Figures>>) -> Vec<((String, String), Vec<Figures>)> {
    const ORDER: [&str; 18] = [
        "startup",
        "idle_rss",
        "read_seq",
        "read_pipe",
        "write_new",
        "overwrite",
        "write_new_serial",
        "overwrite_serial",
        "stat",
        "list",
        "tree",
        "read_big",
        "search_literal",
        "search_regex",
        "acp_read_seq",
        "acp_read_pipe",
        "ws_read_seq",
        "ws_read_pipe",
    ];
    let mut v: Vec<_> = runs.into_iter().collect();
    v.sort_by_key(|((w, s), _)| {
        let i = ORDER.iter().position(|o| o == w).unwrap_or(ORDER.len());
        (i, w.clone(), s != "mcpfs", s.clone())
    });
    v
}

/// Builds the target rows from the medians.
fn targets(r: &Report) -> Vec<Target> {
    let mut t = Vec::new();
    let ops = |w: &str, s: &str| r.get(w, s).and_then(|f| f.ops_per_s);
    let p50 = |w: &str, s: &str| r.get(w, s).and_then(|f| f.p50_ms);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut at_least = |name: &str, v: Option<f64>, goal: f64, unit: &str| {
        t.push(Target {
            name: name.into(),
            measured: v.map_or("-".into(), |x| format!("{x:.2}{unit}")),
            goal: format!(">= {goal}{unit}"),
            met: v.map(|x| x >= goal),
            limit: None,
        });
    };
    // Issue 34 retired issue 12's 8x for CPU per read and for pipelined reads, and 3x
    // for `stat` one at a time (each bound by the disk's sync, not the server): the
    // 3x pipelined reads already met must stay met.
    at_least(
        "read_pipe ops/s",
        ratio(ops("read_pipe", "fsgate"), ops("read_pipe", "mcpfs")),
        3.0,
        "x",
    );
    at_least(
        "read_seq ops/s, fsync=batch",
        ratio(
            ops("read_seq", "fsgate fsync=batch"),
            ops("read_seq", "mcpfs"),
        ),
        5.0,
        "x",
    );
    for (w, goal) in [
        ("overwrite", 2.0),
        ("list", 2.0),
        ("tree", 3.0),
        ("read_big", 3.0),
    ] {
        at_least(
            &format!("{w} ops/s"),
            ratio(ops(w, "fsgate"), ops(w, "mcpfs")),
            goal,
            "x",
        );
    }
    for (a, b) in [("acp_read_seq", "read_seq"), ("acp_read_pipe", "read_pipe")] {
        at_least(
            &format!("{a} / MCP {b} ops/s"),
            ratio(ops(a, "fsgate acp"), ops(b, "fsgate")),
            0.8,
            "x",
        );
    }
    for (a, b) in [("ws_read_seq", "read_seq"), ("ws_read_pipe", "read_pipe")] {
        at_least(
            &format!("{a} / MCP {b} ops/s"),
            ratio(ops(a, "fsgate ws"), ops(b, "fsgate")),
            0.8,
            "x",
        );
    }
    at_least(
        "startup p50: mcpfs / fsgate",
        ratio(p50("startup", "mcpfs"), p50("startup", "fsgate")),
        1.0,
        "x",
    );
    let mut at_most = |name: &str, v: Option<f64>, goal: f64, unit: &str| {
        t.push(Target {
            name: name.into(),
            measured: v.map_or("-".into(), |x| format!("{x:.2}{unit}")),
            goal: format!("<= {goal:.2}{unit}"),
            met: v.map(|x| x <= goal),
            limit: None,
        });
    };
    let fsync_ms = r.fdatasync_p50_us / 1e3;
    for (w, goal) in [("write_new_serial", 3.0), ("overwrite_serial", 4.0)] {
        at_most(
            &format!("{w} p50 / fdatasync p50"),
            ratio(p50(w, "fsgate"), Some(fsync_ms)),
            goal,
            "x",
        );
    }
    at_most(
        "read_seq p50 (fdatasync p50 + 0.06 ms)",
        p50("read_seq", "fsgate"),
        fsync_ms + 0.06,
        " ms",
    );
    for w in ["search_literal", "search_regex"] {
        at_most(
            &format!("{w} time / rg's"),
            ratio(p50(w, "fsgate"), p50(w, "rg")),
            1.5,
            "x",
        );
    }
    at_most("startup p50", p50("startup", "fsgate"), 20.0, " ms");
    let idle = r.get("idle_rss", "fsgate").and_then(|f| f.rss_mib);
    at_most("idle RSS", idle, 16.0, " MiB");
    let big_mib = r.sizes.big_bytes as f64 / (1024.0 * 1024.0);
    let peak = r.get("read_big", "fsgate").and_then(|f| f.rss_mib);
    at_most(
        "read_big peak RSS (idle + 4x the file)",
        peak,
        idle.unwrap_or(0.0) + 4.0 * big_mib,
        " MiB",
    );
    if idle.is_none()
        && let Some(last) = t.last_mut()
    {
        last.met = None;
    }
    add_limits(r, &mut t);
    mono_targets(r, &mut t);
    t
}

/// Issue 34's monorepo and wide-directory rows: time against `fd` / `rg` on the same
/// tree, peak RSS, and memory independent of a directory's size.
fn mono_targets(r: &Report, t: &mut Vec<Target>) {
    let p50 = |w: &str, s: &str| r.get(w, s).and_then(|f| f.p50_ms);
    let rss = |w: &str| r.get(w, "fsgate").and_then(|f| f.rss_mib);
    let row = |name: String, v: Option<f64>, goal: f64, unit: &str, limit: Option<String>| Target {
        name,
        measured: v.map_or("-".into(), |x| format!("{x:.2}{unit}")),
        goal: format!("<= {goal:.2}{unit}"),
        met: v.map(|x| x <= goal),
        limit,
    };
    for (w, tool) in [
        ("mono_tree", "fd"),
        ("mono_glob", "fd"),
        ("mono_grep", "rg"),
    ] {
        let ratio = match (p50(w, "fsgate"), p50(w, tool)) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let cores = format!("{tool} walks on all {} cores", r.nproc);
        t.push(row(
            format!("{w} time / {tool}'s"),
            ratio,
            1.5,
            "x",
            Some(cores),
        ));
        t.push(row(format!("{w} peak RSS"), rss(w), 128.0, " MiB", None));
    }
    t.push(row(
        "mono_tree_root peak RSS".into(),
        rss("mono_tree_root"),
        128.0,
        " MiB",
        None,
    ));
    // Four times the entries: the peak may not follow them (a page is bounded).
    let growth = match (rss("list_50k"), rss("list_200k")) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    t.push(row(
        "list_200k / list_50k peak RSS".into(),
        growth,
        1.1,
        "x",
        None,
    ));
}

/// Fills [`Target::limit`] where this machine, measured in the same run, bounds the
/// figure whatever the server does: a durable write one at a time waits for the syncs
/// that depend on each other.
fn add_limits(r: &Report, t: &mut [Target]) {
    let mut set = |prefix: &str, text: Option<String>| {
        if let Some(row) = t.iter_mut().find(|row| row.name.starts_with(prefix)) {
            row.limit = text;
        }
    };
    set("write_new_serial p50", chain_limit(r, false));
    set("overwrite_serial p50", chain_limit(r, true));
    set("overwrite ops/s", in_flight_limit(r));
}

/// The overwrites with 32 in flight done bare: their calls on 32 threads with no server
/// (its records' and directory's syncs shared, as fsgate's are), against the
/// reference's rate in the same run.
fn in_flight_limit(r: &Report) -> Option<String> {
    let c = r.chain;
    let reference = r.get("overwrite", "mcpfs")?.ops_per_s?;
    if c.bare_overwrite_32_ops <= 0.0 || reference <= 0.0 {
        return None;
    }
    let mut out = format!(
        "the same overwrites' bare system calls (two records, a backup in its shard, the content, the rename, their syncs; the log's and the directory's syncs shared), 32 threads, no server: {:.0}/s = {:.2}x the reference ({:.0} us of CPU each)",
        c.bare_overwrite_32_ops,
        c.bare_overwrite_32_ops / reference,
        c.bare_overwrite_32_cpu_us
    );
    if c.bare_replace_32_ops > 0.0 {
        out += &format!(
            "; the durable replace alone (the content synced, the rename, the directory synced; no backup, no records): {:.0}/s = {:.2}x",
            c.bare_replace_32_ops,
            c.bare_replace_32_ops / reference
        );
    }
    if c.bare_shared_backups_32_ops > 0.0 {
        out += &format!(
            "; fsgate's bare calls with every backup appended to one file, its syncs shared (no inode, no directory sync per backup): {:.0}/s = {:.2}x",
            c.bare_shared_backups_32_ops,
            c.bare_shared_backups_32_ops / reference
        );
    }
    Some(out)
}

/// The dependent syncs a durable write waits for, whatever the server: the intent record
/// (with, at once, the content and, over a file, the backup's file and directory), then
/// the outcome record (with, at once, the directory entry). Syncs at once may share the
/// disk's flush, so the floor counts the first step as one record's sync (the others,
/// timed apart, are shown beside it) and the second as the longer of the two. Then the whole write done bare in the same order
/// ([`crate::floor`]): the syncs with everything the kernel does around them (making the
/// new inode, the name, the rename), which the sum of the syncs leaves out.
fn chain_limit(r: &Report, backup: bool) -> Option<String> {
    let c = r.chain;
    let (rec, sync) = (r.fdatasync_record_p50_us, r.fdatasync_p50_us);
    if c.dir_us <= 0.0 || rec <= 0.0 || sync <= 0.0 {
        return None;
    }
    let floor = rec + rec.max(c.dir_us);
    let (bare, p, made) = if backup {
        (
            c.bare_overwrite_us,
            c.bare_overwrite_premade_us,
            "its two inodes",
        )
    } else {
        (c.bare_new_us, c.bare_new_premade_us, "its inode")
    };
    let premade = format!(
        " ({made} made ahead, off the write's path, as fsgate's spare files are: {:.3} ms = {:.2}x)",
        p / 1e3,
        p / sync
    );
    let beside = if backup {
        format!(
            "content {:.0} us, backup file {:.0} us and directory {:.0} us",
            c.content_us, c.new_file_us, c.dir_us
        )
    } else {
        format!("content {:.0} us", c.content_us)
    };
    // What any server on stdio adds before it does anything.
    let trip = match c.echo_rtt_us {
        t if t > 0.0 => format!(
            "; that, plus a request's round trip through pipes to a process that only echoes it ({t:.0} us): {:.3} ms = {:.2}x",
            (p + t) / 1e3,
            (p + t) / sync
        ),
        _ => String::new(),
    };
    Some(format!(
        "2 syncs one after another: the intent ({rec:.0} us; beside it, timed apart: {beside}), the outcome record ({rec:.0} us; beside it: the directory, {:.0} us): at least {:.3} ms = {:.2}x; the whole write's bare system calls in that order, no server: {:.3} ms = {:.2}x{premade}{trip}",
        c.dir_us,
        floor / 1e3,
        floor / sync,
        bare / 1e3,
        bare / sync
    ))
}

/// What 8x on `read_pipe` asks of the server's CPU, given the driver's own.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, v)| v.trim().to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) from the system clock.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
