//! git through `fsgate run`'s view (docs/run.md, "git through the view"): hidden by the
//! default policy; under policies/examples/git-through-the-view.toml the repository is
//! readable and writable, its hooks and config never.

use std::process::Output;

use serde_json::Value;

use crate::common::view::{ViewWs, git_policy, host_git, text, view_ws};

view_ws! {
    /// A git repository (one commit of `a.txt`, `.env` excluded) with its state dir beside it.
    Repo
}

impl Repo {
    fn new() -> Repo {
        let ws = ViewWs::new("fsgate-view-git", "fsgate-view-git-state");
        let root = &ws.root;
        std::fs::write(root.join(".env"), "TOKEN=hunter2-git\n").expect("write");
        std::fs::write(root.join("a.txt"), "hello\n").expect("write");
        host_git(root, &["init", "-q", "-b", "main", "."]);
        host_git(root, &["add", "a.txt"]);
        host_git(root, &["commit", "-qm", "first"]);
        std::fs::write(root.join(".git/info/exclude"), ".env\n").expect("exclude");
        Repo(ws)
    }

    /// `sh -c SCRIPT` through the view, with the policy that lets git in.
    fn sh(&self, script: &str) -> Output {
        self.sh_under(Some(&git_policy()), script)
    }
}

#[test]
fn view_git_status_add_commit_switch_checkout_stash_and_log_work_under_the_git_policy() {
    let repo = Repo::new();
    let out = repo.sh("set -e
         echo two > b.txt
         git status --short
         git add b.txt
         git commit -qm second
         git switch -q -c feature
         echo feature >> a.txt
         git commit -qam third
         git checkout -q main
         cat a.txt
         echo wip >> a.txt
         git stash -q
         cat a.txt
         git stash pop -q
         git diff --stat
         git checkout -q -- a.txt
         git log --format=%s --all
         git status --short");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(
        stdout,
        "?? b.txt\nhello\nhello\n a.txt | 1 +\n 1 file changed, 1 insertion(+)\nthird\nsecond\nfirst\n",
        "{}",
        text(&out.stderr)
    );
    // The repository is whole and holds the three commits, seen from the host.
    host_git(&repo.root, &["fsck", "--strict", "--no-progress"]);
    assert_eq!(
        host_git(&repo.root, &["log", "--format=%s", "feature"]),
        "third\nsecond\nfirst\n"
    );
    assert_eq!(host_git(&repo.root, &["status", "--short"]), "");
    // Every change under .git was recorded as one, naming git.
    let records = repo.records();
    assert!(records.iter().any(|r| {
        r["kind"] == "request"
            && r["decision"] == "allow"
            && r["path"]
                .as_str()
                .is_some_and(|p| p.starts_with(".git/refs/heads/"))
            && r["peer"]
                .as_str()
                .is_some_and(|p| p.contains("argv [\"git\","))
    }));
}

#[test]
fn view_a_hook_or_the_config_written_through_the_view_is_refused_and_recorded() {
    let repo = Repo::new();
    let config = std::fs::read(repo.root.join(".git/config")).expect("config");
    let out = repo.sh("echo '#!/bin/sh' > .git/hooks/pre-commit && exit 10
         cp .git/config c && echo '[core]' >> c && mv c .git/config && exit 11
         git config core.fsmonitor 'touch pwned' && exit 12
         rm .git/hooks/pre-commit.sample && exit 13
         mkdir -p sub && cd sub && git init -q . && exit 14
         cat ../.git/config > /dev/null || exit 15
         exit 0");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read(repo.root.join(".git/config")).expect("config"),
        config
    );
    assert!(!repo.root.join(".git/hooks/pre-commit").exists());
    assert!(repo.root.join(".git/hooks/pre-commit.sample").exists());
    assert!(!repo.root.join("sub/.git/config").exists());
    let records = repo.records();
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["decision"] == "deny" && r["rule"] == "git-host-code")
        .collect();
    for path in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".git/hooks/pre-commit.sample",
        "sub/.git/hooks",
    ] {
        assert!(
            refused
                .iter()
                .any(|r| r["path"] == path || r["path2"] == path),
            "no refusal of {path}: {refused:?}"
        );
    }
}

/// The default policy hides `.git` through the view as at every door: git finds no
/// repository, and a listing does not show it.
#[test]
fn view_the_default_policy_hides_git_from_the_command() {
    let repo = Repo::new();
    let out = repo.sh_under(None, "ls -a; git status 2>&1; exit 0");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(!stdout.lines().any(|l| l == ".git"), "{stdout}");
    assert!(stdout.contains("not a git repository"), "{stdout}");
}

/// Under the git policy, git's HEAD is never removed (without it git would look for a
/// repository elsewhere, e.g. the workspace itself as a bare one).
#[test]
fn view_git_head_cannot_be_removed_under_the_git_policy() {
    let repo = Repo::new();
    let out = repo
        .sh("rm .git/HEAD 2>&1; mv .git/HEAD .git/HEAD.old 2>&1; test -f .git/HEAD && echo kept");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("kept"), "{stdout}\n{}", text(&out.stderr));
    assert!(repo.root.join(".git/HEAD").is_file());
    let refused = repo
        .records()
        .into_iter()
        .filter(|r| r["decision"] == "deny" && r["rule"] == "git-head")
        .count();
    assert!(refused >= 2, "{refused} refusals recorded");
}

/// Undoing a run that switched branches puts HEAD back, although the git policy never
/// lets HEAD be taken away (git renames `HEAD.lock` over it; undoing that rename would
/// move HEAD away): HEAD's old content is written over it instead.
#[test]
fn view_undo_of_a_branch_switch_puts_head_back_under_the_git_policy() {
    use crate::common::bin;
    use crate::common::view::{finished, session_of};
    let repo = Repo::new();
    let out = repo.sh("set -e
         git switch -q -c feature
         echo f > f.txt
         git add f.txt
         git commit -qm feature");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(repo.root.join(".git/HEAD")).expect("HEAD"),
        "ref: refs/heads/feature\n"
    );
    let mut undo = std::process::Command::new(bin());
    undo.arg("undo")
        .args(repo.state_args())
        .arg("--policy")
        .arg(git_policy())
        .args(["--session", &session_of(&out)]);
    let undone = finished(undo);
    let report = text(&undone.stdout);
    assert!(
        undone.status.success(),
        "{report}\n{}",
        text(&undone.stderr)
    );
    assert!(report.contains(" 0 failed"), "{report}");
    assert_eq!(
        std::fs::read_to_string(repo.root.join(".git/HEAD")).expect("HEAD"),
        "ref: refs/heads/main\n"
    );
    assert!(!repo.root.join(".git/HEAD.lock").exists());
    assert_eq!(host_git(&repo.root, &["log", "--format=%s"]), "first\n");
    assert_eq!(host_git(&repo.root, &["status", "--short"]), "");
}
