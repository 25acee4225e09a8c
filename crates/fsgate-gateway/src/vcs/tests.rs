use crate::ops;
use std::path::Path;

use crate::vcs::*;

fn repo_with_subdir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    git2::Repository::init(&top).unwrap();
    let ws = top.join("a/b");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(top.join("a/.gitignore"), "*.o\n").unwrap();
    (dir, top, ws)
}

#[test]
fn a_subdirectory_maps_to_repository_paths_and_needs_the_git_dir() {
    let (_d, top, ws) = repo_with_subdir();
    let s = Stager::discover(&ws).unwrap();
    assert_eq!(s.workdir(), top);
    let p = RelPath::parse_rooted("/x y/-z").unwrap();
    assert_eq!(s.in_repo(&p), "a/b/x y/-z");
    let (rw, ro) = s.grants(&ws);
    assert_eq!(rw, [top.join(".git")]);
    assert_eq!(ro, [top.join("a/.gitignore")]);
    // At the root, the git dir is inside the workspace: no rule of its own.
    let at_root = Stager::discover(&top).unwrap();
    assert!(at_root.grants(&top).0.is_empty());
}

#[test]
fn no_work_tree_inside_the_git_dir_or_outside_any_repo() {
    let (_d, top, _ws) = repo_with_subdir();
    let inside = top.join(".git/refs");
    assert!(matches!(
        Stager::discover(&inside),
        Err(VcsError::NoWorkTree(_))
    ));
    let plain = tempfile::tempdir().unwrap();
    let plain = plain.path().canonicalize().unwrap();
    // Unless the temp dir itself lies in a repository.
    if git2::Repository::discover(&plain).is_err() {
        assert!(matches!(
            Stager::discover(&plain),
            Err(VcsError::NoWorkTree(_))
        ));
    }
}

fn policy(extra: &str) -> Policy {
    let text = format!(
        "version = 1\n{extra}\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"read\", \"write\", \"delete\", \"list\"]\npaths = [\"**\"]\n"
    );
    Policy::from_toml(&text, "test").unwrap()
}

#[test]
fn the_policy_must_keep_git_files_from_the_agent() {
    let (_d, top, _ws) = repo_with_subdir();
    let s = Stager::discover(&top).unwrap();
    assert!(
        s.check_policy(&Policy::builtin_default().unwrap(), &top)
            .is_ok()
    );
    assert!(s.check_policy(&policy(""), &top).is_ok());
    let open = policy("[secrets]\nbuiltin = false");
    let err = s.check_policy(&open, &top).unwrap_err().to_string();
    assert!(
        err.contains("`.git`") && err.contains("rule `all`"),
        "{err}"
    );
    // Outside the workspace, the agent cannot reach it whatever the policy says.
    assert!(
        s.check_policy(&open, Path::new("/nonexistent-root"))
            .is_ok()
    );
}

/// A write through a symlink changes the file it leads to: that file is staged.
#[test]
fn a_write_through_a_symlink_stages_the_file_it_changed() {
    use crate::door::PathStyle;
    use crate::ops::Op;
    use crate::request::RequestCtx;
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    git2::Repository::init(&top).unwrap();
    std::fs::write(top.join("README.md"), "old\n").unwrap();
    std::fs::create_dir(top.join("docs")).unwrap();
    std::os::unix::fs::symlink("../README.md", top.join("docs/readme.md")).unwrap();
    let pol = fsgate_policy::Policy::from_toml(
        "version = 1\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n[vcs]\nstage = true\n",
        "vcs-test",
    )
    .unwrap();
    let log = state.path().join("audit.jsonl");
    let opts = fsgate_audit::OpenOptions::default();
    let settings = fsgate_audit::AuditSettings::default();
    let audit = fsgate_audit::AuditLog::open(&log, &settings, pol.sha256(), opts).unwrap();
    let ws = fsgate_workspace::Workspace::open(&top).unwrap();
    let gw = crate::Gateway::new(pol, ws).with_parts(crate::build::Parts {
        audit: Some(audit),
        backups: None,
        vcs: Some(Stager::discover(&top).unwrap()),
    });
    let ctx = RequestCtx {
        style: PathStyle::Rooted,
        session: "s1".into(),
        door: &crate::door::TEST_DOOR,
        peer: "test".into(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    };
    let op = Op::Write(ops::Write::text("/docs/readme.md".into(), "new\n".into()));
    gw.serve(&ctx, crate::Request::Op(op), crate::How::alone())
        .0
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(top.join("README.md")).unwrap(),
        "new\n"
    );
    let repo = git2::Repository::open(&top).unwrap();
    let index = repo.index().unwrap();
    let entry = index
        .get_path(Path::new("README.md"), 0)
        .expect("README.md staged");
    let blob = repo.find_blob(entry.id).unwrap();
    assert_eq!(blob.content(), b"new\n");
}

/// A linked work tree's `.git` is a file naming its git dir: an agent that could rewrite
/// it would point the person's own git at hooks of its choosing.
#[test]
fn a_linked_work_trees_git_file_is_kept_from_the_agent_too() {
    let (_d, top, _ws) = repo_with_subdir();
    let repo = git2::Repository::open(&top).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let tree = repo.treebuilder(None).unwrap().write().unwrap();
    let tree = repo.find_tree(tree).unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
    let wt_dir = tempfile::tempdir().unwrap();
    let wt = wt_dir.path().canonicalize().unwrap().join("linked");
    repo.worktree("linked", &wt, None).unwrap();
    assert!(wt.join(".git").is_file());
    let s = Stager::discover(&wt).unwrap();
    let open = policy("[secrets]\nbuiltin = false");
    let err = s.check_policy(&open, &wt).unwrap_err().to_string();
    assert!(err.contains("`.git`"), "{err}");
    assert!(s.check_policy(&policy(""), &wt).is_ok());
}
