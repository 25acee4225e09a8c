//! `fsgate backup list`: the versions in a store (all, or of a path and beneath it), as
//! a table or as JSON lines.

use std::io::Write;
use std::path::PathBuf;

use fsgate_base::text::Esc;

use super::paths::{default_backup_dir, to_rel_path};
use crate::config::BackupSettings;
use crate::error::{BackupError, BackupRef};
use crate::store::BackupStore;

pub(super) fn list(
    backup_dir: Option<PathBuf>,
    workspace: Option<PathBuf>,
    json: bool,
    path: Option<String>,
) -> Result<i32, BackupError> {
    let workspace = match workspace {
        Some(w) => w,
        None => {
            std::env::current_dir().map_err(BackupError::io("find", "the current directory"))?
        }
    };
    let dir = match backup_dir {
        Some(d) => d,
        None => default_backup_dir(&workspace)?,
    };
    if !dir.is_dir() {
        return Err(BackupError::UnsafeDir {
            path: dir.display().to_string(),
            reason: "no backup store here (pass --backup-dir or --workspace)".into(),
        });
    }
    let store = BackupStore::open(&dir, &BackupSettings::default())?;
    let rel = path.map(|p| to_rel_path(&workspace, &p)).transpose()?;
    let refs = store.list(rel.as_deref())?;
    let mut out = std::io::stdout().lock();
    let written = if json {
        print_json(&mut out, &refs)
    } else {
        print_table(&mut out, &refs)
    };
    written.map_err(BackupError::io("write", "stdout"))?;
    Ok(0)
}

fn print_json(out: &mut dyn Write, refs: &[BackupRef]) -> std::io::Result<()> {
    for r in refs {
        serde_json::to_writer(&mut *out, r).map_err(std::io::Error::other)?;
        writeln!(out)?;
    }
    Ok(())
}

fn print_table(out: &mut dyn Write, refs: &[BackupRef]) -> std::io::Result<()> {
    if refs.is_empty() {
        return writeln!(out, "no backups");
    }
    writeln!(
        out,
        "{:<30}  {:>10}  {:<12}  PATH",
        "TIMESTAMP (UTC)", "SIZE", "SHA256"
    )?;
    for r in refs {
        writeln!(
            out,
            "{:<30}{:<2}{:>10}  {:<12}  {}",
            Esc(&r.ts),
            if r.original { " *" } else { "" },
            r.size,
            Esc(r.sha256.get(..12).unwrap_or(&r.sha256)),
            Esc(&r.rel_path)
        )?;
    }
    if refs.iter().any(|r| r.original) {
        writeln!(
            out,
            "* the content before fsgate's first change to the file in a session; \
             keep_versions and max_total_bytes keep it"
        )?;
    }
    Ok(())
}
