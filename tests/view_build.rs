//! Builds through `fsgate run`'s view, inside the default wall: `make` with the system's
//! C compiler, and `cargo` from a rustup installation in the user's home (which the wall
//! finds on PATH and lets the command run). Each builds, runs its tests, records every
//! file it made naming the process, and finds its second build up to date (the view's
//! timestamps are the files' own).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::view::{SYSTEM_PATH, ViewWs, finished_within, text, view_ws};

/// Builds are slower than the other commands here: a cold `cargo build` and link.
const BUILD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

view_ws!(
    /// A workspace with its state directory beside it.
    Ws
);

impl Ws {
    fn new() -> Ws {
        Ws(ViewWs::new("fsgate-build-ws", "fsgate-build-state"))
    }

    /// `fsgate run -- sh -c SCRIPT` inside the default wall, with `path` as PATH and
    /// the given variables.
    fn sh(&self, path: &str, vars: &[(&str, PathBuf)], script: &str) -> Output {
        let mut cmd = Command::new(crate::common::bin());
        cmd.arg("run")
            .args(self.state_args())
            .args(["--", "sh", "-c", script])
            .env("PATH", path)
            .env("XDG_STATE_HOME", self.xdg_state())
            .current_dir(&self.root);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        finished_within(cmd, BUILD_DEADLINE)
    }

    /// The changes recorded for `path` (intents and their outcomes are one change: the
    /// outcomes), and the processes they name.
    fn writers_of(&self, path: &str) -> Vec<String> {
        self.records()
            .iter()
            .filter(|r| r["kind"] == "request" && r["path"] == path && r["decision"] == "allow")
            .filter(|r| r["op"] != "open" && r["op"] != "reads")
            .filter_map(|r| r["peer"].as_str().map(str::to_owned))
            .collect()
    }
}

fn written(ws: &Ws, path: &str) -> Vec<String> {
    let writers = ws.writers_of(path);
    let records: Vec<Value> = ws.records();
    assert!(
        !writers.is_empty(),
        "no change of {path} recorded: {} records",
        records.len()
    );
    writers
}

const MAKEFILE: &str = "build/hello: hello.c\n\tmkdir -p build\n\tcc -O0 -o build/hello hello.c\n\ntest: build/hello\n\t./build/hello > build/result.txt\n\tgrep -qx 'hello, view' build/result.txt\n";

/// `make test` through the view: the compiler's output is a recorded change naming the
/// process that wrote it, the test passes, and a second `make` finds nothing to do.
#[test]
fn view_make_builds_and_tests_a_c_program_inside_the_wall() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("Makefile"), MAKEFILE).expect("write");
    std::fs::write(
        ws.root.join("hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"hello, view\"); return 0; }\n",
    )
    .expect("write");
    let out = ws.sh(SYSTEM_PATH, &[], "make test && make build/hello");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("'build/hello' is up to date"),
        "the second make rebuilt: {stdout}"
    );
    let hello = written(&ws, "build/hello");
    assert!(
        hello.iter().any(|p| p.contains("ld")),
        "build/hello not named as the linker's: {hello:?}"
    );
    written(&ws, "build/result.txt");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("build/result.txt")).expect("result"),
        "hello, view\n"
    );
}

/// The PATH entry that holds rustup's proxies (or, without rustup, `cargo` itself).
fn cargo_dir() -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let holding = |name: &str| dirs.iter().find(|d| d.join(name).is_file()).cloned();
    holding("rustup")
        .or_else(|| holding("cargo"))
        .expect("cargo on PATH: the tests are run by it")
}

/// `cargo build` and `cargo test` of a small crate through the view, inside the default
/// wall: rustup's proxies and toolchains found on PATH are let run, cargo's own home is
/// the wall's scratch HOME (not the user's `~/.cargo`, whose registry token stays out of
/// reach), what the build made is recorded naming rustc, and a second build is fresh.
#[test]
fn view_cargo_builds_and_tests_a_small_crate_inside_the_wall() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root.join("src")).expect("mkdir");
    std::fs::write(
        ws.root.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .expect("write");
    std::fs::write(
        ws.root.join("src/main.rs"),
        "fn twice(x: u32) -> u32 { x * 2 }\nfn main() { println!(\"{}\", twice(21)); }\n#[test]\nfn doubles() { assert_eq!(twice(2), 4); }\n",
    )
    .expect("write");
    let path = format!("{}:{SYSTEM_PATH}", cargo_dir().display());
    let mut vars = vec![];
    if let Some(home) = std::env::var_os("HOME") {
        vars.push(("HOME", PathBuf::from(home)));
    }
    if let Some(r) = std::env::var_os("RUSTUP_HOME") {
        vars.push(("RUSTUP_HOME", PathBuf::from(r)));
    }
    let dir = cargo_dir();
    // rustup's own home beside its proxies (`~/.cargo`): out of reach but for `bin`.
    let cargo_home = dir.join("rustup").is_file().then(|| dir.join(".."));
    let listed = cargo_home.as_ref().map_or(String::new(), |h| {
        format!("; ls '{}' >/dev/null 2>&1; echo listed=$?", h.display())
    });
    let script = format!(
        "cargo build --offline -q && ./target/debug/tiny && cargo test --offline -q 2>&1 && cargo build --offline -v 2>&1{listed}"
    );
    let out = ws.sh(&path, &vars, &script);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(stdout.starts_with("42\n"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("Fresh tiny"),
        "the second build was not fresh: {stdout}"
    );
    if cargo_home.is_some() {
        assert!(
            stdout.contains("listed=2"),
            "the user's cargo home was listed: {stdout}"
        );
    }
    let binary = written(&ws, "target/debug/tiny");
    assert!(
        binary
            .iter()
            .any(|p| p.contains("rustc") || p.contains("cc") || p.contains("ld")),
        "target/debug/tiny not named as the build's: {binary:?}"
    );
}

/// A wheel of one module, made by hand (no build backend, no network).
const WHEEL: &str = r#"import zipfile
with zipfile.ZipFile("hello_view-1.0-py3-none-any.whl", "w") as z:
    z.writestr("hello_view/__init__.py", "def greet():\n    return 'hello, view'\n")
    z.writestr("hello_view-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-view\nVersion: 1.0\n")
    z.writestr("hello_view-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("hello_view-1.0.dist-info/RECORD", "")
"#;

/// `python3 -m venv` with pip, through the view inside the default wall: `ensurepip`
/// installs pip from its own wheels (pip reads `/etc/debian_version` on every install,
/// and ships its CA bundle as `cacert.pem`), and that pip installs a package, each file
/// recorded naming the process. Nothing is refused but the venv's absolute link to the
/// base interpreter (copied instead).
#[test]
fn view_python_venv_gets_pip_and_installs_a_package_inside_the_wall() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("make_wheel.py"), WHEEL).expect("write");
    let out = ws.sh(
        SYSTEM_PATH,
        &[],
        "set -e
         python3 -m venv v
         python3 make_wheel.py
         v/bin/pip install -q --no-index hello_view-1.0-py3-none-any.whl
         v/bin/python -c 'import hello_view; print(hello_view.greet())'",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.ends_with("hello, view\n"), "{stdout}\n{stderr}");
    let records = ws.records();
    let changed = |suffix: &str| {
        records.iter().any(|r| {
            r["kind"] == "request"
                && r["decision"] == "allow"
                && r["op"] == "write_text_file"
                && r["outcome"] == "ok"
                && r["path"].as_str().is_some_and(|p| p.ends_with(suffix))
        })
    };
    assert!(
        changed("/certifi/cacert.pem"),
        "pip's CA bundle not recorded"
    );
    assert!(
        changed("/site-packages/hello_view/__init__.py"),
        "the package's module not recorded"
    );
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["decision"] == "deny")
        .collect();
    assert!(
        refused.iter().all(|r| r["rule"] == "workspace-link-target"),
        "refused: {refused:?}"
    );
}

/// Java inside the wall: Debian's JDK reads its configuration (`java.security`) through
/// links into `/etc/java-*`, which the wall lets it read; `javac` compiles a class
/// through the view (recorded naming it) and `java` runs it.
#[test]
fn view_javac_compiles_and_java_runs_a_class_inside_the_wall() {
    let ws = Ws::new();
    std::fs::write(
        ws.root.join("Hello.java"),
        "public class Hello { public static void main(String[] a) { System.out.println(\"hello, view\"); } }\n",
    )
    .expect("write");
    let out = ws.sh(SYSTEM_PATH, &[], "javac Hello.java && java Hello");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "hello, view\n", "{stderr}");
    let class = written(&ws, "Hello.class");
    assert!(
        class.iter().any(|p| p.contains("java")),
        "Hello.class not named as javac's: {class:?}"
    );
}
