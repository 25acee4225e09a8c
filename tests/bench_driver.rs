//! The benchmark driver (`benches/driver`, `fsgate-bench`) against the real fsgate: its
//! quick mode runs every fsgate workload with every answer checked, and a wrong answer
//! fails a workload instead of being timed.

use fsgate_bench::Error;
use fsgate_bench::server::{self, Door, Spec};
use fsgate_bench::suite::{self, Config};
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
        "stat",
        "list",
        "tree",
        "read_big",
        "search_literal",
        "search_regex",
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
    let md = report.markdown();
    assert!(md.contains("| read_pipe | fsgate |"), "{md}");
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
