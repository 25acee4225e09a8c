//! The gateway: one value owning the policy, the workspace, the backups and the audit
//! log, running each request through path -> policy -> workspace -> audit.
//!
//! # Layer
//!
//! Owns: one request, whichever door it came through: the operation ([`ops::Op`]), the
//! path's resolution, the policy's decision, the backup, the intent and outcome
//! records, the execution, and git staging ([`vcs`]); a client's roots as directories
//! of the workspace; the change watcher ([`watch`]): what changed, and which of it a
//! client may see. Depends on every layer below but the sandbox. May not touch: wire
//! formats (the doors own them).

pub mod agent_sessions;
pub mod ask;
mod batch;
mod budget;
mod build;
mod change;
mod checks;
mod crash;
mod door;
mod facts;
mod gateway;
mod growth;
mod handle;
mod listing;
mod members;
mod names;
mod notes;
pub mod ops;
mod path_lock;
mod paths;
mod read;
mod reconcile;
mod record;
mod regex_bound;
mod reload;
mod request;
mod roots;
mod route;
mod rules;
mod saver;
mod scope;
mod serve;
pub mod vcs;
pub mod watch;
mod write;

pub use batch::Batch;
pub use budget::{Lease, escape_json_bytes_into, escape_json_into, json_string_len, json_text_len};
pub use build::Parts;
pub use door::DoorSpec;
pub use gateway::{Gateway, Request};
pub use members::Members;
pub use notes::{ChangeNote, ChangeSink, ChangeWatch, subscription};
pub use ops::tree::tree_exclusions;
pub use record::Lifecycle;
pub use roots::RootError;
pub use rules::RULE_NO_REPLACE;
pub use rules::clip;
pub use scope::{Ceiling, Roots, Scope, within};
pub use serve::How;
pub use write::occurrences;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::door::PathStyle;
    use crate::facts::Facts;
    use crate::ops::Op;
    use crate::ops::output::Output;
    use crate::request::RequestCtx;
    use crate::rules::{PATH_MAX, RULE_UNINSPECTED};
    use fsgate_audit::AuditLog;
    use fsgate_audit::{AuditSettings, Fault, OpenOptions};
    use fsgate_base::error::GatewayError;
    use fsgate_base::path::RelPath;
    use fsgate_policy::Policy;
    use fsgate_workspace::Workspace;
    use serde_json::Value;
    use std::sync::Arc;

    pub(super) fn ctx() -> RequestCtx {
        RequestCtx {
            style: PathStyle::Rooted,
            session: "s".into(),
            door: &crate::door::TEST_DOOR,
            peer: "test".into(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        }
    }

    /// A gateway whose `serve` serves a request alone and lets its lease go: the
    /// tests of one operation at a time.
    pub(super) struct Alone(Gateway);

    impl std::ops::Deref for Alone {
        type Target = Gateway;
        fn deref(&self) -> &Gateway {
            &self.0
        }
    }

    impl Alone {
        pub(super) fn serve(
            &self,
            ctx: &RequestCtx,
            request: Request,
        ) -> Result<Output, GatewayError> {
            self.0.serve(ctx, request, How::alone()).0
        }
    }

    pub(super) fn gateway(ws: &std::path::Path, log_path: &std::path::Path) -> Alone {
        Alone(open(ws, log_path))
    }

    /// A gateway on the workspace `ws` with an audit log at `log_path` and backups
    /// beside it.
    pub(super) fn open(ws: &std::path::Path, log_path: &std::path::Path) -> Gateway {
        let pol = Policy::builtin_default().unwrap();
        let audit = AuditLog::open(
            log_path,
            &AuditSettings::default(),
            pol.sha256(),
            OpenOptions::default(),
        )
        .unwrap();
        let store = fsgate_backup::BackupStore::open(
            &log_path.with_extension("backups"),
            &fsgate_backup::BackupSettings::default(),
        )
        .unwrap();
        Gateway::new(pol, Workspace::open(ws).unwrap()).with_parts(Parts {
            audit: Some(audit),
            backups: Some(store),
            vcs: None,
        })
    }

    pub(super) fn records(log_path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(log_path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &Value| r["kind"] == "request" || r["kind"] == "intent")
            .collect()
    }

    fn write(path: &str, content: &str) -> Op {
        Op::Write(ops::Write::text(path.into(), content.into()))
    }

    #[test]
    fn a_path_or_pattern_over_path_max_is_refused_before_any_work_and_recorded_cut() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        let long = format!("/{}", "d/".repeat(PATH_MAX / 2));
        for op in [
            write(&long, "x"),
            Op::Mkdir(ops::Mkdir {
                path: long.clone(),
                recursive: true,
            }),
            Op::Rename(ops::Rename {
                from: "/a".into(),
                to: long.clone(),
                replace: true,
            }),
            Op::Glob(ops::Glob {
                pattern: "*".repeat(PATH_MAX + 1),
            }),
        ] {
            match gw.serve(&ctx(), Request::Op(op.clone())) {
                Err(GatewayError::InvalidParams(m)) => assert!(m.contains("PATH_MAX"), "{m}"),
                other => panic!("{op:?}: {other:?}"),
            }
        }
        assert_eq!(
            std::fs::read_dir(ws.path()).unwrap().count(),
            0,
            "nothing made"
        );
        let recs = records(&log_path);
        assert_eq!(recs.len(), 4, "one record each, no intent: {recs:#?}");
        assert_eq!(recs[0]["details"]["cut"]["/path"]["bytes"], long.len());
        assert_eq!(recs[2]["path"], "/a");
        assert!(recs[2]["details"]["cut"].get("/path2").is_some());
        assert!(recs[3]["details"]["cut"].get("/args/pattern").is_some());
        // At the limit, a path is the workspace's to judge (here: a name too long).
        let at_limit = format!("/{}", "n".repeat(PATH_MAX - 1));
        match gw.serve(&ctx(), Request::Op(write(&at_limit, "x"))) {
            Err(e) => assert!(!e.message().contains("PATH_MAX"), "{e}"),
            Ok(_) => panic!("a 4095-byte name was written"),
        }
    }

    #[test]
    fn a_path_the_log_could_not_write_whole_is_refused_before_any_work() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        // 700 bytes, 4200 once escaped: no intent could name the file exactly.
        let controls = format!("/{}", "\u{1}".repeat(700));
        match gw.serve(&ctx(), Request::Op(write(&controls, "x"))) {
            Err(GatewayError::InvalidParams(m)) => assert!(m.contains("escaped"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 0);
        let recs = records(&log_path);
        assert_eq!(recs.len(), 1, "no intent: {recs:#?}");
        assert!(recs[0]["details"]["cut"].get("/path").is_some());
    }

    #[test]
    fn rm_r_backs_up_only_the_inspected_files() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        std::fs::create_dir(ws.path().join("t")).unwrap();
        std::fs::write(ws.path().join("t/f"), "user").unwrap();
        std::fs::write(ws.path().join("decoy"), "decoy").unwrap();
        let t = RelPath::parse_rooted("t").unwrap();
        let (pol, req) = (gw.policy(), ctx());
        let entries = gw.cx(&pol, &req).descendants(&t, "/t").unwrap();
        // Between the inspection and the backup, another file takes the name (and the
        // inspected one comes back before the removal, which then checks out).
        std::fs::rename(ws.path().join("t/f"), ws.path().join("aside")).unwrap();
        std::fs::rename(ws.path().join("decoy"), ws.path().join("t/f")).unwrap();
        let f = entries.iter().find(|e| e.path.as_str() == "t/f").unwrap();
        let mut facts = Facts::default();
        match gw.saver().backup_inspected(f, "/t", &mut facts) {
            Err(GatewayError::Refused { rule, .. }) => assert_eq!(rule, RULE_UNINSPECTED),
            other => panic!("the decoy was backed up in the user's file's place: {other:?}"),
        }
        assert!(facts.backups.is_empty());
    }

    fn tree(gw: &Gateway, path: &str, exclude: &[&str], max: usize) -> (Vec<String>, bool) {
        let op = Op::Tree(ops::Tree {
            path: path.into(),
            depth: 128,
            exclude: exclude.iter().map(|p| p.to_string()).collect(),
            max_entries: max,
            cursor: None,
        });
        match gw.handle(&ctx(), op).0.unwrap() {
            Output::Entries {
                entries, truncated, ..
            } => (
                entries
                    .iter()
                    .map(|e| e.path.as_str().to_string())
                    .collect(),
                truncated,
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_tree_shows_lexical_paths_hides_secrets_and_stops_where_asked() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        for f in [
            "real/sub/a.txt",
            "real/.env",
            "real/sub/node_modules/m.js",
            "real/z",
        ] {
            let p = ws.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::os::unix::fs::symlink("real", ws.path().join("link")).unwrap();
        let all = ["link/sub", "link/sub/a.txt", "link/sub/node_modules"];
        let (paths, cut) = tree(&gw, "/link", &[], 100);
        assert_eq!(
            paths,
            [&all[..], &["link/sub/node_modules/m.js", "link/z"]].concat()
        );
        assert!(!cut);
        let (paths, cut) = tree(&gw, "/link", &["node_modules"], 100);
        assert_eq!(paths, [&all[..2], &["link/z"]].concat());
        assert!(!cut);
        let (paths, cut) = tree(&gw, "/link", &[], 2);
        assert_eq!(paths, all[..2]);
        assert!(cut, "more entries than asked for are said to be cut");
    }

    #[test]
    fn a_change_whose_intent_cannot_be_recorded_is_not_made() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        std::fs::write(ws.path().join("old.txt"), "old").unwrap();
        for op in [
            write("/new/dir/a.txt", "changed"),
            // Staged while its intent is written: the content never takes a name.
            write("/fresh.txt", "changed"),
            write("/old.txt", "changed"),
            Op::Mkdir(ops::Mkdir {
                path: "/d".into(),
                recursive: true,
            }),
            Op::Rm(ops::Rm {
                path: "/old.txt".into(),
                recursive: false,
            }),
            Op::Rename(ops::Rename {
                from: "/old.txt".into(),
                to: "/moved.txt".into(),
                replace: true,
            }),
        ] {
            // The intent is the first record the change appends: it fails.
            gw.audit().unwrap().inject_faults(Fault::Write, 1);
            let err = gw.handle(&ctx(), op.clone()).0.unwrap_err();
            assert_eq!(err.code(), fsgate_base::error::code::INTERNAL, "{op:?}");
            assert!(err.message().contains("nothing was changed"), "{err:?}");
            // A read clears the failure for the next round.
            gw.handle(
                &ctx(),
                Op::Stat(ops::Stat {
                    path: "/".into(),
                    follow: true,
                }),
            )
            .0
            .unwrap();
        }
        let mut names: Vec<_> = std::fs::read_dir(ws.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["old.txt"]);
        assert_eq!(
            std::fs::read_to_string(ws.path().join("old.txt")).unwrap(),
            "old"
        );
        assert!(records(&log_path).iter().all(|r| r["kind"] == "request"));
    }

    #[test]
    fn a_change_has_a_durable_intent_then_an_outcome_naming_it() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        std::fs::write(ws.path().join("a.txt"), "old").unwrap();
        gw.handle(&ctx(), write("/a.txt", "new")).0.unwrap();
        let recs = records(&log_path);
        assert_eq!(recs.len(), 2, "{recs:?}");
        let (intent, outcome) = (&recs[0], &recs[1]);
        assert_eq!(intent["kind"], "intent");
        assert_eq!(intent["op"], "write_text_file");
        assert_eq!(intent["path"], "a.txt");
        assert_eq!(
            intent["sha256"],
            hex::encode(fsgate_base::sha256::Sha256::digest(b"new"))
        );
        assert_eq!(
            intent["args"]["oldSha256"],
            hex::encode(fsgate_base::sha256::Sha256::digest(b"old"))
        );
        assert!(intent["backup"].is_string());
        assert_eq!(outcome["kind"], "request");
        assert_eq!(outcome["outcome"], "ok");
        assert_eq!(outcome["args"]["intent"], intent["seq"]);
        assert!(intent["args"].get("realPath").is_none(), "{intent}");
        // Through a symlinked directory: the intent says where the change really is.
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::os::unix::fs::symlink("src", ws.path().join("link")).unwrap();
        gw.handle(&ctx(), write("/link/b.txt", "b")).0.unwrap();
        let recs = records(&log_path);
        let intent = recs.iter().rev().find(|r| r["kind"] == "intent").unwrap();
        assert_eq!(intent["path"], "link/b.txt");
        assert_eq!(intent["args"]["realPath"], "src/b.txt", "{intent}");
    }

    /// A gateway on a new workspace and log, which `threads` threads have each sent
    /// `per` writes at once, the `i`th of thread `t` to `path(t, i)`.
    fn written_at_once(
        threads: usize,
        per: usize,
        path: fn(usize, usize) -> String,
    ) -> (Arc<Gateway>, std::path::PathBuf, [tempfile::TempDir; 2]) {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let log_path = state.path().join("audit.jsonl");
        let gw = Arc::new(open(ws.path(), &log_path));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let gw = Arc::clone(&gw);
                std::thread::spawn(move || {
                    for i in 0..per {
                        let op = write(&path(t, i), &format!("{t}/{i}"));
                        gw.handle(&ctx(), op).0.unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        (gw, log_path, [ws, state])
    }

    /// Writes at once from many threads (so that outcomes are queued while another
    /// thread leads the log, and while none does): every outcome says its entry was
    /// pending, a later record names each intent durable, and a new start finds none
    /// open.
    #[test]
    fn concurrent_writes_have_every_entry_named_durable_by_a_later_record() {
        let (gw, log_path, _dirs) =
            written_at_once(8, 25, |t, i| format!("/f{}.txt", (t * 25 + i) % 40));
        gw.audit().unwrap().close().unwrap();
        let all: Vec<Value> = std::fs::read_to_string(&log_path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let outcomes: Vec<&Value> = all
            .iter()
            .filter(|r| r["kind"] == "request" && r["op"] == "write_text_file")
            .collect();
        assert_eq!(outcomes.len(), 200);
        for o in &outcomes {
            assert_eq!(o["details"][fsgate_audit::ENTRY_PENDING], true, "{o}");
            let (intent, seq) = (&o["args"]["intent"], o["seq"].as_u64().unwrap());
            let named = all.iter().any(|r| {
                r["seq"].as_u64().unwrap() > seq
                    && r["details"][fsgate_audit::ENTRIES_DURABLE]
                        .as_array()
                        .is_some_and(|a| a.contains(intent))
            });
            assert!(named, "no later record names intent {intent} durable");
        }
        drop(gw);
        let again = AuditLog::open(
            &log_path,
            &AuditSettings::default(),
            "0",
            OpenOptions::default(),
        )
        .unwrap();
        assert!(
            again.open_intents().is_empty(),
            "{:?}",
            again.open_intents()
        );
    }

    /// Writes of one path from many threads follow each other whole: each write's
    /// intent comes after the outcome of the write before it (the path stays held until
    /// that write's new name is durable, after its outcome is queued).
    #[test]
    fn writes_of_one_path_are_announced_only_after_the_previous_one_is_recorded() {
        let (_gw, log_path, _dirs) = written_at_once(4, 20, |_, _| "/one.txt".into());
        let recs = records(&log_path);
        let outcome_of = |intent: &Value| {
            recs.iter()
                .find(|r| r["kind"] == "request" && r["args"]["intent"] == intent["seq"])
                .and_then(|r| r["seq"].as_u64())
                .unwrap()
        };
        let intents: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "intent").collect();
        assert_eq!(intents.len(), 80);
        for pair in intents.windows(2) {
            let next = pair[1]["seq"].as_u64().unwrap();
            assert!(
                outcome_of(pair[0]) < next,
                "intent {next} was announced before the outcome of intent {}",
                pair[0]["seq"]
            );
        }
    }

    #[test]
    fn a_change_whose_outcome_cannot_be_recorded_says_it_was_made() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        // The intent is written; the outcome's write fails.
        gw.audit().unwrap().inject_faults_after(Fault::Write, 1, 1);
        let err = gw.handle(&ctx(), write("/a.txt", "changed")).0.unwrap_err();
        assert_eq!(err.code(), fsgate_base::error::code::INTERNAL);
        assert!(err.message().contains("the change was made"), "{err:?}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
            "changed"
        );
        let recs = records(&log_path);
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert_eq!(recs[0]["kind"], "intent");
    }
}
