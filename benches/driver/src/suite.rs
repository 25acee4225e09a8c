//! `fsgate-bench suite`: every workload on every server, repetitions alternating the
//! servers' order, medians.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Error;
use crate::floor::{self, Calls, InFlight, InFlightFloor, SerialFloor};
use crate::fresh_fs::{FreshFs, Kind};
use crate::mono::{self, Mono};
use crate::mono_work::{self, Expect};
use crate::report::{Figures, Report};
use crate::server::{self, Door, Server, Spec};
use crate::tree::{self, Sizes};
use crate::workloads::{self, Between, Ctx, Run, rusage_cpu};

/// The default policy, with the `[audit]` durability the batch target asks for.
const DEFAULT_POLICY: &str = include_str!("../../../policies/default.toml");

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `fsgate` binary.
    pub fsgate: PathBuf,
    /// `node` and the reference server's `dist/index.js`; `None` runs fsgate alone.
    pub reference: Option<(PathBuf, PathBuf)>,
    /// `rg`, for the search comparison; without it searches are checked, not compared.
    pub rg: Option<PathBuf>,
    /// A directory the driver may fill (trees, logs); created if missing.
    pub work: PathBuf,
    /// Repetitions (medians are taken across them).
    pub reps: usize,
    /// Tiny counts and trees: proves that everything runs and checks.
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
    /// Only these workloads (by name); empty: every workload.
    pub only: Vec<String>,
    /// A monorepo made by `gen-monorepo` with [`Mono::FULL`]'s counts, for the `mono_*`
    /// workloads; `None`: a small one is generated under `work`.
    pub monorepo: Option<PathBuf>,
    /// `fd`, for the monorepo comparison.
    pub fd: Option<PathBuf>,
}

/// Requests per workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Counts {
    startup: usize,
    read_seq: usize,
    read_pipe: usize,
    write: usize,
    write_serial: usize,
    stat: usize,
    list: usize,
    tree: usize,
    read_big: usize,
    search: usize,
    warmup: usize,
}

fn plan(quick: bool) -> (Sizes, Counts) {
    if quick {
        let sz = Sizes {
            small_files: 20,
            list_entries: 50,
            tree_dirs: 4,
            tree_files_per_dir: 10,
            tree_file_bytes: 2048,
            big_bytes: 256 * 1024,
        };
        let n = Counts {
            startup: 2,
            read_seq: 20,
            read_pipe: 64,
            write: 40,
            write_serial: 20,
            stat: 20,
            list: 3,
            tree: 2,
            read_big: 2,
            search: 2,
            warmup: 5,
        };
        return (sz, n);
    }
    let sz = Sizes {
        small_files: 2000,
        list_entries: 1000,
        tree_dirs: 100,
        tree_files_per_dir: 100,
        tree_file_bytes: 10_000,
        big_bytes: 10 * 1024 * 1024,
    };
    let n = Counts {
        startup: 20,
        read_seq: 4000,
        read_pipe: 20_000,
        write: 2000,
        write_serial: 1000,
        stat: 4000,
        list: 200,
        tree: 10,
        read_big: 20,
        search: 5,
        warmup: 300,
    };
    (sz, n)
}

/// The servers: labels as they appear in the report.
const MCPFS: &str = "mcpfs";
const FSGATE: &str = "fsgate";
const BATCH: &str = "fsgate fsync=batch";
const ACP: &str = "fsgate acp";
const WS: &str = "fsgate ws";
const RG: &str = "rg";
const FD: &str = "fd";

/// The workloads in order, each with the servers it runs on.
fn jobs(cfg: &Config) -> Vec<(&'static str, Vec<&'static str>)> {
    let both = |extra: &[&'static str]| {
        let mut v = Vec::new();
        if cfg.reference.is_some() {
            v.push(MCPFS);
        }
        v.push(FSGATE);
        v.extend_from_slice(extra);
        v
    };
    let search = if cfg.rg.is_some() {
        vec![FSGATE, RG]
    } else {
        vec![FSGATE]
    };
    let with = |tool: &'static str, have: bool| {
        let mut v = vec![FSGATE];
        if have {
            v.push(tool);
        }
        v
    };
    let (fd, rg) = (cfg.fd.is_some(), cfg.rg.is_some());
    let all = vec![
        ("startup", both(&[])),
        ("idle_rss", both(&[])),
        ("read_seq", both(&[BATCH])),
        ("read_pipe", both(&[])),
        ("write_new", both(&[])),
        ("overwrite", both(&[])),
        ("write_new_serial", both(&[])),
        ("overwrite_serial", both(&[])),
        ("stat", both(&[])),
        ("list", both(&[])),
        ("tree", both(&[])),
        ("read_big", both(&[])),
        ("search_literal", search.clone()),
        ("search_regex", search),
        ("acp_read_seq", vec![ACP]),
        ("acp_read_pipe", vec![ACP]),
        ("ws_read_seq", vec![WS]),
        ("ws_read_pipe", vec![WS]),
        ("mono_tree", with(FD, fd)),
        ("mono_tree_root", vec![FSGATE]),
        ("mono_glob", with(FD, fd)),
        ("mono_grep", with(RG, rg)),
        ("list_50k", vec![FSGATE]),
        ("list_200k", vec![FSGATE]),
    ];
    all.into_iter()
        .filter(|(w, _)| cfg.only.is_empty() || cfg.only.iter().any(|o| o == w))
        .collect()
}

/// One suite run, its state and results.
struct Suite {
    cfg: Config,
    sz: Sizes,
    n: Counts,
    /// Server label -> its workspace root (canonical).
    roots: BTreeMap<&'static str, PathBuf>,
    batch_policy: PathBuf,
    /// The monorepo, and what it holds (when a `mono_*` workload runs).
    mono: Option<(PathBuf, Expect)>,
    /// The root holding the wide directories, and their entry counts.
    wide: Option<(PathBuf, [usize; 2])>,
}

/// Calls per repetition of each `mono_*` and `list_*` workload.
fn mono_calls(quick: bool) -> usize {
    if quick { 1 } else { 3 }
}

/// The monorepo the run uses: the one given (made with [`Mono::FULL`]), or one made
/// under `work` (small in quick mode).
fn prepare_mono(cfg: &Config) -> Result<(PathBuf, Expect), Error> {
    let m = if cfg.quick {
        Mono {
            files: 2_000,
            dirs: 100,
            packages: 4,
            seed: 7,
        }
    } else {
        Mono::FULL
    };
    let root = match &cfg.monorepo {
        Some(r) => r.clone(),
        None => {
            let r = cfg.work.join("mono").join("ws");
            if r.exists() {
                std::fs::remove_dir_all(&r).map_err(|e| Error::io(&r, e))?;
            }
            eprintln!("fsgate-bench: generating the monorepo in {}", r.display());
            m.build(&r, 2)?;
            r
        }
    };
    let root = root.canonicalize().map_err(|e| Error::io(&root, e))?;
    Ok((root, Expect::of(&m)))
}

/// The wide directories `w0` and `w1` (50,000 and 200,000 entries; fewer in quick mode).
fn prepare_wide(cfg: &Config) -> Result<(PathBuf, [usize; 2]), Error> {
    let counts = if cfg.quick {
        [3_000, 12_000]
    } else {
        [50_000, 200_000]
    };
    let root = cfg.work.join("wide").join("ws");
    for (i, n) in counts.iter().enumerate() {
        let d = root.join(format!("w{i}"));
        let complete =
            d.join(mono::wide_name(n - 1)).exists() && !d.join(mono::wide_name(*n)).exists();
        if !complete {
            if d.exists() {
                std::fs::remove_dir_all(&d).map_err(|e| Error::io(&d, e))?;
            }
            mono::build_wide(&d, *n)?;
        }
    }
    let root = root.canonicalize().map_err(|e| Error::io(&root, e))?;
    Ok((root, counts))
}

/// Runs the suite; the report holds every figure, failure and target.
pub async fn run(cfg: Config) -> Result<Report, Error> {
    let (sz, n) = plan(cfg.quick);
    let work = &cfg.work;
    std::fs::create_dir_all(work).map_err(|e| Error::io(work, e))?;
    let mut roots = BTreeMap::new();
    let mut copies = vec![FSGATE];
    if cfg.reference.is_some() {
        copies.push(MCPFS);
    }
    for label in copies {
        let root = work.join(label.replace(' ', "-")).join("ws");
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(|e| Error::io(&root, e))?;
        }
        eprintln!(
            "fsgate-bench: building the tree for {label} in {}",
            root.display()
        );
        tree::build(&root, &sz)?;
        let root = root.canonicalize().map_err(|e| Error::io(&root, e))?;
        roots.insert(label, root);
    }
    // The fsgate variants only read: they share fsgate's tree.
    for label in [BATCH, ACP, WS, RG] {
        let r = roots.get(FSGATE).cloned().unwrap_or_default();
        roots.insert(label, r);
    }
    // Start the runs with the trees on disk, not in the page cache's writeback.
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    let batch_policy = work.join("policy-batch.toml");
    let text = format!("{DEFAULT_POLICY}\n[audit]\nfsync = \"batch\"\n");
    std::fs::write(&batch_policy, text).map_err(|e| Error::io(&batch_policy, e))?;
    let wants = |prefix: &str| jobs(&cfg).iter().any(|(w, _)| w.starts_with(prefix));
    let mono = wants("mono_").then(|| prepare_mono(&cfg)).transpose()?;
    let wide = wants("list_").then(|| prepare_wide(&cfg)).transpose()?;
    let suite = Suite {
        cfg: cfg.clone(),
        sz,
        n,
        roots,
        batch_policy,
        mono,
        wide,
    };
    let mut runs: BTreeMap<(String, String), Vec<Figures>> = BTreeMap::new();
    let mut failures = Vec::new();
    let (mut fdatasync, mut small_sync, mut chain) = (Vec::new(), Vec::new(), Vec::new());
    let mut floors = Floors::default();
    for rep in 0..cfg.reps.max(1) {
        let (mut probed, mut warmed) = (false, false);
        for (w, mut servers) in jobs(&cfg) {
            let serial = w.ends_with("_serial");
            let count = if cfg.quick { 50 } else { 1000 };
            if w == "read_seq" || (serial && !probed) {
                // The disk's sync cost at the moment reads (or one-at-a-time writes) are
                // measured.
                fdatasync.push(probe_fdatasync(work, count, 4096)?);
                small_sync.push(probe_fdatasync(work, count, RECORD_BYTES)?);
                probed = true;
            }
            if w == "write_new_serial" {
                chain.push(probe_chain(work, count / 5)?);
            }
            floors.before(&suite, w, rep)?;
            if w.starts_with("mono_") && !warmed {
                if let Some((root, _)) = &suite.mono {
                    eprint!(
                        "fsgate-bench: rep {} reading the monorepo once, untimed ... ",
                        rep + 1
                    );
                    let t = Instant::now();
                    let files = mono_work::warm(root)?;
                    eprintln!("{files} files, {:.1} s", t.elapsed().as_secs_f64());
                }
                warmed = true;
            }
            if rep % 2 == 1 {
                servers.reverse();
            }
            for label in servers {
                eprint!("fsgate-bench: rep {} {w} on {label} ... ", rep + 1);
                let _ = std::io::stderr().flush();
                // Each write workload on a filesystem made for it, gone after.
                let fresh = match is_write(w) {
                    true => {
                        let tag = format!("{w}-{}-{rep}", label.replace([' ', '='], "-"));
                        Some(floors.fresh(work, &tag)?)
                    }
                    false => None,
                };
                let on = fresh.as_ref().map(|f| f.root.as_path());
                // fsgate's floor, timed between the chunks of its run.
                let mut floor = match label == FSGATE {
                    true => floors.interleaved(&suite, w, rep)?,
                    false => None,
                };
                let got = match floor.as_mut() {
                    Some(f) => {
                        let mut chunk = |count| f.chunk(count);
                        suite.job(w, label, rep, on, Some(&mut chunk)).await
                    }
                    None => suite.job(w, label, rep, on, None).await,
                };
                drop(fresh);
                match got {
                    Ok(f) => {
                        let floor = floor.map(|fl| floors.record(fl)).unwrap_or_default();
                        eprintln!("{}{floor}", f.brief());
                        runs.entry((w.into(), label.into())).or_default().push(f);
                    }
                    Err(e) => {
                        eprintln!("FAILED: {e}");
                        failures.push(format!("{w} on {label} (rep {}): {e}", rep + 1));
                    }
                }
            }
        }
    }
    let syncs = [
        SyncProbe::medians(&fdatasync),
        SyncProbe::medians(&small_sync),
    ];
    let chain = floors.fill_chain(ChainProbe::medians(&chain));
    let mut report = Report::new(&cfg, (syncs, chain), runs, failures, &suite.sz);
    report.write_fs = describe_kinds(&floors.kinds);
    Ok(report)
}

impl Suite {
    fn spec(&self, label: &str) -> Result<Spec, Error> {
        let fsgate = |door, policy| Spec::Fsgate {
            bin: self.cfg.fsgate.clone(),
            door,
            policy,
        };
        Ok(match label {
            MCPFS => match &self.cfg.reference {
                Some((node, js)) => Spec::Reference {
                    node: node.clone(),
                    js: js.clone(),
                },
                None => return Err(Error::Setup("no reference server".into())),
            },
            FSGATE => fsgate(Door::Mcp, None),
            BATCH => fsgate(Door::Mcp, Some(self.batch_policy.clone())),
            ACP => fsgate(Door::Acp, None),
            WS => fsgate(Door::Ws, None),
            _ => return Err(Error::Setup(format!("no server {label}"))),
        })
    }

    fn state_dir(&self, label: &str, w: &str, rep: usize) -> PathBuf {
        let tag = label.replace([' ', '='], "-");
        self.cfg.work.join("state").join(format!("{tag}-{w}-{rep}"))
    }

    async fn start(&self, label: &str, w: &str, rep: usize) -> Result<(Server, &Path), Error> {
        let spec = self.spec(label)?;
        let root = self
            .roots
            .get(label)
            .ok_or_else(|| Error::Setup(format!("no tree for {label}")))?;
        let srv = server::start(&spec, root, &self.state_dir(label, w, rep)).await?;
        Ok((srv, root))
    }

    /// Runs workload `w` on server `label` once (a fresh server process); a write
    /// workload `on` a fresh filesystem (its workspace and the server's state there).
    async fn job(
        &self,
        w: &str,
        label: &str,
        rep: usize,
        on: Option<&Path>,
        between: Option<Between<'_>>,
    ) -> Result<Figures, Error> {
        if let Some(fresh) = on {
            let (root, state) = (fresh.join("ws"), fresh.join("state"));
            std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
            let root = root.canonicalize().map_err(|e| Error::io(&root, e))?;
            let srv = server::start(&self.spec(label)?, &root, &state).await?;
            let cx = Ctx {
                root: &root,
                sz: &self.sz,
                rep,
            };
            let res = self.workload(&srv, &cx, w, between).await;
            srv.stop().await;
            return Ok(Figures::from_run(&res?));
        }
        if w.starts_with("mono_") || w.starts_with("list_") {
            return self
                .big_job(w, label, rep)
                .await
                .map(|r| Figures::from_run(&r));
        }
        if label == RG {
            let root = self.roots.get(RG).ok_or(Error::Setup("no tree".into()))?;
            let rg = self.cfg.rg.as_ref().ok_or(Error::Setup("no rg".into()))?;
            let cx = Ctx {
                root,
                sz: &self.sz,
                rep,
            };
            let run = workloads::rg(rg, &cx, self.n.search, w == "search_literal")?;
            return Ok(Figures::from_run(&run));
        }
        match w {
            "startup" => return self.startup(label, rep).await,
            "idle_rss" => return self.idle(label, rep).await,
            _ => {}
        }
        let (srv, root) = self.start(label, w, rep).await?;
        let cx = Ctx {
            root,
            sz: &self.sz,
            rep,
        };
        let res = self.workload(&srv, &cx, w, None).await;
        srv.stop().await;
        Ok(Figures::from_run(&res?))
    }

    /// Runs workload `w`; a write workload with its floor's chunks `between` its own.
    async fn workload(
        &self,
        srv: &Server,
        cx: &Ctx<'_>,
        w: &str,
        between: Option<Between<'_>>,
    ) -> Result<Run, Error> {
        let n = &self.n;
        let (seq, pipe) = (w.ends_with("read_seq"), w.ends_with("read_pipe"));
        if seq || pipe {
            let k = if pipe { 32 } else { 1 };
            workloads::read_small(srv, cx, n.warmup, k).await?;
            let count = if pipe { n.read_pipe } else { n.read_seq };
            return workloads::read_small(srv, cx, count, k).await;
        }
        match w {
            "write_new" => workloads::write_new(srv, cx, (n.write, 32), between).await,
            "overwrite" => workloads::overwrite(srv, cx, (n.write, 32), between).await,
            "write_new_serial" => workloads::write_new(srv, cx, (n.write_serial, 1), between).await,
            "overwrite_serial" => workloads::overwrite(srv, cx, (n.write_serial, 1), between).await,
            "stat" => {
                workloads::stat(srv, cx, n.warmup).await?;
                workloads::stat(srv, cx, n.stat).await
            }
            "list" => workloads::list(srv, cx, n.list).await,
            "tree" => workloads::dir_tree(srv, cx, n.tree).await,
            "read_big" => workloads::read_big(srv, cx, n.read_big).await,
            "search_literal" => workloads::search(srv, cx, n.search, true).await,
            "search_regex" => workloads::search(srv, cx, n.search, false).await,
            _ => Err(Error::Setup(format!("no workload {w}"))),
        }
    }

    /// A monorepo or wide-directory workload: `fd` / `rg` run by the driver, or fsgate
    /// started on that tree.
    async fn big_job(&self, w: &str, label: &str, rep: usize) -> Result<Run, Error> {
        let n = mono_calls(self.cfg.quick);
        let tool =
            |t: &Option<PathBuf>| t.clone().ok_or_else(|| Error::Setup(format!("no {label}")));
        if w.starts_with("list_") {
            let (root, counts) = self
                .wide
                .as_ref()
                .ok_or(Error::Setup("no wide tree".into()))?;
            let (dir, count) = if w == "list_50k" {
                ("w0", counts[0])
            } else {
                ("w1", counts[1])
            };
            let srv = self.start_on(root, w, rep).await?;
            let res = mono_work::list_pages(&srv, root, dir, count, n).await;
            srv.stop().await;
            return res;
        }
        let (root, ex) = self
            .mono
            .as_ref()
            .ok_or(Error::Setup("no monorepo".into()))?;
        match (w, label) {
            ("mono_tree", FD) => return mono_work::fd_tree(&tool(&self.cfg.fd)?, root, ex, n),
            ("mono_glob", FD) => return mono_work::fd_glob(&tool(&self.cfg.fd)?, root, ex, n),
            ("mono_grep", RG) => return mono_work::rg_grep(&tool(&self.cfg.rg)?, root, ex, n),
            _ => {}
        }
        let srv = self.start_on(root, w, rep).await?;
        let res = match w {
            "mono_tree" => mono_work::tree(&srv, root, ex, n).await,
            "mono_tree_root" => mono_work::tree_root(&srv, root, ex, n).await,
            "mono_glob" => mono_work::glob(&srv, root, ex, n).await,
            "mono_grep" => mono_work::grep(&srv, root, ex, n).await,
            _ => Err(Error::Setup(format!("no workload {w}"))),
        };
        srv.stop().await;
        res
    }

    /// fsgate (MCP, default policy) on `root`.
    async fn start_on(&self, root: &Path, w: &str, rep: usize) -> Result<Server, Error> {
        let spec = self.spec(FSGATE)?;
        server::start(&spec, root, &self.state_dir(FSGATE, w, rep)).await
    }

    /// `startup`: spawn to `initialize` answer, a fresh process each time.
    async fn startup(&self, label: &str, rep: usize) -> Result<Figures, Error> {
        let mut lat = Vec::new();
        let t0 = Instant::now();
        for j in 0..self.n.startup {
            // A fresh state directory each time: no audit log to reopen.
            let (srv, _) = self.start(label, &format!("startup{j}"), rep).await?;
            lat.push(srv.startup);
            srv.stop().await;
        }
        let run = Run {
            lat,
            wall: t0.elapsed(),
            cpu_s: None,
            hwm_kib: None,
            driver_cpu_s: None,
            syncs: None,
        };
        Ok(Figures::from_run(&run).startup_only())
    }

    /// `idle_rss`: VmRSS after `initialize` and one second idle.
    async fn idle(&self, label: &str, rep: usize) -> Result<Figures, Error> {
        let (srv, _) = self.start(label, "idle_rss", rep).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = server::vm_kib(srv.pid, "VmRSS");
        srv.stop().await;
        Ok(Figures::rss_only(rss?))
    }
}

/// The floors measured in a run, and what each write workload ran on.
#[derive(Default)]
struct Floors {
    /// The bare calls with 32 in flight, of each kind.
    in_flight: Vec<(Calls, InFlight)>,
    /// The one-at-a-time floors: (over a file, p50 µs).
    serial: Vec<(bool, f64)>,
    kinds: Vec<Kind>,
}

impl Floors {
    /// A filesystem of its own for `tag`, noted for the report.
    fn fresh(&mut self, work: &Path, tag: &str) -> Result<FreshFs, Error> {
        let f = FreshFs::make(work, tag)?;
        self.kinds.push(f.kind.clone());
        Ok(f)
    }

    /// Before workload `overwrite`, the bare overwrites with 32 in flight of the kinds
    /// shown beside its target (the durable replace alone, the backups in one shared
    /// file), each on a filesystem of its own.
    fn before(&mut self, suite: &Suite, w: &str, rep: usize) -> Result<(), Error> {
        if w != "overwrite" {
            return Ok(());
        }
        for (calls, name) in [
            (Calls::ReplaceOnly, "replace"),
            (Calls::SharedBackups, "shared-backups"),
        ] {
            let fresh = self.fresh(&suite.cfg.work, &format!("bare-{name}-{rep}"))?;
            let scratch = fresh.root.join("bare");
            let got = floor::bare_overwrites_in_flight(&scratch, suite.n.write, 32, calls)?;
            self.in_flight.push((calls, got));
        }
        Ok(())
    }

    /// The floor workload `w` is set against, on a filesystem of its own, ready to be
    /// timed between the chunks of fsgate's run: the one-at-a-time write's bare calls
    /// (as many as the workload makes), or fsgate's bare calls with 32 in flight.
    fn interleaved(
        &mut self,
        suite: &Suite,
        w: &str,
        rep: usize,
    ) -> Result<Option<Interleaved>, Error> {
        let work = &suite.cfg.work;
        if let Some(over) = serial_floor(w) {
            let fs = self.fresh(work, &format!("floor-{w}-{rep}"))?;
            let floor = SerialFloor::new(&fs.root.join("floor"), over, suite.n.write_serial)?;
            return Ok(Some(Interleaved::Serial {
                floor: Box::new(floor),
                _fs: fs,
            }));
        }
        if w != "overwrite" {
            return Ok(None);
        }
        let fs = self.fresh(work, &format!("bare-in-flight-{rep}"))?;
        let n = suite.n.write;
        let floor = InFlightFloor::new(&fs.root.join("bare"), n, Calls::Fsgates)?;
        Ok(Some(Interleaved::InFlight { floor, _fs: fs }))
    }

    /// A floor timed between fsgate's chunks, kept for the report; its figure, for
    /// the progress line.
    fn record(&mut self, floor: Interleaved) -> String {
        match floor {
            Interleaved::Serial { floor, .. } if floor.count() > 0 => {
                let us = floor.p50_us();
                self.serial.push((floor.over(), us));
                format!(
                    "; its floor, between: p50 {:.3} ms ({} unnamed files made on a write's path)",
                    us / 1e3,
                    floor.made_on_path()
                )
            }
            Interleaved::InFlight { floor, .. } if floor.figures().ops_per_s > 0.0 => {
                let got = floor.figures();
                self.in_flight.push((Calls::Fsgates, got));
                format!("; its floor, between: {:.0} ops/s", got.ops_per_s)
            }
            Interleaved::Serial { .. } | Interleaved::InFlight { .. } => String::new(),
        }
    }

    /// `chain` with the floors' medians over the repetitions.
    fn fill_chain(&self, mut chain: ChainProbe) -> ChainProbe {
        let of = |calls: Calls, f: fn(&InFlight) -> f64| {
            let got = self.in_flight.iter().filter(|(c, _)| *c == calls);
            mid(got.map(|(_, r)| f(r)).collect())
        };
        chain.bare_overwrite_32_ops = of(Calls::Fsgates, |r| r.ops_per_s);
        chain.bare_overwrite_32_cpu_us = of(Calls::Fsgates, |r| r.cpu_us);
        chain.bare_replace_32_ops = of(Calls::ReplaceOnly, |r| r.ops_per_s);
        chain.bare_shared_backups_32_ops = of(Calls::SharedBackups, |r| r.ops_per_s);
        let serial = |over: bool| {
            let got = self.serial.iter().filter(|f| f.0 == over);
            mid(got.map(|f| f.1).collect())
        };
        chain.bare_new_us = serial(false);
        chain.bare_overwrite_us = serial(true);
        chain
    }
}

/// A floor timed a chunk at a time between fsgate's (on its filesystem, removed when
/// this is dropped).
enum Interleaved {
    Serial {
        floor: Box<SerialFloor>,
        _fs: FreshFs,
    },
    InFlight {
        floor: InFlightFloor,
        _fs: FreshFs,
    },
}

impl Interleaved {
    /// The next `count` writes of the floor.
    fn chunk(&mut self, count: usize) -> Result<(), Error> {
        match self {
            Interleaved::Serial { floor, .. } => floor.run(count),
            Interleaved::InFlight { floor, .. } => floor.run(count, 32),
        }
    }
}

/// The write workloads: each runs on a filesystem of its own ([`FreshFs`]).
pub fn is_write(w: &str) -> bool {
    matches!(
        w,
        "write_new" | "overwrite" | "write_new_serial" | "overwrite_serial"
    )
}

/// Before a one-at-a-time write workload, its floor: `Some(true)` for overwrites.
fn serial_floor(w: &str) -> Option<bool> {
    match w {
        "write_new_serial" => Some(false),
        "overwrite_serial" => Some(true),
        _ => None,
    }
}

/// What the write workloads ran on, for the report (each way once).
pub fn describe_kinds(kinds: &[Kind]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for k in kinds {
        let d = k.describe();
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    seen.join("; ")
}

/// About one audit record's size, for the second fdatasync probe.
const RECORD_BYTES: usize = 400;

/// The median of `v` (0 when empty).
pub(crate) fn mid(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// What `n` times (append `chunk` bytes + fdatasync) cost on the runs' disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyncProbe {
    /// Median time of one append + fdatasync, µs.
    pub p50_us: f64,
    /// Mean time, µs: a server that waits for one such sync per answer, one request at a
    /// time, answers at most 1e6 / mean times a second.
    pub mean_us: f64,
    /// CPU (user + system) of the probing thread per append + fdatasync, µs: a floor
    /// for the CPU of any request that must wait for its own sync.
    pub cpu_us: f64,
}

impl SyncProbe {
    /// The median of each figure over the repetitions.
    pub fn medians(all: &[SyncProbe]) -> SyncProbe {
        let m = |f: fn(&SyncProbe) -> f64| mid(all.iter().map(f).collect());
        SyncProbe {
            p50_us: m(|p| p.p50_us),
            mean_us: m(|p| p.mean_us),
            cpu_us: m(|p| p.cpu_us),
        }
    }
}

/// Appends `chunk` bytes and calls fdatasync, `n` times, to a file under `dir`. Space is
/// reserved past the end first (`fallocate` with `KEEP_SIZE`), as fsgate's audit log
/// reserves its own: each sync is one appended record's, size change included. (Writing
/// into space reserved without `KEEP_SIZE` costs several times more on ext4.)
fn probe_fdatasync(dir: &Path, n: usize, chunk: usize) -> Result<SyncProbe, Error> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let p = dir.join("fdatasync-probe");
    let f = std::fs::File::create(&p).map_err(|e| Error::io(&p, e))?;
    let len = i64::try_from(n * chunk).unwrap_or(i64::MAX);
    // SAFETY: fallocate on a descriptor we own; a failure only leaves the file unreserved.
    unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    f.sync_all().map_err(|e| Error::io(&p, e))?;
    let buf = vec![b'x'; chunk];
    let mut lat = Vec::with_capacity(n);
    let cpu0 = rusage_cpu(libc::RUSAGE_THREAD);
    for i in 0..n {
        let t = Instant::now();
        f.write_all_at(&buf, (i * chunk) as u64)
            .map_err(|e| Error::io(&p, e))?;
        f.sync_data().map_err(|e| Error::io(&p, e))?;
        lat.push(t.elapsed());
    }
    let cpu = rusage_cpu(libc::RUSAGE_THREAD) - cpu0;
    let _ = std::fs::remove_file(&p);
    let us: Vec<f64> = lat.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    let count = us.len().max(1) as f64;
    Ok(SyncProbe {
        mean_us: us.iter().sum::<f64>() / count,
        p50_us: mid(us),
        cpu_us: cpu * 1e6 / count,
    })
}

/// The p50 of each sync a durable write waits for besides the audit log's, on the runs'
/// disk: with the log's own (the 400-byte probe), what no server keeping fsgate's
/// promise can answer a one-at-a-time write faster than.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ChainProbe {
    /// 4 KiB into an unnamed (`O_TMPFILE`) file + `fsync`: a write's staged content, µs.
    pub content_us: f64,
    /// 4 KiB into a new named file + `fdatasync`: a backup, µs.
    pub new_file_us: f64,
    /// `fsync` of the directory just given a new entry: a published name, µs.
    pub dir_us: f64,
    /// The floor of `write_new_serial`: a whole durable write of 4 KiB to a new file,
    /// fsgate's system calls in its order with no server, its unnamed file made ahead
    /// ([`crate::floor::bare_new`]), on a filesystem of its own; p50, µs (0: not run).
    pub bare_new_us: f64,
    /// The floor of `overwrite_serial`: the same for an overwrite with its backup
    /// ([`crate::floor::bare_overwrite`]), µs.
    pub bare_overwrite_us: f64,
    /// Bare overwrites with their backups and records, 32 threads at once, no server
    /// ([`crate::floor::bare_overwrites_in_flight`]), a second (0: not run).
    pub bare_overwrite_32_ops: f64,
    /// Their CPU per overwrite, all threads, µs.
    pub bare_overwrite_32_cpu_us: f64,
    /// The durable replace alone (no backup, no records), 32 threads at once, a second
    /// (0: not run).
    pub bare_replace_32_ops: f64,
    /// fsgate's bare overwrites with their backups appended to one shared file
    /// ([`crate::floor::Calls::SharedBackups`]), 32 threads at once, a second (0: not
    /// run).
    pub bare_shared_backups_32_ops: f64,
    /// A write request's round trip through pipes to a process that only echoes it
    /// ([`crate::floor::echo_round_trip`]), µs.
    pub echo_rtt_us: f64,
}

impl ChainProbe {
    /// The median of each figure over the repetitions.
    pub fn medians(all: &[ChainProbe]) -> ChainProbe {
        let m = |f: fn(&ChainProbe) -> f64| mid(all.iter().map(f).collect());
        ChainProbe {
            content_us: m(|p| p.content_us),
            new_file_us: m(|p| p.new_file_us),
            dir_us: m(|p| p.dir_us),
            bare_new_us: m(|p| p.bare_new_us),
            bare_overwrite_us: m(|p| p.bare_overwrite_us),
            bare_overwrite_32_ops: m(|p| p.bare_overwrite_32_ops),
            bare_overwrite_32_cpu_us: m(|p| p.bare_overwrite_32_cpu_us),
            bare_replace_32_ops: m(|p| p.bare_replace_32_ops),
            bare_shared_backups_32_ops: m(|p| p.bare_shared_backups_32_ops),
            echo_rtt_us: m(|p| p.echo_rtt_us),
        }
    }
}

/// Times `n` times each of a durable write's syncs besides the log's, apart, and a
/// request's round trip through pipes (see [`ChainProbe`]), in a scratch directory
/// under `dir`.
fn probe_chain(dir: &Path, n: usize) -> Result<ChainProbe, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let d = dir.join("chain-probe");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    let handle = std::fs::File::open(&d).map_err(|e| Error::io(&d, e))?;
    let buf = vec![b'x'; 4096];
    let (mut content, mut new_file, mut dirs) = (Vec::new(), Vec::new(), Vec::new());
    let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    for i in 0..n {
        let t = Instant::now();
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o600)
            .open(&d)
            .and_then(|mut f| f.write_all(&buf).and_then(|()| f.sync_all()))
            .map_err(|e| Error::io(&d, e))?;
        content.push(us(t));
        let p = d.join(format!("b{i}"));
        let t = Instant::now();
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .and_then(|mut f| f.write_all(&buf).and_then(|()| f.sync_data()))
            .map_err(|e| Error::io(&p, e))?;
        new_file.push(us(t));
        let t = Instant::now();
        handle.sync_all().map_err(|e| Error::io(&d, e))?;
        dirs.push(us(t));
    }
    let _ = std::fs::remove_dir_all(&d);
    Ok(ChainProbe {
        content_us: mid(content),
        new_file_us: mid(new_file),
        dir_us: mid(dirs),
        echo_rtt_us: crate::floor::echo_round_trip(n)?,
        ..ChainProbe::default()
    })
}
