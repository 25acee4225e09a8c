//! Symbolic links through `fsgate run`'s view (docs/run.md, "Symbolic links"): a link
//! made is the gateway's `symlink` (recorded with its target, undone), one leading out
//! of the workspace is refused with EPERM, and links are shown as links, which the
//! kernel follows through the view (a link to `.env` still meets ENOENT there).

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::bin;
use crate::common::view::{
    IDENTITY, ViewWs, git_policy, requests, requests_of, session_of, text, view_ws,
};

view_ws! {
    /// A workspace holding `a.txt` and `.env` (a secret), and a state dir beside it.
    Ws
}

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-view-links", "fsgate-view-links-state");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        std::fs::write(ws.root.join(".env"), "TOKEN=view-links-secret\n").expect("write");
        Ws(ws)
    }

    /// `sh -c SCRIPT` through the view, under the policy that lets git in
    /// (policies/examples/git-through-the-view.toml: the default's rules otherwise).
    fn sh(&self, script: &str) -> Output {
        self.sh_under(Some(&git_policy()), script)
    }

    fn link(&self, name: &str) -> Option<PathBuf> {
        std::fs::read_link(self.root.join(name)).ok()
    }
}

#[test]
fn view_symlink_is_made_read_through_recorded_with_its_target_and_undone() {
    let ws = Ws::new();
    let out = ws.sh("set -e
         ln -s a.txt b
         cat b
         readlink b
         test -L b && echo is-a-link
         mkdir d
         ln -s ../a.txt d/up
         cat d/up
         ls -l b | grep -c -- '-> a.txt'");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "hello\na.txt\nis-a-link\nhello\n1\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ws.link("b"), Some(PathBuf::from("a.txt")));
    assert_eq!(ws.link("d/up"), Some(PathBuf::from("../a.txt")));
    let records = ws.records();
    let made = requests(&records, "symlink", "b");
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0]["decision"], "allow");
    assert_eq!(made[0]["args"]["target"], "a.txt");
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "intent" && r["op"] == "symlink" && r["path"] == "b"),
        "no intent for the link"
    );
    // audit show lists the link with where it leads.
    let show = Command::new(bin())
        .args(["audit", "show"])
        .arg(ws.log())
        .output()
        .expect("audit show");
    let shown = text(&show.stdout);
    assert!(
        shown
            .lines()
            .any(|l| l.contains("symlink") && l.contains("b -> a.txt")),
        "{shown}"
    );
    let table = ws.undo(&session_of(&out));
    assert!(table.contains("remove link"), "{table}");
    assert_eq!(ws.link("b"), None, "undo left the link");
    assert_eq!(ws.link("d/up"), None, "undo left the link");
    assert!(!ws.root.join("d").exists());
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("read"),
        "hello\n"
    );
}

#[test]
fn view_symlink_to_a_secret_meets_enoent_and_one_leading_out_is_refused_with_eperm() {
    let ws = Ws::new();
    // Planted before the run, by someone else: shown as links too; the one leading out
    // is followed by the process itself, outside the view.
    std::os::unix::fs::symlink("../../planted-outside", ws.root.join("planted")).expect("symlink");
    let script = r#"
import errno, os
def t(name, f):
    try:
        r = f()
        print(name, 'ok' if r is None else r)
    except OSError as e:
        print(name, errno.errorcode[e.errno])
t('link-env', lambda: os.symlink('.env', 'x'))
t('read-env', lambda: open('x').read())
t('absolute', lambda: os.symlink('/etc/passwd', 'out'))
t('climbs', lambda: os.symlink('../../outside', 'out2'))
t('dir-climbs', lambda: os.symlink('../../a.txt', 'sub/out3'))
t('exists', lambda: os.symlink('a.txt', 'a.txt'))
t('planted', lambda: os.readlink('planted'))
"#;
    std::fs::create_dir(ws.root.join("sub")).expect("mkdir");
    let out = ws.sh(&format!("python3 -c \"{}\"", script.replace('"', "\\\"")));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "link-env ok\nread-env ENOENT\nabsolute EPERM\nclimbs EPERM\n\
         dir-climbs EPERM\nexists EEXIST\nplanted ../../planted-outside\n",
        "{}",
        text(&out.stderr)
    );
    for name in ["out", "out2", "sub/out3"] {
        assert_eq!(ws.link(name), None, "{name} was made");
    }
    let records = ws.records();
    for (path, target) in [("out", "/etc/passwd"), ("out2", "../../outside")] {
        let refused = requests(&records, "symlink", path);
        assert_eq!(refused.len(), 1, "{path}: {refused:?}");
        assert_eq!(refused[0]["decision"], "deny");
        assert_eq!(refused[0]["rule"], "workspace-link-target");
        assert_eq!(refused[0]["args"]["target"], target);
    }
    // The read through `x` was decided at `.env`, and refused.
    assert!(
        requests(&records, "stat", ".env")
            .iter()
            .any(|r| r["decision"] == "deny"),
        "the secret's lookup was not recorded as refused"
    );
}

#[test]
fn view_npm_style_bin_link_runs_its_tool() {
    let ws = Ws::new();
    let out = ws.sh("set -e
         mkdir -p node_modules/pkg/bin node_modules/.bin
         printf '#!/bin/sh\\necho tool ran\\n' > node_modules/pkg/bin/x
         chmod 755 node_modules/pkg/bin/x
         ln -s ../pkg/bin/x node_modules/.bin/x
         PATH=\"$PWD/node_modules/.bin:$PATH\" x
         node -e \"const fs = require('fs');
           fs.symlinkSync('../pkg/bin/x', 'node_modules/.bin/y');
           console.log(fs.readlinkSync('node_modules/.bin/y'),
             fs.lstatSync('node_modules/.bin/y').isSymbolicLink())\"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "tool ran\n../pkg/bin/x true\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        ws.link("node_modules/.bin/x"),
        Some(PathBuf::from("../pkg/bin/x"))
    );
}

/// `python3 -m venv`: its relative links (`lib64 -> lib`, `bin/python -> python3`) are
/// made; the interpreter's own link is absolute (the base interpreter, outside the
/// workspace), refused, and venv copies the interpreter instead.
#[test]
fn view_python_venv_is_made_with_its_relative_links() {
    let ws = Ws::new();
    let out = ws.sh("set -e
         python3 -m venv --without-pip v
         v/bin/python -c 'import sys; print(sys.prefix != sys.base_prefix)'");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "True\n", "{}", text(&out.stderr));
    assert_eq!(ws.link("v/bin/python"), Some(PathBuf::from("python3")));
    if cfg!(target_pointer_width = "64") && ws.root.join("v/lib64").exists() {
        assert_eq!(ws.link("v/lib64"), Some(PathBuf::from("lib")));
    }
    let python3 = std::fs::symlink_metadata(ws.root.join("v/bin/python3")).expect("python3");
    assert!(python3.is_file(), "the interpreter was copied, not linked");
}

#[test]
fn view_git_checkout_of_a_symlink_makes_the_link_and_status_stays_clean() {
    let ws = Ws::new();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&ws.root)
            .envs(IDENTITY)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    };
    std::fs::remove_file(ws.root.join(".env")).expect("rm");
    git(&["init", "-q", "-b", "main", "."]);
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "first"]);
    git(&["switch", "-q", "-c", "links"]);
    std::os::unix::fs::symlink("a.txt", ws.root.join("latest")).expect("symlink");
    git(&["add", "latest"]);
    git(&["commit", "-qm", "a link"]);
    git(&["switch", "-q", "main"]);
    assert_eq!(ws.link("latest"), None);
    let out = ws.sh("set -e
         git checkout -q links
         readlink latest
         cat latest
         git status --porcelain");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "a.txt\nhello\n", "{}", text(&out.stderr));
    assert_eq!(ws.link("latest"), Some(PathBuf::from("a.txt")));
}

/// `ln -sf` over a link (or a file) makes a link at a temporary name and renames it over
/// the old one: the rename of a link is the gateway's `rename`, recorded with where the
/// link leads and what it replaced, and `fsgate undo` puts the old link (and the old
/// file, from its backup) back.
#[test]
fn view_ln_sf_over_a_link_or_file_replaces_it_and_undo_puts_the_old_back() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("b.txt"), "b\n").expect("write");
    std::fs::write(ws.root.join("c.txt"), "c\n").expect("write");
    std::os::unix::fs::symlink("a.txt", ws.root.join("l")).expect("symlink");
    let out = ws.sh("set -e
         ln -sf b.txt l
         readlink l
         cat l
         ln -sf b.txt c.txt
         readlink c.txt
         ls | sort | tr '\\n' ' '");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "b.txt\nb\nb.txt\na.txt b.txt c.txt l ",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ws.link("l"), Some(PathBuf::from("b.txt")));
    assert_eq!(ws.link("c.txt"), Some(PathBuf::from("b.txt")));
    let records = ws.records();
    for (to, replaced) in [("l", "link"), ("c.txt", "file")] {
        let moved: Vec<_> = requests_of(&records, "rename")
            .into_iter()
            .filter(|r| r["path2"] == to)
            .collect();
        assert_eq!(moved.len(), 1, "{to}: {moved:?}");
        assert_eq!(moved[0]["decision"], "allow", "{to}: {moved:?}");
        assert_eq!(moved[0]["args"]["target"], "b.txt", "{to}: {moved:?}");
        let intent = records
            .iter()
            .find(|r| r["kind"] == "intent" && r["op"] == "rename" && r["path2"] == to)
            .expect("the rename's intent");
        match replaced {
            "link" => assert_eq!(intent["args"]["oldTarget"], "a.txt", "{intent}"),
            _ => assert!(intent["backup"].is_string(), "{intent}"),
        }
    }
    // A dry run plans the same steps on its model of the workspace, changing nothing.
    let mut dry = Command::new(bin());
    dry.arg("undo")
        .args(ws.state_args())
        .args(["--session", &session_of(&out), "--dry-run"]);
    let planned = crate::common::view::finished(dry);
    let plan = text(&planned.stdout);
    assert!(planned.status.success(), "{plan}{}", text(&planned.stderr));
    assert!(plan.contains("l linked to a.txt again"), "{plan}");
    assert!(plan.contains("4 would be undone"), "{plan}");
    assert_eq!(ws.link("l"), Some(PathBuf::from("b.txt")));
    let table = ws.undo(&session_of(&out));
    assert!(table.contains("move back"), "{table}");
    assert_eq!(ws.link("l"), Some(PathBuf::from("a.txt")), "{table}");
    assert_eq!(ws.link("c.txt"), None, "{table}");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("c.txt")).expect("read"),
        "c\n"
    );
    let names: Vec<_> = std::fs::read_dir(&ws.root)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 5, "a temporary link was left: {names:?}");
}

/// A link is judged again where a rename puts it: `sub/l -> ../a.txt` leads inside, but
/// moved to the root it would lead out, so the move is refused with EPERM and recorded
/// as refused; a link moved to a secret's name is refused as any rename there.
#[test]
fn view_renaming_a_link_so_it_would_lead_out_is_refused_with_eperm() {
    let ws = Ws::new();
    std::fs::create_dir(ws.root.join("sub")).expect("mkdir");
    std::os::unix::fs::symlink("../a.txt", ws.root.join("sub/l")).expect("symlink");
    std::os::unix::fs::symlink("a.txt", ws.root.join("k")).expect("symlink");
    let script = r#"
import errno, os
def t(name, f):
    try:
        r = f()
        print(name, 'ok' if r is None else r)
    except OSError as e:
        print(name, errno.errorcode[e.errno])
t('out', lambda: os.rename('sub/l', 'l'))
t('same-depth', lambda: os.rename('k', 'k2'))
t('deeper', lambda: os.rename('k2', 'sub/k'))
t('secret', lambda: os.rename('sub/k', '.env'))
t('read', lambda: open('sub/l').read().strip())
"#;
    let out = ws.sh(&format!("python3 -c \"{}\"", script.replace('"', "\\\"")));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(
        lines[..3],
        ["out EPERM", "same-depth ok", "deeper ok"],
        "{shown}{}",
        text(&out.stderr)
    );
    assert!(
        lines[3].starts_with("secret ") && lines[3] != "secret ok",
        "{shown}"
    );
    assert_eq!(lines[4], "read hello", "{shown}");
    assert_eq!(ws.link("sub/l"), Some(PathBuf::from("../a.txt")));
    assert_eq!(ws.link("l"), None);
    // `k -> a.txt` moved into `sub` leads to `sub/a.txt`: inside, so allowed.
    assert_eq!(ws.link("sub/k"), Some(PathBuf::from("a.txt")));
    assert_eq!(
        std::fs::read_to_string(ws.root.join(".env")).expect("read"),
        "TOKEN=view-links-secret\n"
    );
    let records = ws.records();
    let refused = requests(&records, "rename", "sub/l");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["decision"], "deny");
    assert_eq!(refused[0]["rule"], "workspace-link-target");
    assert!(
        requests(&records, "rename", "sub/k")
            .iter()
            .any(|r| r["decision"] == "deny"),
        "the move to the secret's name was not recorded as refused"
    );
}

/// A link's target is content the link holds (readlink gives it, git commits it): one
/// holding a secret (an AWS key id, put together by the script) is refused as a write
/// of it is, EACCES, the link not made, and the record of the refusal does not hold it.
#[test]
fn view_a_link_whose_target_holds_a_secret_is_refused_and_not_recorded() {
    let ws = Ws::new();
    let script = "import errno, os\n\
        key = 'AKIA' + 'UJZDEGXDNCF32EPF'\n\
        try:\n    os.symlink(key, 'keylink'); print('made')\n\
        except OSError as e:\n    print(errno.errorcode[e.errno])\n\
        os.symlink('a.txt', 'plain'); print(os.readlink('plain'))\n";
    let out = ws.sh(&format!("python3 -c \"{script}\""));
    assert_eq!(
        text(&out.stdout),
        "EACCES\na.txt\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ws.link("keylink"), None);
    let records = ws.records();
    let refused = requests(&records, "symlink", "keylink");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["decision"], "deny");
    assert_eq!(refused[0]["rule"], "content:aws-access-key-id");
    let log = std::fs::read_to_string(ws.log()).expect("log");
    assert!(!log.contains(&["AKIA", "UJZDEGXDNCF32EPF"].concat()));
}
