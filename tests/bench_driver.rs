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
        bare_new_us: 600.0,
        bare_new_premade_us: 420.0,
        bare_overwrite_us: 960.0,
        bare_overwrite_premade_us: 720.0,
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
    // Intent (the 400-byte probe's p50, 120 us), then the outcome (120) with the
    // directory (90) beside it: 240 us against the 4 KiB probe's 120 us; then the bare
    // write of each kind against it.
    for (w, bare) in [
        (
            "write_new_serial p50",
            "0.600 ms = 5.00x (its inode made ahead, off the write's path, as fsgate's spare files are: 0.420 ms = 3.50x); that, plus a request's round trip through pipes to a process that only echoes it (60 us): 0.480 ms = 4.00x",
        ),
        (
            "overwrite_serial p50",
            "0.960 ms = 8.00x (its two inodes made ahead, off the write's path, as fsgate's spare files are: 0.720 ms = 6.00x); that, plus a request's round trip through pipes to a process that only echoes it (60 us): 0.780 ms = 6.50x",
        ),
    ] {
        let chain = limit(w);
        assert!(chain.starts_with("2 syncs one after another:"), "{chain}");
        assert!(chain.contains("at least 0.240 ms = 2.00x;"), "{chain}");
        assert!(chain.ends_with(&format!("no server: {bare}")), "{chain}");
    }
    // The overwrites with 32 in flight done bare, against the reference's 1,000/s.
    assert_eq!(
        limit("overwrite ops/s"),
        "the same overwrites' bare system calls (two records, a backup in its shard, the content, the rename, their syncs; the log's and the directory's syncs shared), 32 threads, no server: 1500/s = 1.50x the reference (1100 us of CPU each); the durable replace alone (the content synced, the rename, the directory synced; no backup, no records): 1900/s = 1.90x; fsgate's bare calls with every backup appended to one file, its syncs shared (no inode, no directory sync per backup): 1700/s = 1.70x"
    );
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
