//! rustup on PATH: `~/.cargo/bin` holds rustup's proxies (`cargo`, `rustc`, ...), which
//! run a toolchain kept under RUSTUP_HOME (`~/.rustup`), found through HOME. Inside the
//! wall HOME is a scratch directory and the operator's home is out of reach, so a
//! command's `cargo test` fails with `Permission denied`. When a PATH entry under HOME
//! holds an executable `rustup`, that entry is granted read and execute, and so is
//! RUSTUP_HOME's `toolchains`, with its `settings.toml` (the default toolchain) read
//! only; RUSTUP_HOME is set for the command to the real one. Not granted: the rest of
//! `~/.cargo` (its `credentials.toml` holds a registry token, its registry cache is the
//! operator's): cargo's own home is the scratch HOME's `.cargo`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Discovery;
use super::managers::plain_absolute;
use crate::agent_config::validate::CREDENTIAL_PLACES;
use crate::plan::AgentAccess;

impl Discovery<'_> {
    /// Grants rustup's proxies on PATH and its toolchains, and sets RUSTUP_HOME.
    pub(super) fn rustup_on_path(&mut self) {
        let Some(bin) = self.rustup_bin() else { return };
        let Some(rustup_home) = self.rustup_home() else {
            return;
        };
        let why = format!("rustup's proxies on PATH ({})", bin.display());
        self.grant(&bin, AgentAccess::ReadExec, why);
        let why = format!("rustup's toolchains ({})", rustup_home.display());
        if let Some(toolchains) = self.inside(&rustup_home, "toolchains", true) {
            self.grant(&toolchains, AgentAccess::ReadExec, why.clone());
        }
        if let Some(settings) = self.inside(&rustup_home, "settings.toml", false) {
            self.grant(&settings, AgentAccess::Read, why);
        }
        self.env
            .push((OsString::from("RUSTUP_HOME"), rustup_home.into_os_string()));
    }

    /// `home/name`, a directory (or a regular file), not a link: a link planted there
    /// (`settings.toml -> ../.ssh/id_rsa`) is not followed, and said in a note.
    fn inside(&mut self, home: &Path, name: &str, dir: bool) -> Option<PathBuf> {
        let path = home.join(name);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            self.notes.push(format!(
                "{} is a symbolic link: not granted (rustup keeps no link there)",
                path.display()
            ));
            return None;
        }
        (if dir { meta.is_dir() } else { meta.is_file() }).then_some(path)
    }

    /// The first PATH entry, canonical and under HOME, holding an executable `rustup`.
    fn rustup_bin(&self) -> Option<PathBuf> {
        let path_var = self.input.path_var?;
        std::env::split_paths(path_var)
            .filter(|p| plain_absolute(p))
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .find(|dir| self.strictly_under_home(dir) && is_program(&dir.join("rustup")))
    }

    /// RUSTUP_HOME as fsgate was given it, else `~/.rustup`: canonical, a directory
    /// strictly under HOME (one elsewhere is the system's, and its paths decide), and
    /// neither in nor holding a place where credentials live (`~/.ssh`, ...: where a
    /// link planted as `~/.rustup` could lead).
    fn rustup_home(&self) -> Option<PathBuf> {
        let named = match self.input.rustup_home {
            Some(h) => h.to_path_buf(),
            None => self.homes.first()?.join(".rustup"),
        };
        let canon = std::fs::canonicalize(named).ok()?;
        (canon.is_dir() && self.strictly_under_home(&canon)).then_some(canon)
    }

    fn canonical_home(&self) -> Option<PathBuf> {
        (self.homes.iter()).find_map(|h| std::fs::canonicalize(h).ok())
    }

    /// Inside the canonical HOME, not HOME itself, and neither in nor holding a place
    /// where credentials live (`~/.ssh`, ...).
    fn strictly_under_home(&self, p: &Path) -> bool {
        let Some(home) = self.canonical_home() else {
            return false;
        };
        let mut credentials = CREDENTIAL_PLACES.iter().map(|c| home.join(c));
        p.starts_with(&home)
            && p != home
            && !credentials.any(|c| p.starts_with(&c) || c.starts_with(p))
    }
}

fn is_program(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
