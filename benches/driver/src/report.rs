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
    /// What the write workloads (and their floors) ran on: each on a filesystem of its
    /// own, or why not.
    pub write_fs: String,
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
            write_fs: String::new(),
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
        if !self.write_fs.is_empty() {
            let c = self.chain;
            let floors = c.bare_new_us > 0.0 || c.bare_overwrite_us > 0.0;
            let interleaved = match floors || c.bare_overwrite_32_ops > 0.0 {
                true => format!(
                    " Each floor fsgate is set against is timed in chunks between fsgate's own ({} chunks one at a time, {} with 32 in flight), so that both see the same minutes of the disk.",
                    crate::workloads::chunks(1),
                    crate::workloads::chunks(32)
                ),
                false => String::new(),
            };
            let _ = writeln!(
                s,
                "Write workloads, their floors and the bare calls: {}.{interleaved}\n",
                self.write_fs,
            );
        }
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
    // Issue 57 retired the three durable-write targets against the reference and the
    // `fdatasync` p50 (bound by this disk): `floor_targets` holds what replaced them.
    for (w, goal) in [("list", 2.0), ("tree", 3.0), ("read_big", 3.0)] {
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
    floor_targets(r, &mut t);
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

/// How much slower than its floor fsgate may be, for each write target.
pub const FLOOR_GOAL: f64 = 1.25;

/// Issue 57's write targets: fsgate against its own floor, measured in the same run on
/// a filesystem of its own (the same system calls with no server, [`crate::floor`]).
/// The p50 of a write one at a time over the floor's, and the bare calls' rate with 32
/// in flight over fsgate's. A floor slower than fsgate bounds nothing: the row then has
/// no figure and says so.
fn floor_targets(r: &Report, t: &mut Vec<Target>) {
    let c = r.chain;
    let p50_us = |w: &str, s: &str| r.get(w, s).and_then(|f| f.p50_ms).map(|ms| ms * 1e3);
    for (w, floor) in [
        ("write_new_serial", c.bare_new_us),
        ("overwrite_serial", c.bare_overwrite_us),
    ] {
        let fsgate = p50_us(w, "fsgate");
        let context = serial_context(r, fsgate, p50_us(w, "mcpfs"));
        t.push(floor_row(
            format!("{w} p50 / its floor's"),
            fsgate,
            (floor > 0.0).then_some(floor),
            |us| format!("{:.3} ms", us / 1e3),
            context,
        ));
    }
    let ops = r.get("overwrite", "fsgate").and_then(|f| f.ops_per_s);
    let bare = (c.bare_overwrite_32_ops > 0.0).then_some(c.bare_overwrite_32_ops);
    // Time per overwrite, so that more than 1 is slower than the floor here too.
    let per = |x: Option<f64>| x.filter(|v| *v > 0.0).map(|v| 1e6 / v);
    t.push(floor_row(
        "overwrite, 32 in flight: bare calls' ops/s / fsgate's".into(),
        per(ops),
        per(bare),
        |us| format!("{:.0}/s", 1e6 / us),
        in_flight_context(r, ops),
    ));
}

/// A row comparing `fsgate` with its `floor` (times, µs; shown with `show`).
fn floor_row(
    name: String,
    fsgate: Option<f64>,
    floor: Option<f64>,
    show: impl Fn(f64) -> String,
    context: String,
) -> Target {
    let ratio = match (fsgate, floor) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let figures = format!(
        "fsgate {}, floor {}",
        fsgate.map_or("-".into(), &show),
        floor.map_or("-".into(), &show)
    );
    let not_a_floor = ratio.is_some_and(|x| x < 1.0);
    let limit = match not_a_floor {
        true => {
            format!("NOT A FLOOR: the bare calls were slower than fsgate ({figures}); {context}")
        }
        false => format!("{figures}; {context}"),
    };
    Target {
        name,
        measured: ratio.map_or("-".into(), |x| format!("{x:.2}x")),
        goal: format!("<= {FLOOR_GOAL:.2}x"),
        met: ratio
            .filter(|_| !not_a_floor) // Rounding of the times' quotient: 1.25x shown is met.
            .map(|x| x <= FLOOR_GOAL + 1e-9),
        limit: Some(limit),
    }
}

/// Beside a one-at-a-time write: the disk's `fdatasync` (context, no longer a target),
/// the reference's p50, and what a request's round trip through pipes costs.
fn serial_context(r: &Report, fsgate_us: Option<f64>, reference_us: Option<f64>) -> String {
    let sync = r.fdatasync_p50_us;
    let mut out = match fsgate_us {
        Some(us) if sync > 0.0 => format!("fsgate {:.2}x the `fdatasync` p50", us / sync),
        _ => "no `fdatasync` figure".into(),
    };
    if let Some(us) = reference_us {
        out += &format!("; the reference {:.3} ms", us / 1e3);
    }
    if r.chain.echo_rtt_us > 0.0 {
        out += &format!(
            "; a request's round trip through pipes to a process that only echoes it: {:.0} us",
            r.chain.echo_rtt_us
        );
    }
    out
}

/// Beside the overwrites with 32 in flight: the reference's rate, and the bare calls'
/// other kinds (the durable replace alone, backups in one shared file).
fn in_flight_context(r: &Report, fsgate_ops: Option<f64>) -> String {
    let c = r.chain;
    let mut out = String::from(
        "bare calls: two records, a backup in its shard, the content, the rename, their syncs; the log's and the directory's syncs shared; 32 threads, no server",
    );
    if let (Some(reference), Some(ops)) = (
        r.get("overwrite", "mcpfs").and_then(|f| f.ops_per_s),
        fsgate_ops,
    ) && reference > 0.0
    {
        out += &format!(
            "; the reference {reference:.0}/s (fsgate {:.2}x it)",
            ops / reference
        );
    }
    if c.bare_replace_32_ops > 0.0 {
        out += &format!(
            "; the durable replace alone (no backup, no records): {:.0}/s",
            c.bare_replace_32_ops
        );
    }
    if c.bare_shared_backups_32_ops > 0.0 {
        out += &format!(
            "; every backup appended to one file, its syncs shared: {:.0}/s",
            c.bare_shared_backups_32_ops
        );
    }
    out
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
