//! [`restore`]: puts a saved version back into the workspace, atomically.

use std::io::{self, Read};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, OpenOptions, Permissions};

use super::layout::{self, TMP_SUFFIX};
use super::store::{copy_hashing, sync_dir};
use crate::error::{BackupError, BackupRef};
use crate::store::BackupStore;

/// What [`restore`] did; the caller writes it to the audit log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RestoreReport {
    /// The version that is now the file's content.
    pub restored: BackupRef,
    /// The backup of the content the file had before the restore (None if it did not
    /// exist), so the restore itself can be undone.
    pub previous: Option<BackupRef>,
}

/// Told the version about to be restored and the backup of the current content, before
/// the workspace is touched; an error refuses the restore.
pub(crate) type BeforeChange<'a> =
    dyn FnMut(&BackupRef, Option<&BackupRef>) -> Result<(), BackupError> + 'a;

/// Restores version `at` (latest if None) of `rel_path` into `workspace`.
///
/// The current content, if the file exists, is backed up first; if that fails nothing
/// changes. Then `before_change` is told what will happen (the version, the backup of
/// the current content) and may refuse: the audit log records the intent there, before
/// the workspace is touched. The new content is written to a temp file created with
/// `create_new` in the same directory, checked against the version's SHA-256, fsynced
/// and renamed over the file (no `/proc` tricks, so this also works under Landlock).
/// Missing parent directories are created. A symlink or directory at `rel_path` is
/// refused.
pub fn restore(
    store: &BackupStore,
    workspace: &Dir,
    rel_path: &str,
    at: Option<&str>,
    before_change: &mut BeforeChange<'_>,
) -> Result<RestoreReport, BackupError> {
    layout::validate_rel_path(rel_path)?;
    // A damaged version costs nothing: its hash is checked before anything is saved,
    // recorded or written (and again as it is copied).
    let (version, mut check) = store.open_version(rel_path, at)?;
    check_version(&mut check, &version)?;
    let (_, mut source) = store.open_version(rel_path, Some(&version.id))?;
    let (parent_path, name) = match rel_path.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, rel_path),
    };
    let existing = open_parent(workspace, parent_path)?;
    let current = match &existing {
        Some(parent) => current_file(parent, rel_path, name)?,
        None => None,
    };
    // A file made again gets the permission bits its version recorded.
    let permissions = current.as_ref().map(|m| m.permissions()).or_else(|| {
        use cap_std::fs::PermissionsExt;
        version.mode.map(|m| Permissions::from_mode(m & 0o777))
    });
    let previous = match (&existing, &current) {
        (Some(parent), Some(_)) => Some(back_up_current(store, parent, rel_path, name)?),
        _ => None,
    };
    before_change(&version, previous.as_ref())?;
    let parent = match (existing, parent_path) {
        (Some(parent), _) => parent,
        (None, Some(p)) => make_parent(workspace, p, rel_path)?,
        (None, None) => {
            return Err(BackupError::io("open workspace dir", ".")(
                io::ErrorKind::NotFound.into(),
            ));
        }
    };
    let tmp_name = write_temp(&parent, name, &mut source, &version, permissions)?;
    if let Err(e) = fsgate_workspace::move_into_place(&parent, &tmp_name, name, current.is_none()) {
        let _ = parent.remove_file(&tmp_name);
        if e.kind() == io::ErrorKind::AlreadyExists {
            return Err(BackupError::NotRestorable {
                path: rel_path.to_owned(),
                reason: "a file appeared at its path during the restore (it has no backup); \
                         nothing was replaced",
            });
        }
        return Err(BackupError::io("replace", rel_path)(e));
    }
    sync_dir(&parent).map_err(BackupError::io(
        "sync workspace dir",
        parent_path.unwrap_or("."),
    ))?;
    tracing::info!(path = rel_path, version = %version.id, "restored from backup");
    Ok(RestoreReport {
        restored: version,
        previous,
    })
}

/// Refuses a stored version whose content does not match its record.
fn check_version(source: &mut dyn Read, version: &BackupRef) -> Result<(), BackupError> {
    let (size, sha) = copy_hashing(source, &mut io::sink())
        .map_err(BackupError::io("read", version.id.clone()))?;
    if sha != version.sha256 || size != version.size {
        return Err(BackupError::Corrupt {
            id: version.id.clone(),
            reason: format!(
                "content has {size} bytes with sha256 {sha}, record says {} bytes with {}",
                version.size, version.sha256
            ),
        });
    }
    Ok(())
}

/// The directory that holds `rel_path`'s file, if it exists (nothing is created here),
/// reached without following any symbolic link: one made since (`docs -> ../.git`)
/// must not carry the restore somewhere else.
fn open_parent(workspace: &Dir, parent_path: Option<&str>) -> Result<Option<Dir>, BackupError> {
    let Some(p) = parent_path else {
        let d = workspace.try_clone();
        return d
            .map(Some)
            .map_err(BackupError::io("open workspace dir", "."));
    };
    match open_unlinked(workspace, p) {
        Ok(d) => Ok(Some(d)),
        Err(BackupError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens the directory `p` beneath `dir`, refusing a symbolic link anywhere on it.
fn open_unlinked(dir: &Dir, p: &str) -> Result<Dir, BackupError> {
    let rel = fsgate_base::path::RelPath::parse_rooted(&format!("/{p}")).map_err(|_| {
        BackupError::NotRestorable {
            path: p.to_owned(),
            reason: "its directory is no workspace path",
        }
    })?;
    fsgate_workspace::open_dir_no_links(dir, &rel).map_err(|e| {
        if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            BackupError::NotRestorable {
                path: p.to_owned(),
                reason: "a directory on its path is a symbolic link; nothing was written through it",
            }
        } else {
            BackupError::io("open workspace dir", p)(e)
        }
    })
}

/// Makes the missing directories of `p` one at a time, each opened without following
/// a symbolic link.
fn make_parent(workspace: &Dir, p: &str, rel_path: &str) -> Result<Dir, BackupError> {
    let mut dir = workspace
        .try_clone()
        .map_err(BackupError::io("open workspace dir", "."))?;
    for name in p.split('/') {
        match dir.create_dir(name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(BackupError::io("create workspace dir", rel_path)(e)),
        }
        dir = open_unlinked(&dir, name)?;
    }
    Ok(dir)
}

/// The metadata of the file being replaced, None if there is none; refuses anything
/// but a regular file.
fn current_file(parent: &Dir, rel_path: &str, name: &str) -> Result<Option<Metadata>, BackupError> {
    let refuse = |reason| BackupError::NotRestorable {
        path: rel_path.to_owned(),
        reason,
    };
    let meta = match parent.symlink_metadata(name) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(BackupError::io("stat", rel_path)(e)),
    };
    if meta.is_symlink() {
        return Err(refuse("it is a symbolic link"));
    }
    if !meta.is_file() {
        return Err(refuse("it is not a regular file"));
    }
    Ok(Some(meta))
}

/// Saves the current content of `name` in `parent` (never following a symlink).
fn back_up_current(
    store: &BackupStore,
    parent: &Dir,
    rel_path: &str,
    name: &str,
) -> Result<BackupRef, BackupError> {
    let mut current = parent
        .open_with(
            name,
            OpenOptions::new().read(true).follow(FollowSymlinks::No),
        )
        .map_err(BackupError::io("open", rel_path))?;
    store.save(rel_path, &mut current)
}

/// Writes the version into a fresh temp file next to the target and returns its name.
fn write_temp(
    parent: &Dir,
    name: &str,
    source: &mut dyn Read,
    version: &BackupRef,
    permissions: Option<Permissions>,
) -> Result<String, BackupError> {
    let pid = std::process::id();
    for attempt in 0..16u32 {
        let tmp_name = format!(".{name}.fsgate-restore-{pid}-{attempt}{TMP_SUFFIX}");
        let mut tmp =
            match parent.open_with(&tmp_name, OpenOptions::new().write(true).create_new(true)) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(BackupError::io("create", tmp_name)(e)),
            };
        let result = (|| -> Result<(), BackupError> {
            let (size, sha) = copy_hashing(source, &mut tmp)
                .map_err(BackupError::io("write", tmp_name.clone()))?;
            if sha != version.sha256 || size != version.size {
                return Err(BackupError::Corrupt {
                    id: version.id.clone(),
                    reason: format!(
                        "content has {size} bytes with sha256 {sha}, record says {} bytes with {}",
                        version.size, version.sha256
                    ),
                });
            }
            if let Some(p) = permissions.clone() {
                tmp.set_permissions(p)
                    .map_err(BackupError::io("chmod", tmp_name.clone()))?;
            }
            tmp.sync_all()
                .map_err(BackupError::io("sync", tmp_name.clone()))
        })();
        drop(tmp);
        return match result {
            Ok(()) => Ok(tmp_name),
            Err(e) => {
                let _ = parent.remove_file(&tmp_name);
                Err(e)
            }
        };
    }
    Err(BackupError::Io {
        action: "create",
        target: format!(".{name}.fsgate-restore-*"),
        source: io::Error::other("no free temp file name"),
    })
}

#[cfg(test)]
mod tests {
    use super::super::store::tests::open_store;
    use super::*;
    use crate::BackupSettings;
    use cap_std::ambient_authority;

    fn workspace() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority()).expect("open ws");
        (tmp, dir)
    }

    #[test]
    fn restore_backs_up_current_then_replaces() {
        let (_s, store) = open_store(&BackupSettings::default());
        let (ws_tmp, ws) = workspace();
        ws.create_dir_all("src").expect("mkdir");
        ws.write("src/lib.rs", "v1").expect("write");
        let v1 = store
            .save("src/lib.rs", &mut &b"v1"[..])
            .expect("backup v1");
        ws.write("src/lib.rs", "v2 by the agent")
            .expect("overwrite");

        let report = restore(&store, &ws, "src/lib.rs", None, &mut |_, _| Ok(())).expect("restore");
        assert_eq!(report.restored, v1);
        assert_eq!(
            std::fs::read_to_string(ws_tmp.path().join("src/lib.rs")).expect("read"),
            "v1"
        );
        let prev = report.previous.expect("current content was backed up");
        assert_eq!(prev.size, "v2 by the agent".len() as u64);
        // The restore can itself be undone.
        let undo = restore(
            &store,
            &ws,
            "src/lib.rs",
            Some(&prev.ts),
            &mut |_, _| Ok(()),
        )
        .expect("undo");
        assert_eq!(undo.restored, prev);
        assert_eq!(
            ws.read_to_string("src/lib.rs").expect("read"),
            "v2 by the agent"
        );
        // No temp files left behind.
        let names: Vec<_> = ws
            .read_dir("src")
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("lib.rs")]);
    }

    #[test]
    fn restore_recreates_deleted_file_and_parents() {
        let (_s, store) = open_store(&BackupSettings::default());
        let (_w, ws) = workspace();
        store
            .save("gone/deep/file.txt", &mut &b"keep me"[..])
            .expect("backup");
        let report =
            restore(&store, &ws, "gone/deep/file.txt", None, &mut |_, _| Ok(())).expect("restore");
        assert_eq!(report.previous, None);
        assert_eq!(
            ws.read_to_string("gone/deep/file.txt").expect("read"),
            "keep me"
        );
    }

    #[cfg(unix)]
    #[test]
    fn restore_keeps_permissions_and_refuses_symlinks() {
        use cap_std::fs::PermissionsExt;
        let (_s, store) = open_store(&BackupSettings::default());
        let (_w, ws) = workspace();
        ws.write("run.sh", "new").expect("write");
        let f = ws
            .open_with("run.sh", OpenOptions::new().write(true))
            .expect("open");
        f.set_permissions(Permissions::from_mode(0o750))
            .expect("chmod");
        drop(f);
        store.save("run.sh", &mut &b"old"[..]).expect("backup");
        restore(&store, &ws, "run.sh", None, &mut |_, _| Ok(())).expect("restore");
        assert_eq!(
            ws.metadata("run.sh").expect("stat").permissions().mode() & 0o777,
            0o750
        );

        ws.symlink("run.sh", "link").expect("symlink");
        store.save("link", &mut &b"x"[..]).expect("backup");
        let err =
            restore(&store, &ws, "link", None, &mut |_, _| Ok(())).expect_err("symlink refused");
        assert!(matches!(err, BackupError::NotRestorable { .. }), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_made_again_gets_the_mode_its_version_recorded() {
        use cap_std::fs::PermissionsExt;
        let (_s, store) = open_store(&BackupSettings::default());
        let (_w, ws) = workspace();
        ws.write("key.txt", "private").expect("write");
        let f = ws.open("key.txt").expect("open");
        f.set_permissions(Permissions::from_mode(0o600))
            .expect("chmod");
        let st = f.metadata().expect("stat");
        store
            .save_opened("key.txt", &f, (st.len(), 8, 0))
            .expect("backup");
        drop(f);
        ws.remove_file("key.txt").expect("rm");
        restore(&store, &ws, "key.txt", None, &mut |_, _| Ok(())).expect("restore");
        let mode = ws.metadata("key.txt").expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn damaged_backup_is_not_restored() {
        let (s_tmp, store) = open_store(&BackupSettings::default());
        let (_w, ws) = workspace();
        ws.write("a.txt", "current").expect("write");
        let r = store.save("a.txt", &mut &b"original"[..]).expect("backup");
        // Same length, other bytes: the record is intact, the content is not.
        let path = super::super::store::tests::version_file(&s_tmp.path().join("store"), &r);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        std::os::unix::fs::FileExt::write_all_at(&f, b"tampered", 0).expect("tamper");
        let err = restore(&store, &ws, "a.txt", Some(&r.ts), &mut |_, _| Ok(()))
            .expect_err("hash mismatch");
        assert!(matches!(err, BackupError::Corrupt { .. }), "{err}");
        assert_eq!(ws.read_to_string("a.txt").expect("read"), "current");
        assert_eq!(
            store.list(None).expect("list").len(),
            1,
            "nothing saved for a refused restore"
        );
        assert_eq!(ws.entries().expect("ls").count(), 1, "temp file removed");
    }

    /// A file that appears at a deleted file's path while it is being restored (after
    /// the check that found none, so nothing backed it up) is not replaced.
    #[test]
    fn restore_never_replaces_a_file_that_appeared_meanwhile() {
        let (_s, store) = open_store(&BackupSettings::default());
        let (_w, ws) = workspace();
        store.save("gone.txt", &mut &b"old"[..]).expect("backup");
        let err = restore(&store, &ws, "gone.txt", None, &mut |_, previous| {
            assert!(previous.is_none());
            ws.write("gone.txt", "made meanwhile").expect("write");
            Ok(())
        })
        .expect_err("refused");
        assert!(matches!(err, BackupError::NotRestorable { .. }), "{err}");
        assert_eq!(
            ws.read_to_string("gone.txt").expect("read"),
            "made meanwhile"
        );
        assert_eq!(ws.entries().expect("ls").count(), 1, "temp file removed");
    }

    #[test]
    fn missing_version_changes_nothing() {
        let (_s, store) = open_store(&BackupSettings::default());
        let (_w, ws) = workspace();
        ws.write("a.txt", "current").expect("write");
        assert!(matches!(
            restore(&store, &ws, "a.txt", None, &mut |_, _| Ok(())),
            Err(BackupError::NotFound { .. })
        ));
        assert_eq!(ws.read_to_string("a.txt").expect("read"), "current");
        assert!(
            store.list(None).expect("list").is_empty(),
            "no backup made for a failed restore"
        );
    }
}
