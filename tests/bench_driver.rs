//! The benchmark driver (`benches/driver`, `fsgate-bench`) against the real fsgate: its
//! quick mode runs every fsgate workload with every answer checked, and a wrong answer
//! fails a workload instead of being timed.

use std::collections::BTreeMap;

use fsgate_bench::Error;
use fsgate_bench::report::{Figures, Report};
use fsgate_bench::server::{self, Door, Spec};
use fsgate_bench::suite::{self, Config, SyncProbe};
use fsgate_bench::tree;
use fsgate_bench::workloads::{self, Ctx};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn bench_driver_quick_mode_runs_and_checks_every_fsgate_workload() {
    let work = tempfile::tempdir().expect("tempdir");
    let cfg = Config {
        fsgate: env!("CARGO_BIN_EXE_fsgate").into(),
        reference: None,
        rg: None,
        work: work.path().to_path_buf(),
        reps: 1,
        quick: true,
        command: "test".into(),
        only: Vec::new(),
        monorepo: None,
        fd: None,
    };
    let report = runtime().block_on(suite::run(cfg)).expect("suite runs");
    assert!(
        report.failures.is_empty(),
        "failures: {:#?}",
        report.failures
    );
    let timed = [
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
        "mono_tree",
        "mono_tree_root",
        "mono_glob",
        "mono_grep",
        "list_50k",
        "list_200k",
    ];
    for w in timed {
        let f = report
            .get(w, "fsgate")
            .unwrap_or_else(|| panic!("no figures for {w}"));
        assert!(f.ops_per_s.is_some_and(|x| x > 0.0), "{w}: {f:?}");
        assert!(
            f.cpu_us_per_op.is_some() && f.rss_mib.is_some(),
            "{w}: {f:?}"
        );
    }
    for (w, s) in [
        ("read_seq", "fsgate fsync=batch"),
        ("acp_read_seq", "fsgate acp"),
        ("acp_read_pipe", "fsgate acp"),
        ("ws_read_seq", "fsgate ws"),
        ("ws_read_pipe", "fsgate ws"),
    ] {
        assert!(
            report.get(w, s).is_some_and(|f| f.p50_ms.is_some()),
            "{w} on {s}"
        );
    }
    assert!(
        report
            .get("startup", "fsgate")
            .is_some_and(|f| f.p50_ms.is_some())
    );
    assert!(
        report
            .get("idle_rss", "fsgate")
            .is_some_and(|f| f.rss_mib.is_some())
    );
    // Where perf may count them: a new file's 4 syncs (content, intent, directory,
    // outcome), an overwrite's 6 (and its backup's file and directory).
    for (w, least) in [("write_new_serial", 4.0), ("overwrite_serial", 6.0)] {
        let f = report.get(w, "fsgate").expect("figures");
        assert!(f.syncs_per_op.is_none_or(|s| s >= least), "{w}: {f:?}");
    }
    let pipe = report
        .get("read_pipe", "fsgate")
        .expect("read_pipe figures");
    assert!(
        pipe.driver_cpu_us_per_op.is_some_and(|c| c > 0.0),
        "the driver's own CPU per read: {pipe:?}"
    );
    assert!(
        report.fdatasync_record_mean_us > 0.0 && report.fdatasync_record_cpu_us > 0.0,
        "the sync probe's mean and CPU: {} / {}",
        report.fdatasync_record_mean_us,
        report.fdatasync_record_cpu_us
    );
    let md = report.markdown();
    assert!(md.contains("| read_pipe | fsgate |"), "{md}");
    // Each write workload, its floor and the bare calls ran on a filesystem of its own
    // (or the report says why not), and fsgate is set against its floor in each row.
    assert!(
        md.contains("Write workloads, their floors and the bare calls: each on a new ext4 filesystem of its own")
            || md.contains("Write workloads, their floors and the bare calls: NOT on a filesystem of their own ("),
        "{md}"
    );
    for name in [
        "write_new_serial p50 / its floor's",
        "overwrite_serial p50 / its floor's",
        "overwrite, 32 in flight: bare calls' ops/s / fsgate's",
    ] {
        let t = report.targets.iter().find(|t| t.name == name);
        let t = t.unwrap_or_else(|| panic!("no row {name}"));
        assert!(t.measured.ends_with('x'), "{name}: {t:?}");
        assert!(
            t.limit.as_ref().is_some_and(|l| l.contains("floor ")),
            "{name}: {t:?}"
        );
    }
    // The floors are timed only between fsgate's chunks: each is there.
    assert!(report.chain.bare_new_us > 0.0 && report.chain.bare_overwrite_us > 0.0);
    assert!(report.chain.bare_overwrite_32_ops > 0.0);
    assert!(
        md.contains("Each floor fsgate is set against is timed in chunks between fsgate's own (10 chunks one at a time, 4 with 32 in flight)"),
        "{md}"
    );
}

/// Figures of one workload on one server, for the targets' arithmetic.
fn figures(ops: f64, cpu: f64, driver: f64) -> Vec<Figures> {
    vec![Figures {
        ops_per_s: Some(ops),
        p50_ms: Some(0.2),
        p99_ms: Some(0.4),
        cpu_us_per_op: Some(cpu),
        rss_mib: Some(16.0),
        driver_cpu_us_per_op: Some(driver),
        syncs_per_op: None,
    }]
}

#[test]
fn bench_driver_targets_say_what_the_machine_allows() {
    let cfg = Config {
        fsgate: "fsgate".into(),
        reference: None,
        rg: None,
        work: "/nonexistent".into(),
        reps: 1,
        quick: false,
        command: "test".into(),
        only: Vec::new(),
        monorepo: None,
        fd: None,
    };
    let mut runs = BTreeMap::new();
    for (w, s, f) in [
        ("read_seq", "mcpfs", figures(2_000.0, 350.0, 10.0)),
        ("read_seq", "fsgate", figures(4_000.0, 100.0, 10.0)),
        ("stat", "mcpfs", figures(4_000.0, 200.0, 10.0)),
        ("stat", "fsgate", figures(6_000.0, 80.0, 10.0)),
        ("read_pipe", "mcpfs", figures(10_000.0, 120.0, 12.0)),
        ("read_pipe", "fsgate", figures(30_000.0, 25.0, 8.0)),
        ("overwrite", "mcpfs", figures(1_000.0, 900.0, 10.0)),
        ("overwrite", "fsgate", figures(1_200.0, 800.0, 10.0)),
    ] {
        runs.insert((w.to_string(), s.to_string()), f);
    }
    // One at a time: p50 0.2 ms (a new file) and 1.1 ms (an overwrite).
    for (w, ms) in [("write_new_serial", 0.2), ("overwrite_serial", 1.1)] {
        let mut f = figures(500.0, 300.0, 10.0);
        f[0].p50_ms = Some(ms);
        runs.insert((w.to_string(), "fsgate".to_string()), f);
    }
    let probe = SyncProbe {
        p50_us: 120.0,
        mean_us: 125.0,
        cpu_us: 50.0,
    };
    let sizes = tree::Sizes {
        small_files: 1,
        list_entries: 1,
        tree_dirs: 1,
        tree_files_per_dir: 1,
        tree_file_bytes: 1,
        big_bytes: 1,
    };
    let chain = fsgate_bench::suite::ChainProbe {
        content_us: 200.0,
        new_file_us: 180.0,
        dir_us: 90.0,
        bare_new_us: 400.0,
        bare_overwrite_us: 800.0,
        bare_overwrite_32_ops: 1_500.0,
        bare_overwrite_32_cpu_us: 1_100.0,
        bare_replace_32_ops: 1_900.0,
        bare_shared_backups_32_ops: 1_700.0,
        echo_rtt_us: 60.0,
    };
    let report = Report::new(&cfg, ([probe, probe], chain), runs, Vec::new(), &sizes);
    let limit = |prefix: &str| {
        let row = report.targets.iter().find(|t| t.name.starts_with(prefix));
        row.and_then(|t| t.limit.clone()).unwrap_or_default()
    };
    // Issue 12's targets that issue 34 retired are gone; pipelined reads keep 3x.
    let names: Vec<&str> = report.targets.iter().map(|t| t.name.as_str()).collect();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("CPU per") || n.starts_with("stat ops/s")),
        "{names:?}"
    );
    let pipe = report.targets.iter().find(|t| t.name == "read_pipe ops/s");
    assert_eq!(pipe.map(|t| t.goal.as_str()), Some(">= 3x"));
    // 30,000/s against 10,000/s: met.
    assert_eq!(pipe.and_then(|t| t.met), Some(true));
    // Issue 57 retired the three write targets against the reference and `fdatasync`.
    for gone in [
        "overwrite ops/s",
        "write_new_serial p50 / fdatasync",
        "overwrite_serial p50 / fdatasync",
    ] {
        assert!(
            !names.iter().any(|n| n.starts_with(gone)),
            "{gone}: {names:?}"
        );
    }
    // fsgate against its floor: 0.2 ms against 0.4 ms is no floor at all (the bare calls
    // slower than fsgate): the row says so and has no figure.
    let row = |name: &str| {
        report
            .targets
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no row {name}: {names:?}"))
            .clone()
    };
    let new = row("write_new_serial p50 / its floor's");
    assert_eq!(
        (new.measured.as_str(), new.goal.as_str()),
        ("0.50x", "<= 1.25x")
    );
    assert_eq!(new.met, None);
    let text = new.limit.unwrap_or_default();
    assert!(
        text.starts_with(
            "NOT A FLOOR: the bare calls were slower than fsgate (fsgate 0.200 ms, floor 0.400 ms)"
        ),
        "{text}"
    );
    assert!(text.contains("fsgate 1.67x the `fdatasync` p50"), "{text}");
    assert!(text.ends_with("only echoes it: 60 us"), "{text}");
    // 1.1 ms against the floor's 0.8 ms: 1.38x, not met.
    let over = row("overwrite_serial p50 / its floor's");
    assert_eq!((over.measured.as_str(), over.met), ("1.38x", Some(false)));
    let text = over.limit.unwrap_or_default();
    assert!(
        text.starts_with("fsgate 1.100 ms, floor 0.800 ms; fsgate 9.17x the `fdatasync` p50"),
        "{text}"
    );
    // 1,200/s against the bare calls' 1,500/s: 1.25x, met.
    let over = row("overwrite, 32 in flight: bare calls' ops/s / fsgate's");
    assert_eq!((over.measured.as_str(), over.met), ("1.25x", Some(true)));
    let text = over.limit.unwrap_or_default();
    assert!(
        text.starts_with("fsgate 1200/s, floor 1500/s; bare calls:"),
        "{text}"
    );
    assert!(text.contains("; the reference 1000/s (fsgate 1.20x it); the durable replace alone (no backup, no records): 1900/s; every backup appended to one file, its syncs shared: 1700/s"), "{text}");
    // No limit where the machine sets none.
    assert_eq!(limit("list ops/s"), "");
    assert!(
        report
            .markdown()
            .contains("| what this machine allows (same run) |")
    );
}

#[test]
fn bench_driver_fails_a_workload_whose_answers_are_wrong() {
    let work = tempfile::tempdir().expect("tempdir");
    let sz = tree::Sizes {
        small_files: 5,
        list_entries: 3,
        tree_dirs: 1,
        tree_files_per_dir: 3,
        tree_file_bytes: 256,
        big_bytes: 1024,
    };
    let root = work.path().join("ws");
    tree::build(&root, &sz).expect("tree");
    let root = root.canonicalize().expect("canonical root");
    // The server now holds content the driver does not expect.
    std::fs::write(
        root.join("files/f3.txt"),
        "changed behind the driver's back\n",
    )
    .expect("write");
    std::fs::write(root.join("list/extra.txt"), "x\n").expect("write");
    let spec = Spec::Fsgate {
        bin: env!("CARGO_BIN_EXE_fsgate").into(),
        door: Door::Mcp,
        policy: None,
    };
    runtime().block_on(async {
        let srv = server::start(&spec, &root, &work.path().join("state"))
            .await
            .expect("fsgate starts");
        let cx = Ctx {
            root: &root,
            sz: &sz,
            rep: 0,
        };
        let read = workloads::read_small(&srv, &cx, 10, 2).await;
        assert!(
            matches!(read, Err(Error::Answer(ref m)) if m.contains("f3.txt")),
            "{read:?}"
        );
        let list = workloads::list(&srv, &cx, 1).await;
        assert!(matches!(list, Err(Error::Answer(_))), "{list:?}");
        // Unchanged files still check.
        let stat = workloads::stat(&srv, &cx, 3).await;
        assert!(stat.is_ok(), "{stat:?}");
        srv.stop().await;
    });
}
