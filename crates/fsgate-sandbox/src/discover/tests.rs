//! Discovery on fake installations in temp dirs, and on the real test peers.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::*;

/// A temp dir with a fake HOME and a fake interpreter prefix `tools/bin` + `tools/lib`
/// holding `node` and `npx` (not real programs: discovery never runs anything).
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    tools: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical tmp");
        let home = root.join("home");
        let tools = root.join("tools");
        for d in [home.clone(), tools.join("bin"), tools.join("lib")] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        for exe in ["node", "npx"] {
            write_exec(&tools.join("bin").join(exe), b"\x7fELF fake");
        }
        Fixture {
            _tmp: tmp,
            root,
            home,
            tools,
        }
    }

    fn path_var(&self) -> OsString {
        let mut p = self.tools.join("bin").into_os_string();
        p.push(":/usr/bin:/bin");
        p
    }

    fn run(&self, program: &str, args: &[&str], cwd: &Path) -> Result<Installation, DiscoverError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let path_var = self.path_var();
        discover(&DiscoverInput {
            program: OsStr::new(program),
            args: &args,
            cwd,
            path_var: Some(&path_var),
            home: Some(&self.home),
            rustup_home: None,
        })
    }

    /// A node project `home/proj` with package `pkg` whose `cli.js` is `.bin/x`.
    fn node_project(&self, shebang: &str) -> PathBuf {
        let proj = self.home.join("proj");
        let pkg = proj.join("node_modules/pkg");
        for d in [
            proj.join("sub"),
            pkg.clone(),
            proj.join("node_modules/.bin"),
        ] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(proj.join("package.json"), "{}").expect("write");
        std::fs::write(pkg.join("package.json"), r#"{"bin":{"x":"cli.js"}}"#).expect("write");
        write_exec(
            &pkg.join("cli.js"),
            format!("{shebang}\nconsole.log(1)\n").as_bytes(),
        );
        symlink("../pkg/cli.js", proj.join("node_modules/.bin/x")).expect("symlink");
        proj
    }
}

fn write_exec(path: &Path, content: &[u8]) {
    let mut f = std::fs::File::create(path).expect("create");
    f.write_all(content).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The grant for exactly `path`, if any.
fn grant_of<'a>(inst: &'a Installation, path: &Path) -> Option<&'a AgentGrant> {
    inst.grants.iter().find(|g| g.path == path)
}

/// Asserts a grant of exactly `path` with `access` whose source contains `why`.
fn assert_grant(inst: &Installation, path: &Path, access: AgentAccess, why: &str) {
    let g = grant_of(inst, path)
        .unwrap_or_else(|| panic!("no grant of {}: {:#?}", path.display(), inst.grants));
    assert_eq!(g.access, access, "{g:?}");
    assert!(g.source.contains(why), "{g:?} should say {why:?}");
}

/// Whether some grant reaches `path` (it or a directory above it).
fn reaches(inst: &Installation, path: &Path) -> bool {
    inst.grants.iter().any(|g| path.starts_with(&g.path))
}

/// Nothing granted is `/`, HOME or above HOME.
fn assert_home_never_whole(inst: &Installation, home: &Path) {
    for g in &inst.grants {
        assert!(!home.starts_with(&g.path), "{g:?} contains HOME");
    }
}

/// The first `python3` on PATH that is a real executable (not a pyenv shim script).
fn real_python() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter_map(|d| std::fs::canonicalize(d.join("python3")).ok())
        .find(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF")))
}

/// The convention of tests/common's `skip_or_fail`: fail under CI, else say so.
fn skip_or_fail(test: &str, reason: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(
        !(ci || std::env::var_os("FSGATE_REQUIRE_PEERS").is_some()),
        "{test} cannot run here: {reason} (required under CI / FSGATE_REQUIRE_PEERS)"
    );
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {reason}");
}

#[test]
fn venv_grants_the_venv_the_real_interpreter_and_the_base_prefix() {
    let Some(python) = real_python() else {
        return skip_or_fail("venv test", "no python3 executable on PATH");
    };
    let fx = Fixture::new();
    let proj = fx.home.join("proj");
    let venv = proj.join("venv");
    std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
    symlink(&python, venv.join("bin/python3")).expect("symlink");
    symlink("python3", venv.join("bin/python")).expect("symlink");
    let base = fx.root.join("base");
    for d in ["bin", "lib", "share"] {
        std::fs::create_dir_all(base.join(d)).expect("mkdir");
    }
    let cfg = format!("home = {}\nversion = 3\n", base.join("bin").display());
    std::fs::write(venv.join("pyvenv.cfg"), cfg).expect("write");
    std::fs::create_dir_all(proj.join("app")).expect("mkdir");
    std::fs::write(proj.join("app/agent.py"), "print(1)").expect("write");

    let inst = fx
        .run("venv/bin/python", &["-u", "app/agent.py"], &proj)
        .expect("discover");
    assert_eq!(
        inst.executable,
        venv.join("bin/python"),
        "absolute, not canonical"
    );
    assert!(reaches(&inst, &python), "{:#?}", inst.grants);
    assert_grant(&inst, &venv, AgentAccess::ReadExec, "virtualenv of");
    for d in ["bin", "lib"] {
        assert_grant(
            &inst,
            &base.join(d),
            AgentAccess::ReadExec,
            "base interpreter",
        );
    }
    assert!(
        !reaches(&inst, &base.join("share")),
        "never the prefix itself"
    );
    // The real interpreter's own prefix (e.g. /usr/bin + /usr/lib).
    let prefix = python.parent().and_then(Path::parent).expect("prefix");
    if prefix != Path::new("/") && prefix.join("lib").is_dir() {
        assert!(reaches(&inst, &prefix.join("lib")), "{:#?}", inst.grants);
    }
    // agent.py has no package root (HOME stops the search): its directory.
    assert_grant(
        &inst,
        &proj.join("app"),
        AgentAccess::ReadExec,
        "directory of",
    );
    assert!(!reaches(&inst, &proj), "{:#?}", inst.grants);
    assert_home_never_whole(&inst, &fx.home);
}

#[test]
fn node_bin_grants_node_modules_the_package_and_node_prefix() {
    let fx = Fixture::new();
    let proj = fx.node_project("#!/usr/bin/env node");
    let inst = fx
        .run("node_modules/.bin/x", &["--stdio"], &proj)
        .expect("discover");
    assert_eq!(inst.executable, proj.join("node_modules/.bin/x"));
    let env = std::fs::canonicalize("/usr/bin/env").expect("env");
    assert!(reaches(&inst, &env), "{:#?}", inst.grants);
    let node = fx.tools.join("bin/node");
    for d in ["bin", "lib"] {
        assert_grant(
            &inst,
            &fx.tools.join(d),
            AgentAccess::ReadExec,
            "interpreter prefix",
        );
    }
    assert!(reaches(&inst, &node));
    // node_modules covers the package root and the script itself.
    assert_grant(
        &inst,
        &proj.join("node_modules"),
        AgentAccess::ReadExec,
        "node_modules above",
    );
    assert!(reaches(&inst, &proj.join("node_modules/pkg/cli.js")));
    assert!(
        !reaches(&inst, &proj.join("package.json")),
        "not the project"
    );
    assert_home_never_whole(&inst, &fx.home);
}

#[test]
fn package_root_and_symlinked_node_modules_are_canonical() {
    let fx = Fixture::new();
    let store = fx.root.join("store/node_modules");
    std::fs::create_dir_all(&store).expect("mkdir");
    let app = fx.home.join("app");
    std::fs::create_dir_all(app.join("src")).expect("mkdir");
    std::fs::write(app.join("deno.json"), "{}").expect("write");
    symlink(&store, app.join("node_modules")).expect("symlink");
    std::fs::write(app.join("src/agent.mjs"), "").expect("write");
    let inst = fx
        .run("node", &["--opt=src/agent.mjs"], &app)
        .expect("discover");
    assert_grant(&inst, &app, AgentAccess::ReadExec, "package root of");
    assert_grant(&inst, &store, AgentAccess::ReadExec, "node_modules above");
}

#[test]
fn env_dash_s_shebang_finds_the_program_on_path() {
    let fx = Fixture::new();
    let dir = fx.home.join("agent");
    std::fs::create_dir_all(&dir).expect("mkdir");
    write_exec(&dir.join("run"), b"#!/usr/bin/env -S node --flag\n");
    let inst = fx.run("agent/run", &[], &fx.home).expect("discover");
    assert_grant(
        &inst,
        &fx.tools.join("bin"),
        AgentAccess::ReadExec,
        "interpreter prefix",
    );
    assert_grant(&inst, &dir, AgentAccess::ReadExec, "directory of");
    assert_eq!(env_program("-S node --flag"), Some("node"));
    assert_eq!(env_program("-Snode --flag"), Some("node"));
    assert_eq!(env_program("-i -u X A=b python3 -u"), Some("python3"));
    assert_eq!(env_program("-S"), None);
}

#[test]
fn missing_shebang_interpreter_is_an_error_naming_the_script() {
    let fx = Fixture::new();
    write_exec(
        &fx.home.join("s"),
        b"#!/usr/bin/env fsgate-no-such-interpreter\n",
    );
    let err = fx.run("./s", &[], &fx.home).expect_err("no interpreter");
    let msg = err.to_string();
    assert!(
        matches!(err, DiscoverError::Interpreter { .. })
            && msg.contains("fsgate-no-such-interpreter")
            && msg.contains(&fx.home.join("s").display().to_string()),
        "{msg}"
    );
}

#[test]
fn loose_scripts_in_home_and_tmp_are_granted_alone() {
    let fx = Fixture::new();
    std::fs::write(fx.home.join("loose.js"), "").expect("write");
    let in_tmp = PathBuf::from(format!("/tmp/fsgate-discover-{}.js", std::process::id()));
    std::fs::write(&in_tmp, "").expect("write");
    let inst = fx.run(
        "node",
        &["loose.js", in_tmp.to_str().expect("utf-8")],
        &fx.home,
    );
    let _ = std::fs::remove_file(&in_tmp);
    let inst = inst.expect("discover");
    assert_grant(
        &inst,
        &fx.home.join("loose.js"),
        AgentAccess::ReadExec,
        "command line",
    );
    assert_grant(&inst, &in_tmp, AgentAccess::ReadExec, "command line");
    assert!(
        grant_of(&inst, Path::new("/tmp")).is_none(),
        "{:#?}",
        inst.grants
    );
    assert_home_never_whole(&inst, &fx.home);
    // Even a package.json in HOME itself does not make HOME a package root.
    std::fs::write(fx.home.join("package.json"), "{}").expect("write");
    let inst = fx.run("node", &["loose.js"], &fx.home).expect("discover");
    assert_home_never_whole(&inst, &fx.home);
    assert!(reaches(&inst, &fx.home.join("loose.js")));
}

#[test]
fn data_files_are_not_granted_scripts_bring_their_root() {
    let fx = Fixture::new();
    let conf = fx.home.join("conf");
    std::fs::create_dir_all(&conf).expect("mkdir");
    std::fs::write(conf.join("settings.toml"), "k = 1").expect("write");
    std::fs::write(conf.join("package.json"), "{}").expect("write");
    let inst = fx
        .run("node", &["--config=conf/settings.toml"], &fx.home)
        .expect("discover");
    let file = conf.join("settings.toml");
    assert!(!reaches(&inst, &file), "{:#?}", inst.grants);
    assert_eq!(
        inst.data_files,
        std::slice::from_ref(&file),
        "{:?}",
        inst.notes
    );
    // The same file as a script (x bit) brings its package root.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let inst = fx
        .run("node", &["conf/settings.toml"], &fx.home)
        .expect("discover");
    assert_grant(&inst, &conf, AgentAccess::ReadExec, "package root of");
}

#[test]
fn shared_directories_are_never_granted_whole() {
    let fx = Fixture::new();
    let input = DiscoverInput {
        program: OsStr::new("x"),
        args: &[],
        cwd: &fx.root,
        path_var: None,
        home: Some(&fx.home),
        rustup_home: None,
    };
    let d = Discovery::new(&input);
    for shared in [
        "/",
        "/etc",
        "/tmp",
        "/opt",
        "/var/tmp",
        "/dev/shm",
        "/run/user/0",
    ] {
        assert!(d.is_shared(Path::new(shared)), "{shared}");
    }
    assert!(d.is_shared(&fx.home) && d.is_shared(&fx.root));
    for not in ["/opt/agent", "/usr/lib/node_modules/npm"] {
        assert!(!d.is_shared(Path::new(not)), "{not}");
    }
    assert!(!d.is_shared(&fx.home.join("proj")));
}

#[test]
fn self_referencing_shebangs_stop() {
    let fx = Fixture::new();
    let s = fx.home.join("bin/self");
    std::fs::create_dir_all(fx.home.join("bin")).expect("mkdir");
    write_exec(&s, format!("#!{}\n", s.display()).as_bytes());
    let inst = fx.run("./bin/self", &[], &fx.home).expect("bounded");
    assert!(reaches(&inst, &s), "{:#?}", inst.grants);
    assert_eq!(inst.executable, s, "absolute, without `.`");
}

#[test]
fn version_manager_shims_are_noted() {
    let fx = Fixture::new();
    let shims = fx.home.join(".pyenv/shims");
    std::fs::create_dir_all(&shims).expect("mkdir");
    write_exec(
        &shims.join("python3"),
        b"#!/usr/bin/env bash\nexec pyenv exec \"$@\"\n",
    );
    let inst = fx
        .run(".pyenv/shims/python3", &[], &fx.home)
        .expect("discover");
    assert!(
        inst.notes.iter().any(|n| n.contains("shim")),
        "{:?}",
        inst.notes
    );
    let inst = fx.run("node", &[], &fx.home).expect("discover");
    assert!(inst.notes.is_empty(), "{:?}", inst.notes);
}

/// A version manager's tree (pyenv's) that a PATH entry lies in: its program
/// directories are granted read and execute, its `version` file read, and its shim is no
/// longer noted; not the tree itself, nor a version's root or `etc/` (where npm keeps a
/// global `npmrc`); not another PATH entry under HOME (`~/bin`), nor a manager's tree that
/// is not on PATH.
#[test]
fn a_version_managers_program_dirs_on_path_are_granted() {
    let fx = Fixture::new();
    let pyenv = fx.home.join(".pyenv");
    let dirs = [
        "shims",
        "libexec",
        "versions/3.11/bin",
        "versions/3.11/lib",
        "versions/3.11/etc",
    ];
    for d in dirs {
        std::fs::create_dir_all(pyenv.join(d)).expect("mkdir");
    }
    std::fs::write(pyenv.join("version"), "3.11\n").expect("write");
    std::fs::write(pyenv.join("versions/3.11/etc/npmrc"), "//r/:_authToken=t\n").expect("write");
    std::fs::create_dir_all(fx.home.join("bin")).expect("mkdir");
    std::fs::create_dir_all(fx.home.join(".nvm/versions/node/v20/bin")).expect("mkdir");
    write_exec(
        &pyenv.join("shims/python3"),
        b"#!/usr/bin/env bash\nexec pyenv exec \"$@\"\n",
    );
    let mut path_var = pyenv.join("shims").into_os_string();
    path_var.push(format!(":{}:", fx.home.join("bin").display()));
    path_var.push(fx.path_var());
    let inst = discover_with_path("sh", &fx, &path_var);
    let granted = |p: &Path| inst.grants.iter().find(|g| g.path == p).map(|g| g.access);
    for d in ["shims", "libexec", "versions/3.11/bin", "versions/3.11/lib"] {
        assert_eq!(
            granted(&pyenv.join(d)),
            Some(AgentAccess::ReadExec),
            "{d}: {:?}",
            inst.grants
        );
    }
    assert_eq!(granted(&pyenv.join("version")), Some(AgentAccess::Read));
    for not in [
        pyenv.join("versions/3.11/etc"),
        fx.home.join("bin"),
        fx.home.join(".nvm"),
    ] {
        assert!(
            !inst
                .grants
                .iter()
                .any(|g| not.starts_with(&g.path) || g.path.starts_with(&not)),
            "{} reachable: {:?}",
            not.display(),
            inst.grants
        );
    }
    let shim = pyenv.join("shims/python3");
    let inst = discover_with_path(shim.to_str().expect("utf-8"), &fx, &path_var);
    assert!(
        !inst.notes.iter().any(|n| n.contains("shim")),
        "{:?}",
        inst.notes
    );
}

/// A PATH entry with `..` is not taken as lying in the tree it names first, and a tree
/// that is a link out of HOME is not granted.
#[test]
fn a_version_manager_entry_with_dotdot_or_a_tree_leading_out_of_home_grants_nothing() {
    let fx = Fixture::new();
    let outside = fx.root.join("outside");
    std::fs::create_dir_all(outside.join("bin")).expect("mkdir");
    symlink(&outside, fx.home.join(".rbenv")).expect("symlink");
    std::fs::create_dir_all(fx.home.join(".pyenv/bin")).expect("mkdir");
    std::fs::create_dir_all(fx.home.join("tools")).expect("mkdir");
    let path_var = format!(
        "{}:{}/.pyenv/../tools:{}",
        fx.home.join(".rbenv/bin").display(),
        fx.home.display(),
        fx.path_var().to_string_lossy()
    );
    let inst = discover_with_path("sh", &fx, OsStr::new(&path_var));
    assert!(
        !inst
            .grants
            .iter()
            .any(|g| g.path.starts_with(&outside) || g.path.starts_with(&fx.home)),
        "{:?}",
        inst.grants
    );
}

fn discover_with_path(program: &str, fx: &Fixture, path_var: &OsStr) -> Installation {
    discover(&DiscoverInput {
        program: OsStr::new(program),
        args: &[],
        cwd: &fx.home,
        path_var: Some(path_var),
        home: Some(&fx.home),
        rustup_home: None,
    })
    .expect("discover")
}

#[test]
fn symlink_loops_end_in_an_error() {
    let fx = Fixture::new();
    symlink("b", fx.home.join("a")).expect("symlink");
    symlink("a", fx.home.join("b")).expect("symlink");
    symlink("self", fx.home.join("self")).expect("symlink");
    for name in ["./a", "./self"] {
        let err = fx.run(name, &[], &fx.home).expect_err("loop");
        assert!(matches!(err, DiscoverError::SymlinkLoop { .. }), "{err}");
    }
}

#[test]
fn programs_that_cannot_run_are_clear_errors() {
    let fx = Fixture::new();
    let err = fx
        .run("fsgate-no-such-agent", &[], &fx.home)
        .expect_err("absent");
    let msg = err.to_string();
    assert!(matches!(err, DiscoverError::NotOnPath { .. }), "{msg}");
    assert!(
        msg.contains("`fsgate-no-such-agent`") && msg.contains("PATH"),
        "{msg}"
    );
    std::fs::write(fx.home.join("plain"), "").expect("write");
    let err = fx
        .run("./plain", &[], &fx.home)
        .expect_err("not executable");
    assert!(matches!(err, DiscoverError::NotExecutable { .. }), "{err}");
    let err = fx.run("./missing", &[], &fx.home).expect_err("missing");
    assert!(matches!(err, DiscoverError::Io { .. }), "{err}");
    let err = discover(&DiscoverInput {
        program: OsStr::new("agent"),
        args: &[],
        cwd: &fx.home,
        path_var: None,
        home: None,
        rustup_home: None,
    })
    .expect_err("no PATH");
    assert!(matches!(err, DiscoverError::NoPath { .. }), "{err}");
}

#[test]
fn npx_grants_the_local_bin_and_nothing_else_of_the_project() {
    let fx = Fixture::new();
    let proj = fx.node_project("#!/usr/bin/env node");
    let inst = fx
        .run("npx", &["--yes", "x", "--stdio"], &proj.join("sub"))
        .expect("discover");
    assert_eq!(inst.executable, fx.tools.join("bin/npx"));
    assert_grant(
        &inst,
        &proj.join("node_modules"),
        AgentAccess::ReadExec,
        "npx x",
    );
    assert!(
        !reaches(&inst, &proj.join("package.json")),
        "{:#?}",
        inst.grants
    );
    assert!(reaches(&inst, &fx.tools.join("bin/node")));
    assert!(!reaches(&inst, &proj.join("sub")), "{:#?}", inst.grants);
    // Not installed locally: only npx itself (it downloads into the agent's HOME).
    let inst = fx.run("npx", &["y"], &proj.join("sub")).expect("discover");
    assert!(
        inst.notes.iter().any(|n| n.contains("download")),
        "{:?}",
        inst.notes
    );
    assert!(
        !reaches(&inst, &proj.join("node_modules")),
        "{:#?}",
        inst.grants
    );
}

#[test]
fn grants_already_covered_are_dropped() {
    let g = |p: &str, access| AgentGrant {
        path: p.into(),
        access,
        source: String::new(),
    };
    assert!(covers(
        &g("/a", AgentAccess::ReadExec),
        &g("/a/b", AgentAccess::ReadExec)
    ));
    assert!(covers(
        &g("/a", AgentAccess::ReadExec),
        &g("/a", AgentAccess::Read)
    ));
    assert!(!covers(
        &g("/a", AgentAccess::Read),
        &g("/a/b", AgentAccess::ReadExec)
    ));
    assert!(!covers(
        &g("/a/b", AgentAccess::ReadExec),
        &g("/a", AgentAccess::ReadExec)
    ));
    assert!(!covers(
        &g("/ab", AgentAccess::ReadExec),
        &g("/a", AgentAccess::Read)
    ));
    let mut plan = AgentPlan::default();
    plan.grant("/usr", AgentAccess::ReadExec, "built-in system paths");
    let mut inst = Installation {
        executable: "/usr/bin/node".into(),
        grants: vec![
            g("/usr/lib", AgentAccess::ReadExec),
            g("/opt/x", AgentAccess::Read),
        ],
        notes: Vec::new(),
        data_files: Vec::new(),
        env: Vec::new(),
    };
    inst.merge_into(&mut plan);
    let paths: Vec<&Path> = plan.grants.iter().map(|g| g.path.as_path()).collect();
    assert_eq!(paths, [Path::new("/usr"), Path::new("/opt/x")]);
}

/// The test peers as `scripts/` installs them: the ACP SDK's venv and fast-agent's.
#[test]
fn real_peers_are_discovered() {
    let repo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let peers = repo.join(".peers");
    if !peers.join("acp/bin/python").exists() {
        return skip_or_fail("real_peers_are_discovered", ".peers/acp is not installed");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path_var = std::env::var_os("PATH");
    let run = |program: &Path, args: &[&str]| {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        discover(&DiscoverInput {
            program: program.as_os_str(),
            args: &args,
            cwd: repo,
            path_var: path_var.as_deref(),
            home: home.as_deref(),
            rustup_home: None,
        })
        .expect("discover")
    };
    let inst = run(&peers.join("acp/bin/python"), &["tests/peers/acp/agent.py"]);
    assert_peer_venv(&inst, &peers.join("acp"));
    let script = std::fs::canonicalize(repo.join("tests/peers/acp/agent.py")).expect("agent.py");
    assert!(reaches(&inst, &script), "{:#?}", inst.grants);

    let fast = peers.join("fast-agent/bin/fast-agent-acp");
    if !fast.exists() {
        return skip_or_fail(
            "real_peers_are_discovered",
            ".peers/fast-agent is not installed",
        );
    }
    let inst = run(&fast, &["--help"]);
    assert_peer_venv(&inst, &peers.join("fast-agent"));
}

/// The venv and its base interpreter's bin and lib (from `home =`) are granted.
fn assert_peer_venv(inst: &Installation, venv: &Path) {
    let venv = std::fs::canonicalize(venv).expect("venv");
    assert_grant(inst, &venv, AgentAccess::ReadExec, "virtualenv of");
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).expect("pyvenv.cfg");
    let home = venv_home(&cfg).expect("home =");
    let home = std::fs::canonicalize(home).expect("base bin");
    let prefix = home.parent().expect("prefix");
    for d in ["bin", "lib"] {
        assert!(reaches(inst, &prefix.join(d)), "{:#?}", inst.grants);
    }
    if let Some(h) = std::env::var_os("HOME") {
        assert_home_never_whole(inst, Path::new(&h));
    }
}

/// Proof that the grants suffice: the real peers start under a ruleset of the built-in
/// system paths and devices, a scratch dir, and the discovered grants; then each
/// discovered grant is left out in turn to show which ones the start needs.
/// Ignored: it spawns the peers many times. `cargo test --lib confined_peers -- --ignored
/// --nocapture`.
#[cfg(target_os = "linux")]
#[test]
#[ignore]
fn confined_peers_start_with_the_discovered_grants() {
    let repo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let peers = repo.join(".peers");
    if crate::kernel_abi().is_none() || !peers.join("fast-agent").exists() {
        return skip_or_fail("confined_peers", "no Landlock or no .peers");
    }
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
    let acp = peers.join("acp/bin/python");
    let fast = peers.join("fast-agent/bin/fast-agent-acp");
    let agent = ["tests/peers/acp/agent.py"];
    confined::prove(acp.as_os_str(), &agent, repo, Some(init), "protocolVersion");
    confined::prove(fast.as_os_str(), &["--help"], repo, None, "Usage");
    // npx running a local bin, with a project .npmrc holding a token it must not read.
    let fx = Fixture::new();
    let proj = fx.root.join("npxproj");
    std::fs::create_dir_all(&proj).expect("mkdir");
    std::fs::rename(fx.node_project("#!/usr/bin/env node"), &proj).expect("move");
    let cli = "#!/usr/bin/env node\nconsole.log('X-RAN', process.argv.slice(2).join(' '))\n";
    write_exec(&proj.join("node_modules/pkg/cli.js"), cli.as_bytes());
    std::fs::write(
        proj.join(".npmrc"),
        "//registry.example/:_authToken=SECRET\n",
    )
    .expect("write");
    let npx = OsStr::new("npx");
    confined::prove(npx, &["x", "hello"], &proj.join("sub"), None, "X-RAN hello");
}

#[cfg(target_os = "linux")]
mod confined {
    use std::io::Write;
    use std::process::{Command, Stdio};

    use super::*;
    use crate::{DEFAULT_AGENT_DEVICES, DEFAULT_AGENT_SYSTEM_PATHS, Protected};

    /// Discovers `program args`, asserts it starts confined to the discovered grants,
    /// then prints, for each grant, whether the start fails without it.
    pub(super) fn prove(
        program: &OsStr,
        args: &[&str],
        cwd: &Path,
        stdin: Option<&str>,
        expect: &str,
    ) {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let inst = discover(&DiscoverInput {
            program,
            args: &args,
            cwd,
            path_var: Some(OsStr::new("/usr/bin:/bin")),
            home: home.as_deref(),
            rustup_home: None,
        })
        .expect("discover");
        let run = |grants: &[AgentGrant]| start(&inst, &args, cwd, grants, stdin, expect);
        let (ok, out) = run(&inst.grants);
        assert!(
            ok,
            "{} does not start confined: {out}",
            inst.executable.display()
        );
        let mut err = std::io::stderr().lock();
        for (i, g) in inst.grants.iter().enumerate() {
            let mut fewer = inst.grants.clone();
            fewer.remove(i);
            let (started, out) = run(&fewer);
            let (path, access) = (g.path.display(), g.access.as_str());
            let verdict = if started { "not needed" } else { "NEEDED" };
            let _ = writeln!(
                err,
                "{program:?}: {path} {access} ({}): {verdict}",
                g.source
            );
            if !started {
                let tail: Vec<&str> = out.trim().lines().rev().take(2).collect();
                let _ = writeln!(err, "    without it: {}", tail.join(" | "));
            }
        }
    }

    /// Starts the installation's executable confined to the built-ins, a scratch dir and
    /// `grants`; true if its output contains `expect`, with the output.
    pub(super) fn start(
        inst: &Installation,
        args: &[OsString],
        cwd: &Path,
        grants: &[AgentGrant],
        stdin: Option<&str>,
        expect: &str,
    ) -> (bool, String) {
        let scratch = tempfile::tempdir().expect("scratch");
        let mut plan = AgentPlan::default();
        if let Some(h) = std::env::var_os("HOME") {
            plan.not_whole.push(Protected {
                path: h.into(),
                label: "home directory".into(),
            });
        }
        for p in DEFAULT_AGENT_SYSTEM_PATHS {
            plan.grant(p, AgentAccess::ReadExec, "built-in system paths");
        }
        for p in DEFAULT_AGENT_DEVICES {
            plan.grant(p, AgentAccess::ReadWrite, "built-in devices");
        }
        plan.grant(scratch.path(), AgentAccess::ReadWrite, "scratch");
        let mut inst = Installation {
            executable: inst.executable.clone(),
            grants: grants.to_vec(),
            notes: Vec::new(),
            data_files: Vec::new(),
            env: Vec::new(),
        };
        inst.merge_into(&mut plan);
        let s = scratch.path().as_os_str().to_owned();
        plan.env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), s.clone()),
            ("TMPDIR".into(), s),
        ];
        let mut cmd = Command::new(&inst.executable);
        cmd.args(args).current_dir(cwd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::confine_agent_command(&mut cmd, &plan).expect("confine");
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return (false, format!("cannot start: {e}")),
        };
        if let (Some(line), Some(mut w)) = (stdin, child.stdin.take()) {
            let _ = writeln!(w, "{line}");
        }
        let out = child.wait_with_output().expect("wait");
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (text.contains(expect), text)
    }
}

#[test]
fn a_node_modules_link_to_another_directory_is_not_granted() {
    let fx = Fixture::new();
    // `~/.ssh`, reached through a `node_modules` link above the script (as a
    // `/tmp/node_modules` planted by another user would be) and through npx's.
    let ssh = fx.home.join(".ssh");
    std::fs::create_dir_all(ssh.join(".bin")).expect("mkdir");
    write_exec(&ssh.join(".bin/x"), b"#!/bin/sh\n");
    let shared = fx.root.join("shared");
    std::fs::create_dir_all(shared.join("agent")).expect("mkdir");
    symlink(&ssh, shared.join("node_modules")).expect("symlink");
    std::fs::write(shared.join("agent/a.js"), "").expect("write");
    let inst = fx.run("node", &["agent/a.js"], &shared).expect("discover");
    assert!(!reaches(&inst, &ssh.join("id_rsa")), "{:#?}", inst.grants);
    assert!(
        inst.notes.iter().any(|n| n.contains("not a node_modules")),
        "{:?}",
        inst.notes
    );
    let inst = fx.run("npx", &["x"], &shared).expect("discover npx");
    assert!(!reaches(&inst, &ssh.join("id_rsa")), "{:#?}", inst.grants);
}

/// rustup on PATH (`~/.cargo/bin` holding `rustup`): the PATH entry and RUSTUP_HOME's
/// toolchains are granted read and execute, its `settings.toml` read, RUSTUP_HOME is
/// set to the real one; the rest of `~/.cargo` (a registry token in
/// `credentials.toml`) and of `~/.rustup` is not granted. A RUSTUP_HOME fsgate was
/// given is the one used; a policy's own RUSTUP_HOME is kept.
#[test]
fn rustup_on_path_grants_its_proxies_and_toolchains_and_sets_rustup_home() {
    let fx = Fixture::new();
    let cargo_bin = fx.home.join(".cargo/bin");
    let rustup = fx.home.join(".rustup");
    for d in [
        cargo_bin.clone(),
        rustup.join("toolchains/stable/bin"),
        rustup.join("downloads"),
    ] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    write_exec(&cargo_bin.join("rustup"), b"\x7fELF fake");
    std::fs::write(fx.home.join(".cargo/credentials.toml"), "token = \"t\"\n").expect("write");
    std::fs::write(
        rustup.join("settings.toml"),
        "default_toolchain = \"stable\"\n",
    )
    .expect("write");
    let mut path_var = cargo_bin.clone().into_os_string();
    path_var.push(":");
    path_var.push(fx.path_var());
    let inst = discover_with_path("sh", &fx, &path_var);
    let granted = |p: &Path| inst.grants.iter().find(|g| g.path == p).map(|g| g.access);
    assert_eq!(
        granted(&cargo_bin),
        Some(AgentAccess::ReadExec),
        "{:?}",
        inst.grants
    );
    assert_eq!(
        granted(&rustup.join("toolchains")),
        Some(AgentAccess::ReadExec)
    );
    assert_eq!(
        granted(&rustup.join("settings.toml")),
        Some(AgentAccess::Read)
    );
    for not in [
        fx.home.join(".cargo/credentials.toml"),
        rustup.join("downloads"),
    ] {
        assert!(
            !inst.grants.iter().any(|g| not.starts_with(&g.path)),
            "{} reachable: {:?}",
            not.display(),
            inst.grants
        );
    }
    let rustup_home = (
        OsString::from("RUSTUP_HOME"),
        rustup.clone().into_os_string(),
    );
    assert_eq!(inst.env, std::slice::from_ref(&rustup_home));
    let mut plan = AgentPlan::default();
    let mut inst = inst;
    inst.merge_into(&mut plan);
    assert_eq!(plan.env, [rustup_home]);
    let mut plan = AgentPlan::default();
    plan.env.push(("RUSTUP_HOME".into(), "/policy/said".into()));
    inst.merge_into(&mut plan);
    assert_eq!(plan.env, [("RUSTUP_HOME".into(), "/policy/said".into())]);
    // No rustup in the PATH entry: nothing of it.
    let plain = discover_with_path("sh", &fx, &fx.path_var());
    assert!(plain.env.is_empty() && granted_none(&plain, &fx.home.join(".cargo")));
}

/// A RUSTUP_HOME fsgate was given is the one granted and set; one outside HOME (a
/// system install, which the system paths decide) or HOME itself is not.
#[test]
fn rustup_home_from_the_environment_is_used_but_never_outside_or_equal_to_home() {
    let fx = Fixture::new();
    let cargo_bin = fx.home.join("rust/cargo/bin");
    std::fs::create_dir_all(&cargo_bin).expect("mkdir");
    write_exec(&cargo_bin.join("rustup"), b"\x7fELF fake");
    let mine = fx.home.join("rust/rustup");
    std::fs::create_dir_all(mine.join("toolchains")).expect("mkdir");
    let outside = fx.root.join("opt-rustup");
    std::fs::create_dir_all(outside.join("toolchains")).expect("mkdir");
    let mut path_var = cargo_bin.clone().into_os_string();
    path_var.push(":");
    path_var.push(fx.path_var());
    let with = |rustup_home: &Path| {
        discover(&DiscoverInput {
            program: OsStr::new("sh"),
            args: &[],
            cwd: &fx.home,
            path_var: Some(&path_var),
            home: Some(&fx.home),
            rustup_home: Some(rustup_home),
        })
        .expect("discover")
    };
    let inst = with(&mine);
    assert!(
        inst.grants
            .iter()
            .any(|g| g.path == mine.join("toolchains"))
    );
    assert_eq!(inst.env, [("RUSTUP_HOME".into(), mine.into_os_string())]);
    for not_granted in [outside.as_path(), fx.home.as_path()] {
        let inst = with(not_granted);
        assert!(inst.env.is_empty(), "{:?}", inst.env);
        assert!(granted_none(&inst, &cargo_bin), "{:?}", inst.grants);
    }
}

/// No grant reaches `p` or lies beneath it.
fn granted_none(inst: &Installation, p: &Path) -> bool {
    !inst
        .grants
        .iter()
        .any(|g| p.starts_with(&g.path) || g.path.starts_with(p))
}

/// Links planted in rustup's home lead nowhere: `settings.toml` or `toolchains` made a
/// link (to `~/.ssh`) is not granted, with a note; a RUSTUP_HOME that leads into a place
/// credentials live in grants nothing of rustup.
#[test]
fn links_planted_in_rustups_home_are_not_followed() {
    let fx = Fixture::new();
    let cargo_bin = fx.home.join(".cargo/bin");
    let rustup = fx.home.join(".rustup");
    let ssh = fx.home.join(".ssh");
    for d in [cargo_bin.clone(), rustup.clone(), ssh.join("toolchains")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    write_exec(&cargo_bin.join("rustup"), b"\x7fELF fake");
    std::fs::write(ssh.join("id_rsa"), "secret\n").expect("write");
    symlink("../.ssh/id_rsa", rustup.join("settings.toml")).expect("symlink");
    symlink("../.ssh", rustup.join("toolchains")).expect("symlink");
    let mut path_var = cargo_bin.clone().into_os_string();
    path_var.push(":");
    path_var.push(fx.path_var());
    let inst = discover_with_path("sh", &fx, &path_var);
    assert!(granted_none(&inst, &ssh), "{:?}", inst.grants);
    assert_eq!(
        inst.notes
            .iter()
            .filter(|n| n.contains("symbolic link: not granted"))
            .count(),
        2,
        "{:?}",
        inst.notes
    );
    // ~/.rustup itself a link into ~/.ssh: nothing of rustup is granted or set.
    std::fs::remove_file(rustup.join("settings.toml")).expect("rm");
    std::fs::remove_file(rustup.join("toolchains")).expect("rm");
    std::fs::remove_dir(&rustup).expect("rmdir");
    symlink(".ssh", &rustup).expect("symlink");
    let inst = discover_with_path("sh", &fx, &path_var);
    assert!(granted_none(&inst, &ssh), "{:?}", inst.grants);
    assert!(inst.env.is_empty(), "{:?}", inst.env);
}

/// A PATH entry that leads to `~/.cargo` itself (a planted `~/.cargo/bin -> ..` with a
/// `rustup` beside the registry token) grants nothing: `~/.cargo` holds
/// `credentials.toml`.
#[test]
fn a_rustup_path_entry_holding_cargos_credentials_grants_nothing() {
    let fx = Fixture::new();
    let cargo = fx.home.join(".cargo");
    std::fs::create_dir_all(fx.home.join(".rustup/toolchains")).expect("mkdir");
    std::fs::create_dir_all(&cargo).expect("mkdir");
    write_exec(&cargo.join("rustup"), b"\x7fELF fake");
    std::fs::write(cargo.join("credentials.toml"), "token = \"t\"\n").expect("write");
    symlink(".", cargo.join("bin")).expect("symlink");
    let mut path_var = cargo.join("bin").into_os_string();
    path_var.push(":");
    path_var.push(fx.path_var());
    let inst = discover_with_path("sh", &fx, &path_var);
    assert!(granted_none(&inst, &cargo), "{:?}", inst.grants);
    assert!(inst.env.is_empty(), "{:?}", inst.env);
}
