//! Several `--workspace`s: their names, which of them are usable, and how they must not
//! overlap, decided before anything is opened for serving.
//!
//! # Ambient Authority
//! Looks the directories up (canonicalise, is it a directory) from the command line:
//! start-up code only.

use std::path::{Path, PathBuf};

use fsgate_backup::{BackupStore, workspace_state_dir};
use fsgate_base::text::EscPath;
use fsgate_decide::floor::{FixedFloor, FloorKind};
use fsgate_gateway::{Gateway, Parts};
use fsgate_workspace::Workspace;

/// One `--workspace [NAME=]DIR` as the command line gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceArg {
    /// The name given before `=`, if any (default: the directory's base name).
    pub name: Option<String>,
    /// The directory.
    pub dir: PathBuf,
}

impl std::str::FromStr for WorkspaceArg {
    type Err = String;

    /// `NAME=DIR` when the text before the first `=` is a valid name and the whole text
    /// names nothing that exists, else `DIR`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err("a workspace directory is required".into());
        }
        // A path that exists is a directory, even with `=` in its name.
        if let Some((name, dir)) = s.split_once('=')
            && valid_name(name)
            && !Path::new(s).exists()
        {
            if dir.is_empty() {
                return Err(format!("workspace `{name}=` names no directory"));
            }
            return Ok(WorkspaceArg {
                name: Some(name.to_string()),
                dir: PathBuf::from(dir),
            });
        }
        Ok(WorkspaceArg {
            name: None,
            dir: PathBuf::from(s),
        })
    }
}

pub use fsgate_policy::valid_workspace_name as valid_name;

/// A usable workspace: its name and canonical root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedRoot {
    /// The name (given, or the directory's base name).
    pub name: String,
    /// The directory as given (opened again by the gateway).
    pub dir: PathBuf,
    /// Its canonical path, for the overlap check.
    pub canonical: PathBuf,
}

/// Why several workspaces cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum SeveralError {
    /// None of them is a directory that can be opened (exit 1, as the reference
    /// filesystem server does).
    #[error("none of the {0} workspaces given is a usable directory; nothing to serve")]
    NoneUsable(usize),
    /// A mistake in the command line (exit 2).
    #[error("{0}")]
    Invalid(String),
}

/// The usable workspaces among several, in command-line order: one that is missing or
/// not a directory is skipped with a `Warning:` line on stderr. Names must be unique
/// and roots must not nest (a workspace inside another would be reachable under the
/// outer one's rules, bypassing its own).
pub fn keep_usable(given: &[WorkspaceArg]) -> Result<Vec<NamedRoot>, SeveralError> {
    let mut kept: Vec<NamedRoot> = Vec::new();
    for arg in given {
        match usable(arg) {
            Ok(root) => kept.push(root),
            Err(why) => warn_skipped(arg, &why),
        }
    }
    if kept.is_empty() {
        return Err(SeveralError::NoneUsable(given.len()));
    }
    check_names_and_nesting(&kept)?;
    Ok(kept)
}

fn usable(arg: &WorkspaceArg) -> Result<NamedRoot, String> {
    let canonical = std::fs::canonicalize(&arg.dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such directory".to_string(),
        _ => e.to_string(),
    })?;
    if !canonical.is_dir() {
        return Err("not a directory".into());
    }
    std::fs::read_dir(&canonical).map_err(|e| format!("cannot be read: {e}"))?;
    let name = match &arg.name {
        Some(n) => n.clone(),
        None => default_name(&canonical)?,
    };
    Ok(NamedRoot {
        name,
        dir: arg.dir.clone(),
        canonical,
    })
}

/// The directory's base name, if it is a valid workspace name.
fn default_name(root: &Path) -> Result<String, String> {
    let base = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if valid_name(base) {
        Ok(base.to_string())
    } else {
        Err(format!(
            "its base name {:?} is no valid workspace name (letters, digits, `.`, `_`, `-`); name it: --workspace NAME=DIR",
            fsgate_base::text::Esc(base)
        ))
    }
}

fn warn_skipped(arg: &WorkspaceArg, why: &str) {
    use std::io::Write;
    let shown = match &arg.name {
        Some(n) => format!("{n}={}", EscPath(&arg.dir)),
        None => EscPath(&arg.dir).to_string(),
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "Warning: workspace {shown} skipped: {why}");
}

fn check_names_and_nesting(kept: &[NamedRoot]) -> Result<(), SeveralError> {
    for (i, a) in kept.iter().enumerate() {
        for b in &kept[i + 1..] {
            if a.name == b.name {
                return Err(SeveralError::Invalid(format!(
                    "two workspaces are named `{}` ({} and {}); name them: --workspace NAME=DIR",
                    a.name,
                    EscPath(&a.canonical),
                    EscPath(&b.canonical)
                )));
            }
            // Component-wise: /a/proj does not contain /a/proj-evil.
            let (outer, inner) = if b.canonical.starts_with(&a.canonical) {
                (a, b)
            } else if a.canonical.starts_with(&b.canonical) {
                (b, a)
            } else {
                continue;
            };
            return Err(SeveralError::Invalid(format!(
                "workspace `{}` ({}) lies inside workspace `{}` ({}): workspaces must not nest (the inner one would be reachable under the outer one's rules)",
                inner.name,
                EscPath(&inner.canonical),
                outer.name,
                EscPath(&outer.canonical)
            )));
        }
    }
    Ok(())
}

/// Warns of rules scoped to a workspace that is not served (a typo, or one skipped).
pub fn warn_unserved_scopes(policy: &fsgate_policy::Policy, served: &[NamedRoot]) {
    for name in policy.scoped_workspaces() {
        if !served.iter().any(|r| r.name == name) {
            tracing::warn!(
                "the policy scopes rules to workspace `{name}`, which is not served; they apply nowhere"
            );
        }
    }
}

/// Opens every workspace but the first: each with its own handle, the rules for it
/// (and the fixed floor of fsgate's own files inside it), its own backup store
/// (`DIR/<name>`, or its own state dir), a view of the one audit log, and with
/// `[vcs] stage` the git repository it lies in (what that needs added to `grants`).
pub(super) fn open_members(
    rest: &[NamedRoot],
    base: &fsgate_policy::Policy,
    own: &[(FloorKind, PathBuf)],
    (settings, backup_root): (&fsgate_backup::BackupSettings, Option<&Path>),
    (first, grants): (&Gateway, &mut super::vcs::VcsGrants),
) -> Result<Vec<(String, Gateway)>, String> {
    let audit = first.audit();
    let mut out: Vec<(String, Gateway)> = Vec::with_capacity(rest.len());
    for m in rest {
        let ws = Workspace::open(&m.dir)
            .map_err(|e| format!("cannot open workspace {}: {e}", EscPath(&m.dir)))?;
        let root = ws.root_path().to_path_buf();
        let mut pol = base.for_workspace(&m.name);
        pol.set_floor(FixedFloor::from_entries(
            fsgate_decide::floor::entries_inside(&root, own.to_vec()),
        ));
        let dir = match backup_root {
            Some(d) => d.join(&m.name),
            None => workspace_state_dir(&root)
                .map_err(|e| format!("{e}; pass --backup-dir to choose where backups go"))?
                .join("backups"),
        };
        let store = BackupStore::open(&dir, settings).map_err(|e| e.to_string())?;
        let earlier: Vec<_> = std::iter::once(first)
            .chain(out.iter().map(|(_, g)| g))
            .filter_map(Gateway::vcs)
            .collect();
        let stager = super::vcs::open_vcs(&pol, &root, &earlier)?;
        if let Some(s) = &stager {
            super::vcs::add_vcs_grants(grants, s, &root)?;
        }
        let g = Gateway::new(pol, ws).with_parts(Parts {
            audit: audit.and_then(|a| a.tap().log()),
            backups: Some(store),
            vcs: stager,
        });
        out.push((m.name.clone(), g));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(s: &str) -> WorkspaceArg {
        s.parse().unwrap()
    }

    #[test]
    fn a_name_is_taken_only_when_it_is_a_valid_name() {
        assert_eq!(arg("docs=/srv/docs").name.as_deref(), Some("docs"));
        assert_eq!(arg("docs=/srv/docs").dir, PathBuf::from("/srv/docs"));
        assert_eq!(arg("/srv/a=b").name, None);
        assert_eq!(arg("/srv/a=b").dir, PathBuf::from("/srv/a=b"));
        assert_eq!(arg("../x=y").name, None);
        assert!("docs=".parse::<WorkspaceArg>().is_err());
        assert!(!valid_name(".."));
        assert!(!valid_name("a/b"));
        assert!(valid_name("proj-evil"));
    }

    #[test]
    fn missing_and_non_directories_are_skipped_and_nesting_refused() {
        let t = tempfile::tempdir().unwrap();
        let proj = t.path().join("proj");
        let evil = t.path().join("proj-evil");
        std::fs::create_dir_all(proj.join("sub")).unwrap();
        std::fs::create_dir(&evil).unwrap();
        std::fs::write(t.path().join("file"), "x").unwrap();
        let d = |p: &Path| p.display().to_string();
        let kept = keep_usable(&[
            arg(&d(&proj)),
            arg(&d(&t.path().join("missing"))),
            arg(&d(&t.path().join("file"))),
            arg(&d(&evil)),
        ])
        .unwrap();
        let names: Vec<_> = kept.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["proj", "proj-evil"]);
        let none = keep_usable(&[arg(&d(&t.path().join("missing")))]);
        assert!(matches!(none, Err(SeveralError::NoneUsable(1))));
        let nested = keep_usable(&[arg(&d(&proj)), arg(&d(&proj.join("sub")))]);
        assert!(matches!(nested, Err(SeveralError::Invalid(m)) if m.contains("nest")));
        let twice = keep_usable(&[arg(&d(&proj)), arg(&format!("proj={}", d(&evil)))]);
        assert!(matches!(twice, Err(SeveralError::Invalid(m)) if m.contains("named `proj`")));
    }
}
