//! Works out where a hosted agent is installed, so its Landlock ruleset can grant
//! read+execute there and nowhere else of the operator's home directory.
//!
//! From the command line alone (nothing is executed), [`discover`] finds:
//!
//! - the program as the kernel will run it: looked up on PATH, its symlinks followed hop
//!   by hop to the file whose inode Landlock checks;
//! - the virtualenv any hop lies in (`V/bin/NAME` next to `V/pyvenv.cfg`), and the base
//!   interpreter that its `home =` line names;
//! - an interpreter's prefix (`P/bin`, `P/lib`, `P/lib64`, `P/libexec`; never `P`
//!   itself, which may be `~/.local` with keyrings in `share/`);
//! - the interpreter of a `#!` script (`/usr/bin/env NAME` looked up on PATH), repeated;
//! - scripts named on the command line (a known extension, an x bit or a `#!` line),
//!   their package root (or their directory) and every `node_modules` above them, as
//!   node looks there for modules. Other files (`--config ~/.aws/credentials`) are not
//!   granted: the command line is no policy, and `[agent] read` is;
//! - for `npx NAME` / `npm exec NAME`, a local `node_modules/.bin/NAME`;
//! - the program directories of each version manager (pyenv, nvm, ...) that a PATH
//!   entry leads into, so the interpreters a command's shell finds there run (see
//!   `managers.rs`);
//! - rustup's proxies on PATH and its toolchains, with RUSTUP_HOME set (`rustup.rs`).
//!
//! Never granted: `/`, the home directory or any directory above it.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::plan::{AgentAccess, AgentGrant, AgentPlan};

mod managers;
mod npx;
mod rustup;
#[cfg(test)]
mod tests;

/// Symbolic links followed before giving up (the kernel's own limit is 40).
const MAX_HOPS: usize = 40;
/// Nested `#!` interpreters followed (the kernel allows 4 levels).
const MAX_SHEBANG_DEPTH: usize = 4;
/// Bytes of a file read for its `#!` line (the kernel's `BINPRM_BUF_SIZE`).
const SHEBANG_MAX: usize = 256;
/// Files that mark the root of a script's package. Not `Cargo.toml`: it marks a whole
/// repository, and a script in one needs none of it.
const PACKAGE_MARKERS: &[&str] = &[
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "deno.json",
    "pyvenv.cfg",
];
/// Shared directories whose files may be granted one by one but never as a whole, on
/// top of `/` and every top-level directory (`/tmp`, `/etc`, `/home`, ...).
const SHARED_DIRS: &[&str] = &["/var/tmp", "/dev/shm"];
/// Trees in which no directory is granted as a script's package root or directory
/// (`/run/user/N` holds the operator's sockets).
const SHARED_TREES: &[&str] = &["/dev", "/proc", "/run", "/sys"];
/// Extensions of scripts, whose directory or package root is granted with them.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "py", "pyc", "pyz", "pyw", "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "rb", "pl",
    "pm", "php", "lua", "sh", "bash", "jar",
];

/// What [`discover`] looks at: the agent's command line as fsgate will start it.
#[derive(Debug, Clone, Copy)]
pub struct DiscoverInput<'a> {
    /// argv\[0\] as the user typed it.
    pub program: &'a OsStr,
    /// The agent's arguments.
    pub args: &'a [OsString],
    /// The agent's working directory (absolute).
    pub cwd: &'a Path,
    /// The PATH used to resolve a bare program name and `#!/usr/bin/env NAME`.
    pub path_var: Option<&'a OsStr>,
    /// The operator's HOME: never granted whole, nor anything above it.
    pub home: Option<&'a Path>,
    /// RUSTUP_HOME in fsgate's environment (default: `~/.rustup`).
    pub rustup_home: Option<&'a Path>,
}

/// Where the agent is installed: the grants it needs to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// The program as resolved (absolute, not canonical): what to execute.
    pub executable: PathBuf,
    /// Read+exec (or read) grants, canonical paths, each with why in `source`.
    pub grants: Vec<AgentGrant>,
    /// What the operator should know about the start (a version-manager shim, an npx
    /// package that will be downloaded), one sentence each.
    pub notes: Vec<String>,
    /// Files named on the command line that are not scripts: not granted (the caller
    /// says so of those it does not reach another way, as a workspace's files are).
    pub data_files: Vec<PathBuf>,
    /// Variables the installation needs set, as HOME is (RUSTUP_HOME: the wall's HOME
    /// is not the operator's); one the policy passes through already is kept as it is.
    pub env: Vec<(OsString, OsString)>,
}

impl Installation {
    /// Adds to `plan` the grants that the plan's existing grants do not already cover,
    /// but none that would reach a path the plan protects (the workspace, fsgate's own
    /// files): those are left out, each with a note saying so. What the policy's own
    /// entries reach is refused when the plan is checked, not here.
    pub fn merge_into(&mut self, plan: &mut AgentPlan) {
        for g in &self.grants {
            if let Some(prot) = plan.overlapped_by(g) {
                self.notes.push(format!(
                    "not granting {} ({}): it would reach the {} {}",
                    g.path.display(),
                    g.source,
                    prot.label,
                    prot.path.display()
                ));
            } else if !plan.grants.iter().any(|k| covers(k, g)) {
                plan.grants.push(g.clone());
            }
        }
        for (name, value) in &self.env {
            if !plan.env.iter().any(|(n, _)| n == name) {
                plan.env.push((name.clone(), value.clone()));
            }
        }
    }
}

/// Why the agent's installation could not be worked out.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// A bare program name matched no executable file on PATH.
    #[error(
        "program `{name}` not found: PATH was searched and none of its directories has an executable file of that name (PATH={path})"
    )]
    NotOnPath {
        /// The name looked up.
        name: String,
        /// The PATH searched.
        path: String,
    },
    /// A bare program name, and no PATH to look it up in.
    #[error("program `{name}` not found: it has no `/` and PATH is not set")]
    NoPath {
        /// The name.
        name: String,
    },
    /// The program (or a link on the way to it) cannot be read.
    #[error("program {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The program is a directory or a device, not a file.
    #[error("program {path} is not a regular file")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The program has no execute permission bit.
    #[error("program {path} is not executable (no x permission)")]
    NotExecutable {
        /// The path.
        path: PathBuf,
    },
    /// Too many symbolic links on the way to the program: a loop, most likely.
    #[error("program {path}: more than {MAX_HOPS} symbolic links to follow (a loop?)")]
    SymlinkLoop {
        /// Where following started.
        path: PathBuf,
    },
    /// The interpreter that a script's `#!` line names cannot be used.
    #[error("the interpreter in the #! line of {script}: {source}")]
    Interpreter {
        /// The script.
        script: PathBuf,
        /// What is wrong with its interpreter.
        source: Box<DiscoverError>,
    },
}

/// Works out the agent's installation from its command line; see the module docs.
///
/// Fails when the program itself (or a script's interpreter) cannot be found or run, as
/// the agent could not start then either. Files named in the arguments that do not
/// exist are ignored.
pub fn discover(input: &DiscoverInput<'_>) -> Result<Installation, DiscoverError> {
    let mut d = Discovery::new(input);
    let executable = d.resolve(input.program)?;
    let executable: PathBuf = executable.components().collect();
    d.program(&executable, "agent executable", 0)?;
    for arg in input.args {
        for cand in file_candidates(arg) {
            let p = input.cwd.join(cand);
            if p.is_file() && is_script(&p) {
                let why = format!("file named on the command line ({})", p.display());
                d.file(&p, &why, true);
            } else if p.is_file() {
                // `..` and links resolved: the caller tells a workspace's file by it.
                d.data_files.push(std::fs::canonicalize(&p).unwrap_or(p));
            }
        }
    }
    d.npx()?;
    d.managers_on_path();
    d.rustup_on_path();
    let notes = std::mem::take(&mut d.notes);
    let data_files = std::mem::take(&mut d.data_files);
    let env = std::mem::take(&mut d.env);
    Ok(Installation {
        executable,
        grants: d.finish(),
        notes,
        data_files,
        env,
    })
}

/// Walks one command line, collecting grants.
struct Discovery<'a> {
    input: &'a DiscoverInput<'a>,
    /// HOME as given and canonical.
    homes: Vec<PathBuf>,
    grants: Vec<AgentGrant>,
    notes: Vec<String>,
    data_files: Vec<PathBuf>,
    env: Vec<(OsString, OsString)>,
}

impl<'a> Discovery<'a> {
    fn new(input: &'a DiscoverInput<'a>) -> Self {
        let mut homes = Vec::new();
        if let Some(h) = input.home {
            homes.push(h.to_path_buf());
            if let Ok(c) = std::fs::canonicalize(h) {
                homes.push(c);
            }
        }
        Discovery {
            input,
            homes,
            grants: Vec::new(),
            notes: Vec::new(),
            data_files: Vec::new(),
            env: Vec::new(),
        }
    }

    fn grant(&mut self, path: &Path, access: AgentAccess, source: String) {
        self.grants.push(AgentGrant {
            path: path.to_path_buf(),
            access,
            source,
        });
    }

    /// HOME or a directory above it.
    fn is_home_or_above(&self, p: &Path) -> bool {
        self.homes.iter().any(|h| h.starts_with(p))
    }

    /// A directory whose files may be granted but never the directory itself.
    fn is_shared(&self, dir: &Path) -> bool {
        dir.components().count() <= 2
            || SHARED_DIRS.iter().any(|s| dir == Path::new(s))
            || SHARED_TREES.iter().any(|t| dir.starts_with(t))
            || self.is_home_or_above(dir)
    }

    /// Absolute path of a program name: with a `/` relative to cwd, else the first
    /// executable regular file on PATH.
    fn resolve(&self, name: &OsStr) -> Result<PathBuf, DiscoverError> {
        if name.as_encoded_bytes().contains(&b'/') {
            return Ok(self.input.cwd.join(name));
        }
        let text = name.to_string_lossy().into_owned();
        let Some(path_var) = self.input.path_var else {
            return Err(DiscoverError::NoPath { name: text });
        };
        for dir in std::env::split_paths(path_var) {
            // An empty PATH entry means the current directory (POSIX).
            let cand = self.input.cwd.join(dir).join(name);
            if std::fs::metadata(&cand).is_ok_and(|m| m.is_file() && is_exec(&m)) {
                return Ok(cand);
            }
        }
        Err(DiscoverError::NotOnPath {
            name: text,
            path: path_var.to_string_lossy().into_owned(),
        })
    }

    /// Grants an executable (absolute path) and what it needs: its canonical file, the
    /// virtualenvs of its symlink hops, its interpreter prefix, its `#!` interpreter.
    fn program(&mut self, named: &Path, why: &str, depth: usize) -> Result<(), DiscoverError> {
        let hops = symlink_hops(named)?;
        let last = &hops[hops.len() - 1];
        let canonical = std::fs::canonicalize(last).map_err(|source| DiscoverError::Io {
            path: last.clone(),
            source,
        })?;
        let meta = std::fs::metadata(&canonical).map_err(|source| DiscoverError::Io {
            path: canonical.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(DiscoverError::NotAFile {
                path: named.to_path_buf(),
            });
        }
        if !is_exec(&meta) {
            return Err(DiscoverError::NotExecutable {
                path: named.to_path_buf(),
            });
        }
        self.grant(&canonical, AgentAccess::ReadExec, why.to_owned());
        self.note_shim(&canonical);
        for hop in hops.iter().chain([&canonical]) {
            self.venv_of(hop);
        }
        self.prefix(
            canonical.parent(),
            &format!("interpreter prefix of {}", canonical.display()),
        );
        self.shebang(&canonical, depth)
    }

    /// If `exe` lies in `V/bin/` next to `V/pyvenv.cfg`: grants V and the prefix of the
    /// base interpreter its `home =` line names, so the standard library loads.
    fn venv_of(&mut self, exe: &Path) {
        let Some(bin) = exe
            .parent()
            .filter(|b| b.file_name() == Some(OsStr::new("bin")))
        else {
            return;
        };
        let Some(venv) = bin.parent() else { return };
        let cfg = venv.join("pyvenv.cfg");
        let Ok(text) = std::fs::read_to_string(&cfg) else {
            return;
        };
        self.grant(
            venv,
            AgentAccess::ReadExec,
            format!("virtualenv of {}", exe.display()),
        );
        if let Some(home) = venv_home(&text) {
            let home = std::fs::canonicalize(&home).unwrap_or(home);
            let why = format!("base interpreter of the virtualenv {}", venv.display());
            self.prefix(Some(&home), &why);
        }
    }

    /// Notes a version-manager shim (`.../shims/NAME`) whose manager's tree is not granted
    /// (not on PATH, or a manager `managers.rs` does not know): it runs the real
    /// interpreter out of that tree.
    fn note_shim(&mut self, exe: &Path) {
        if exe.parent().and_then(Path::file_name) == Some(OsStr::new("shims"))
            && !self.in_manager_tree(exe)
        {
            self.notes.push(format!(
                "{} is a version manager's shim: it starts the real interpreter from the \
                 manager's directories, which the agent is not granted; name the \
                 interpreter itself (e.g. the output of `pyenv which python3`)",
                exe.display()
            ));
        }
    }

    /// For an interpreter in `P/bin` with a `P/lib`: grants P's bin, lib, lib64 and
    /// libexec, not P.
    fn prefix(&mut self, bin: Option<&Path>, why: &str) {
        let Some(bin) = bin.filter(|b| b.file_name() == Some(OsStr::new("bin"))) else {
            return;
        };
        let Some(prefix) = bin.parent() else { return };
        if prefix == Path::new("/") || !prefix.join("lib").is_dir() {
            return;
        }
        for sub in ["bin", "lib", "lib64", "libexec"] {
            let dir = prefix.join(sub);
            if dir.is_dir() {
                self.grant(&dir, AgentAccess::ReadExec, why.to_owned());
            }
        }
    }

    /// If `script` starts with `#!`: grants it as a script (package root, node_modules)
    /// and its interpreter as a program, following `env NAME` to NAME on PATH.
    fn shebang(&mut self, script: &Path, depth: usize) -> Result<(), DiscoverError> {
        let Some((interp, arg)) = read_shebang(script) else {
            return Ok(());
        };
        if depth >= MAX_SHEBANG_DEPTH {
            tracing::debug!("{}: #! interpreters nested too deep", script.display());
            return Ok(());
        }
        self.file(script, &format!("agent script {}", script.display()), true);
        let wrap = |source| DiscoverError::Interpreter {
            script: script.to_path_buf(),
            source: Box::new(source),
        };
        let why = format!("interpreter of {} (#! line)", script.display());
        let interp = self.input.cwd.join(interp);
        self.program(&interp, &why, depth + 1).map_err(wrap)?;
        if interp.file_name() == Some(OsStr::new("env"))
            && let Some(name) = arg.as_deref().and_then(env_program)
        {
            let exe = self.resolve(OsStr::new(name)).map_err(wrap)?;
            self.program(&exe, &why, depth + 1).map_err(wrap)?;
        }
        Ok(())
    }

    /// Grants a file named on the command line; for a `script` also its package root or
    /// else its directory (unless shared), and every `node_modules` above it.
    fn file(&mut self, file: &Path, why: &str, script: bool) {
        let Ok(canonical) = std::fs::canonicalize(file) else {
            return;
        };
        if !canonical.is_file() {
            return;
        }
        self.grant(&canonical, AgentAccess::ReadExec, why.to_owned());
        let Some(dir) = canonical.parent().filter(|_| script) else {
            return;
        };
        let root = dir
            .ancestors()
            .take_while(|a| !self.is_shared(a))
            .find(|a| PACKAGE_MARKERS.iter().any(|m| a.join(m).exists()));
        match root {
            Some(root) => {
                let why = format!("package root of {}", canonical.display());
                self.grant(root, AgentAccess::ReadExec, why);
            }
            None if !self.is_shared(dir) => {
                let why = format!("directory of {}", canonical.display());
                self.grant(dir, AgentAccess::ReadExec, why);
            }
            None => {}
        }
        for a in dir.ancestors() {
            if let Some(nm) = self.node_modules_at(&a.join("node_modules")) {
                let why = format!("node_modules above {}", canonical.display());
                self.grant(&nm, AgentAccess::ReadExec, why);
            }
        }
    }

    /// The directory a `node_modules` path resolves to, if it is one named
    /// `node_modules` outside the shared trees and not HOME or above. A link elsewhere
    /// (`/tmp/node_modules` -> `~/.ssh`, planted by anyone who may write `/tmp`) would
    /// otherwise grant its target whole; it is noted instead.
    fn node_modules_at(&mut self, path: &Path) -> Option<PathBuf> {
        let nm = std::fs::canonicalize(path).ok().filter(|c| c.is_dir())?;
        let named = nm.file_name() == Some(OsStr::new("node_modules"));
        let shared = SHARED_TREES.iter().any(|t| nm.starts_with(t));
        if named && !shared && !self.is_home_or_above(&nm) {
            return Some(nm);
        }
        self.notes.push(format!(
            "{} leads to {}, not a node_modules directory: not granted",
            path.display(),
            nm.display()
        ));
        None
    }

    /// Canonical paths; drops `/`, HOME and above, missing paths, and grants another
    /// grant already covers.
    fn finish(mut self) -> Vec<AgentGrant> {
        let mut out: Vec<AgentGrant> = Vec::new();
        for mut g in std::mem::take(&mut self.grants) {
            match std::fs::canonicalize(&g.path) {
                Ok(c) => g.path = c,
                Err(e) => {
                    tracing::debug!("not granting {} ({}): {e}", g.path.display(), g.source);
                    continue;
                }
            }
            if g.path == Path::new("/") || self.is_home_or_above(&g.path) {
                tracing::debug!(
                    "not granting {} ({}): it is / or the home directory or above it",
                    g.path.display(),
                    g.source
                );
                continue;
            }
            if out.iter().any(|k| covers(k, &g)) {
                continue;
            }
            out.retain(|k| !covers(&g, k));
            out.push(g);
        }
        out
    }
}

/// Whether grant `k` already allows everything grant `g` does.
fn covers(k: &AgentGrant, g: &AgentGrant) -> bool {
    let access = k.access == g.access || g.access == AgentAccess::Read;
    access && g.path.starts_with(&k.path)
}

fn is_exec(m: &std::fs::Metadata) -> bool {
    m.permissions().mode() & 0o111 != 0
}

/// A script: a known extension, an execute bit, or a `#!` line.
fn is_script(file: &Path) -> bool {
    let ext = file.extension().and_then(OsStr::to_str).unwrap_or("");
    SCRIPT_EXTENSIONS.contains(&ext)
        || std::fs::metadata(file).is_ok_and(|m| is_exec(&m))
        || read_shebang(file).is_some()
}

/// `path` and each symlink target after it, hop by hop (relative targets against the
/// link's directory), up to the first non-link.
fn symlink_hops(path: &Path) -> Result<Vec<PathBuf>, DiscoverError> {
    let mut hops = vec![path.to_path_buf()];
    loop {
        let cur = &hops[hops.len() - 1];
        let meta = std::fs::symlink_metadata(cur).map_err(|source| DiscoverError::Io {
            path: cur.clone(),
            source,
        })?;
        if !meta.file_type().is_symlink() {
            return Ok(hops);
        }
        if hops.len() > MAX_HOPS {
            return Err(DiscoverError::SymlinkLoop {
                path: path.to_path_buf(),
            });
        }
        let target = std::fs::read_link(cur).map_err(|source| DiscoverError::Io {
            path: cur.clone(),
            source,
        })?;
        let next = match cur.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
        hops.push(next);
    }
}

/// The `home = DIR` line of a pyvenv.cfg.
fn venv_home(cfg: &str) -> Option<PathBuf> {
    cfg.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })
}

/// The interpreter and the optional argument string of a `#!` line.
fn read_shebang(file: &Path) -> Option<(PathBuf, Option<String>)> {
    let mut buf = Vec::with_capacity(SHEBANG_MAX);
    std::fs::File::open(file)
        .ok()?
        .take(SHEBANG_MAX as u64)
        .read_to_end(&mut buf)
        .ok()?;
    let rest = buf.strip_prefix(b"#!")?;
    let line = rest.split(|&b| b == b'\n').next().unwrap_or(rest);
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches([' ', '\t', '\r']);
    let (interp, arg) = match line.split_once([' ', '\t']) {
        Some((i, a)) => (i, Some(a.trim().to_owned()).filter(|a| !a.is_empty())),
        None => (line, None),
    };
    (!interp.is_empty()).then(|| (PathBuf::from(interp), arg))
}

/// The program `env` runs for a `#!/usr/bin/env ARGS` line: the first word that is
/// neither an option nor a `VAR=value` (`-S` splits the rest into words).
fn env_program(args: &str) -> Option<&str> {
    let mut words = args.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "-u" | "--unset" | "-C" | "--chdir" | "-P" => {
                words.next();
            }
            _ if w.starts_with("-S") && w.len() > 2 => return Some(&w[2..]),
            _ if w.starts_with('-') || w.contains('=') => {}
            _ => return Some(w),
        }
    }
    None
}

/// The paths an argument may name: itself, and the value of `--opt=VALUE`.
fn file_candidates(arg: &OsStr) -> Vec<&OsStr> {
    let bytes = arg.as_encoded_bytes();
    if bytes.is_empty() {
        return Vec::new();
    }
    if bytes[0] != b'-' {
        return vec![arg];
    }
    match bytes.iter().position(|&b| b == b'=') {
        Some(i) if i + 1 < bytes.len() => vec![OsStr::from_bytes(&bytes[i + 1..])],
        _ => Vec::new(),
    }
}
