//! Changing the workspace: atomic writes here; mkdir, rm and rename in `entries`.
//!
//! Writes never modify a file in place: the content goes into a temporary file in the
//! same directory (see [`super::atomic`]), is fsynced, and renamed over the target, so a
//! reader sees the old content or the new, never half of it.

pub(crate) mod entries;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use cap_std::fs::Dir;

use super::atomic::{self, Staged};
use super::open::open_dir;
use super::sync_pool;
use super::temp_name::TempName;
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// What a write may replace at its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Nothing: the name was found free, so nothing was backed up; a file that appears
    /// there meanwhile is not replaced ([`WsError::Raced`]).
    Nothing,
    /// Whatever regular file is there (backups are off: none was saved).
    AnyFile,
    /// Only the file whose backup was saved (device, inode): one that replaced it
    /// meanwhile is not replaced in turn ([`WsError::Replaced`]).
    Saved(u64, u64),
}

/// What a write replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// True if a previous file was replaced.
    pub replaced: bool,
}

pub(crate) fn split(real: &RelPath) -> Result<(RelPath, &str), WsError> {
    let name = real.file_name().ok_or(WsError::IsDir)?;
    Ok((real.parent().unwrap_or_default(), name))
}

/// Makes an entry change in `dir` durable (the sync shared with concurrent changes in
/// the same directory). A failure is logged: the change is done, and undoing it would
/// be worse.
pub(crate) fn sync_dir(dir: &Dir) {
    if let Err(e) = super::dir_sync::sync_dir_shared(dir) {
        tracing::warn!("cannot sync a workspace directory after a change: {e}");
    }
}

impl Workspace {
    /// Atomically replaces (or creates) the file at `real` with `content`; `temp` is the
    /// name its temporary file has, if it ever has one (see `super::atomic`); `may`
    /// says what it may replace.
    pub fn write_atomic(
        &self,
        real: &RelPath,
        content: &[u8],
        temp: &TempName,
        may: Replace,
    ) -> Result<WriteOutcome, WsError> {
        let staged = self.stage(real, content, temp, may, false)?;
        self.publish_write(staged, content, temp)
    }

    /// The first half of [`write_atomic`](Self::write_atomic): checks the target, and
    /// where the filesystem has unnamed files, writes the content into one and starts its
    /// sync beside the caller (see [`super::sync_pool`]). Nothing in the workspace names
    /// it, so this may run before the write's intent is durable;
    /// [`publish_write`](Self::publish_write) waits for the sync, then gives it its
    /// name. Where the content must be staged under a temporary name, that waits for the
    /// publish.
    pub fn stage_write(
        &self,
        real: &RelPath,
        content: &[u8],
        temp: &TempName,
        may: Replace,
    ) -> Result<StagedWrite, WsError> {
        self.stage(real, content, temp, may, true)
    }

    fn stage(
        &self,
        real: &RelPath,
        content: &[u8],
        temp: &TempName,
        may: Replace,
        beside: bool,
    ) -> Result<StagedWrite, WsError> {
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        let (found, keep) = check_target(&parent, name)?;
        allowed(may, found)?;
        let replaced = found.is_some();
        let staged = match atomic::stage_unnamed(&parent) {
            Some(s) if beside => {
                let s = fill_unsynced(s, content, keep, &parent, temp)?;
                let syncing = sync_pool::start(move || sync_staged(s));
                // The next write's file, made while this one's syncs wait on the disk
                // (over a file, the backup's helpers have that time already: later).
                // Not after the content's sync: made then, it competes for the CPU with
                // the rest of this write.
                if found.is_none() {
                    want_spare(&parent);
                }
                Some(Content::Syncing(syncing))
            }
            Some(s) => Some(Content::Synced(fill(s, content, keep, &parent, temp)?)),
            None => None,
        };
        Ok(StagedWrite {
            parent,
            name: name.to_string(),
            staged,
            keep,
            replaced,
            may,
        })
    }

    /// The second half of [`write_atomic`](Self::write_atomic): once the staged content
    /// is durable, it takes the target's name, and the directory is synced.
    pub fn publish_write(
        &self,
        w: StagedWrite,
        content: &[u8],
        temp: &TempName,
    ) -> Result<WriteOutcome, WsError> {
        let (outcome, entry) = self.publish_write_named(w, content, temp)?;
        if let Err(e) = entry.sync_now() {
            tracing::warn!("cannot sync a workspace directory after a change: {e}");
        }
        Ok(outcome)
    }

    /// [`publish_write`](Self::publish_write) without the directory's sync: the content
    /// has its name, and the returned [`EntrySync`] makes that name durable when the
    /// caller runs it (beside the write's outcome record, see the gateway).
    pub fn publish_write_named(
        &self,
        w: StagedWrite,
        content: &[u8],
        temp: &TempName,
    ) -> Result<(WriteOutcome, EntrySync), WsError> {
        let StagedWrite {
            parent,
            name,
            staged,
            keep,
            replaced,
            may,
        } = w;
        // A name taken after the check holds a file nobody backed up.
        let published = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::AlreadyExists => WsError::Raced,
            _ => WsError::from_io(e),
        };
        let staged = match staged {
            Some(Content::Synced(s)) => s,
            Some(Content::Syncing(s)) => s.wait().map_err(WsError::from_io)?,
            None => {
                let s = atomic::stage_named(&parent, temp).map_err(WsError::from_io)?;
                fill(s, content, keep, &parent, temp)?
            }
        };
        if replaced {
            // Looked at again now that the intent is durable: the file this write was
            // checked (and backed up) against must still be the one it replaces.
            let (found, _) = check_target(&parent, &name)?;
            allowed(may, found)?;
        }
        if !atomic::publish(&parent, staged, temp, &name, !replaced).map_err(published)? {
            // The unnamed file could not be linked here: once more, under its name.
            let staged = atomic::stage_named(&parent, temp).map_err(WsError::from_io)?;
            let staged = fill(staged, content, keep, &parent, temp)?;
            atomic::publish(&parent, staged, temp, &name, !replaced).map_err(published)?;
        }
        let entry = EntrySync {
            parent: Some(parent),
        };
        Ok((WriteOutcome { replaced }, entry))
    }
}

/// The directory sync that makes a published write's name durable, not yet run. One
/// dropped unrun (a path that failed to run it) syncs then, on the dropping thread.
#[derive(Debug)]
#[must_use = "a published name is durable only once its directory is synced"]
pub struct EntrySync {
    parent: Option<Dir>,
}

impl Drop for EntrySync {
    fn drop(&mut self) {
        if let Some(parent) = self.parent.take()
            && let Err(e) = super::dir_sync::sync_dir_shared(&parent)
        {
            tracing::warn!("cannot sync a workspace directory after a change: {e}");
        }
    }
}

/// Asks for an unnamed file made ahead for the next write into `dir` (see
/// [`crate::spare`]); a free helper makes it.
fn want_spare(dir: &Dir) {
    if super::atomic::tmpfile_links() {
        crate::spare::want(dir);
    }
    crate::spare::refill();
}

/// An [`EntrySync`] running beside its caller.
#[must_use = "a started sync must be waited for before the write is answered"]
pub struct EntrySyncing(sync_pool::Pending<std::io::Result<()>>);

impl EntrySync {
    /// Syncs the directory on this thread (shared with concurrent changes in it).
    /// Then, the name durable, an unnamed file is made ahead for the directory's next
    /// write (see [`crate::spare`]).
    pub fn sync_now(mut self) -> std::io::Result<()> {
        let Some(parent) = self.parent.take() else {
            return Ok(());
        };
        let synced = super::dir_sync::sync_dir_shared(&parent);
        want_spare(&parent);
        synced
    }

    /// Starts the sync on a helper (see [`super::sync_pool`]); wait for it with
    /// [`EntrySyncing::wait`]. The spare is asked for once the result is handed over:
    /// the write does not wait for that (nor for the handle's close).
    pub fn start(mut self) -> EntrySyncing {
        let Some(parent) = self.parent.take() else {
            return EntrySyncing(sync_pool::start(|| Ok(())));
        };
        let parent = std::sync::Arc::new(parent);
        let after = std::sync::Arc::clone(&parent);
        EntrySyncing(sync_pool::start_then(
            move || super::dir_sync::sync_dir_shared(&parent),
            move || want_spare(&after),
        ))
    }
}

impl EntrySyncing {
    /// The sync's result, run here if no helper has taken it yet.
    pub fn wait(self) -> std::io::Result<()> {
        self.0.wait()
    }
}

/// A write staged by [`Workspace::stage_write`], waiting to take its name.
pub struct StagedWrite {
    parent: Dir,
    name: String,
    /// The content in an unnamed file; None: to be staged under the temporary name
    /// when published.
    staged: Option<Content>,
    keep: Keep,
    replaced: bool,
    may: Replace,
}

/// Content staged in an unnamed file.
enum Content {
    /// Written and synced.
    Synced(Staged),
    /// Written, its sync running beside the request.
    Syncing(sync_pool::Pending<std::io::Result<Staged>>),
}

/// Refuses a replacement `may` does not allow of the file `found` (device, inode) at
/// the name, if any.
fn allowed(may: Replace, found: Option<(u64, u64)>) -> Result<(), WsError> {
    match (may, found) {
        (_, None) | (Replace::AnyFile, Some(_)) => Ok(()),
        (Replace::Nothing, Some(_)) => Err(WsError::Raced),
        (Replace::Saved(dev, ino), Some(id)) if id == (dev, ino) => Ok(()),
        (Replace::Saved(..), Some(_)) => Err(WsError::Replaced),
    }
}

/// What new content takes from the file it replaces, as a write in place keeps them:
/// its permission bits (without set-user-ID and set-group-ID: a write by an
/// unprivileged process clears them too) and its owner, where that is not fsgate's own
/// (fsgate run as root on a person's files leaves them theirs).
#[derive(Debug, Clone, Copy)]
struct Keep {
    mode: u32,
    owner: Option<(u32, u32)>,
}

impl Keep {
    /// A new file's: 0644, fsgate's owner.
    const NEW: Keep = Keep {
        mode: 0o644,
        owner: None,
    };

    /// Gives `f` the owner, then the mode (a change of owner clears set-ID bits). What
    /// fsgate may not give is left as it is: a user (not root) may still give the group;
    /// an owner its user namespace does not map (EINVAL) neither.
    fn set_on(self, f: &std::fs::File) -> std::io::Result<()> {
        use rustix::io::Errno;
        if let Some((uid, gid)) = self.owner {
            let (uid, gid) = raw_ids(uid, gid);
            let given = match rustix::fs::fchown(f, Some(uid), Some(gid)) {
                Err(Errno::PERM) => rustix::fs::fchown(f, None, Some(gid)),
                other => other,
            };
            if let Err(e) = given
                && !matches!(e, Errno::PERM | Errno::INVAL)
            {
                return Err(e.into());
            }
        }
        f.set_permissions(std::fs::Permissions::from_mode(self.mode))
    }
}

/// The ids as rustix takes them.
fn raw_ids(uid: u32, gid: u32) -> (rustix::fs::Uid, rustix::fs::Gid) {
    (
        rustix::fs::Uid::from_raw(uid),
        rustix::fs::Gid::from_raw(gid),
    )
}

/// What is at `name` in `parent` now: the regular file a write will replace (device,
/// inode), if any, and what the new content keeps of it ([`Keep`]). Anything but a
/// regular file with one link is refused. The file's own permission bits are not
/// asked: a write replaces it, as a rename in its directory may (and a file a process
/// made read-only through the descriptor it still writes, as git makes its objects,
/// must take what it writes).
fn check_target(parent: &Dir, name: &str) -> Result<(Option<(u64, u64)>, Keep), WsError> {
    let m = match parent.symlink_metadata(name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Keep::NEW)),
        Err(e) => return Err(WsError::from_io(e)),
    };
    let ft = m.file_type();
    if ft.is_dir() {
        return Err(WsError::IsDir);
    }
    if ft.is_symlink() {
        return Err(WsError::Raced);
    }
    if !ft.is_file() {
        return Err(WsError::Special("a special file"));
    }
    if cap_std::fs::MetadataExt::nlink(&m) > 1 {
        return Err(WsError::HardLink(cap_std::fs::MetadataExt::nlink(&m)));
    }
    use cap_std::fs::MetadataExt;
    let ours = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let theirs = (m.uid(), m.gid());
    let keep = Keep {
        mode: m.mode() & 0o1777,
        owner: (theirs != ours).then_some(theirs),
    };
    Ok((Some((m.dev(), m.ino())), keep))
}

/// Writes `content` into the staged file, sets its mode and syncs it; on failure the
/// staged file is discarded.
fn fill(
    staged: Staged,
    content: &[u8],
    keep: Keep,
    parent: &Dir,
    temp: &TempName,
) -> Result<Staged, WsError> {
    let mut staged = fill_unsynced(staged, content, keep, parent, temp)?;
    match staged.file().sync_all() {
        Ok(()) => Ok(staged),
        Err(e) => {
            atomic::discard(parent, staged, temp);
            Err(WsError::from_io(e))
        }
    }
}

/// Writes `content` into the staged file and sets its mode; on failure the staged file
/// is discarded.
fn fill_unsynced(
    mut staged: Staged,
    content: &[u8],
    keep: Keep,
    parent: &Dir,
    temp: &TempName,
) -> Result<Staged, WsError> {
    let f = staged.file();
    let done = f.write_all(content).and_then(|()| keep.set_on(f));
    match done {
        Ok(()) => Ok(staged),
        Err(e) => {
            atomic::discard(parent, staged, temp);
            Err(WsError::from_io(e))
        }
    }
}

/// Syncs an unnamed staged file (nothing to discard if it fails: nothing names it).
// sync_all, not sync_data: the mode set is metadata fdatasync need not write, and on a
// new inode fdatasync saves nothing (its size changed: the inode is written either way).
fn sync_staged(mut staged: Staged) -> std::io::Result<Staged> {
    staged.file().sync_all().map(|()| staged)
}

#[cfg(test)]
mod tests {
    use super::entries::Removal;
    use super::*;

    /// A file that appears at a new file's name after the gateway found none (and so
    /// backed none up) is never replaced; one it found (and backed up) is.
    #[test]
    fn a_new_file_never_replaces_a_file_that_appeared_meanwhile() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = RelPath::parse_rooted("n.txt").expect("rel");
        std::fs::write(tmp.path().join("n.txt"), "the user's").expect("write");
        let temp = TempName::new().expect("name");
        let err = ws
            .write_atomic(&rel, b"agent", &temp, Replace::Nothing)
            .expect_err("refused");
        assert!(matches!(err, WsError::Raced), "{err}");
        let text = std::fs::read_to_string(tmp.path().join("n.txt")).expect("read");
        assert_eq!(text, "the user's");
        let out = ws
            .write_atomic(&rel, b"agent", &temp, Replace::AnyFile)
            .expect("write");
        assert!(out.replaced);
        let fresh = RelPath::parse_rooted("m.txt").expect("rel");
        let out = ws
            .write_atomic(&fresh, b"new", &temp, Replace::Nothing)
            .expect("write");
        assert!(!out.replaced);
        let names = std::fs::read_dir(tmp.path()).expect("ls").count();
        assert_eq!(names, 2, "no temporary file left");
    }

    fn id(p: &std::path::Path) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(p).expect("stat");
        (m.dev(), m.ino())
    }

    /// Puts a new file (a new inode) with `text` at `p`, as an editor's save does.
    fn replace_by_hand(p: &std::path::Path, text: &str) {
        let side = p.with_extension("side");
        std::fs::write(&side, text).expect("write");
        std::fs::rename(&side, p).expect("rename");
    }

    /// A write replaces only the file whose backup was saved: one that took its name
    /// meanwhile, before the staging or after it (while the intent was written), stays.
    #[test]
    fn a_write_replaces_only_the_file_it_backed_up() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = RelPath::parse_rooted("a.txt").expect("rel");
        let path = tmp.path().join("a.txt");
        std::fs::write(&path, "v0").expect("write");
        let (dev, ino) = id(&path);
        let temp = TempName::new().expect("name");
        replace_by_hand(&path, "the user's v1");
        let err = ws
            .write_atomic(&rel, b"agent", &temp, Replace::Saved(dev, ino))
            .expect_err("refused");
        assert!(matches!(err, WsError::Replaced), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "the user's v1"
        );
        // Replaced between the staging and the publish.
        let (dev, ino) = id(&path);
        let staged = ws
            .stage_write(&rel, b"agent", &temp, Replace::Saved(dev, ino))
            .expect("staged");
        replace_by_hand(&path, "the user's v2");
        let err = ws
            .publish_write(staged, b"agent", &temp)
            .expect_err("refused");
        assert!(matches!(err, WsError::Replaced), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "the user's v2"
        );
        // The file it saved is replaced.
        let (dev, ino) = id(&path);
        let out = ws
            .write_atomic(&rel, b"agent", &temp, Replace::Saved(dev, ino))
            .expect("write");
        assert!(out.replaced);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "agent");
        let names = std::fs::read_dir(tmp.path()).expect("ls").count();
        assert_eq!(names, 1, "no temporary file left");
    }

    /// A rename that found its target free never replaces a file that appeared there
    /// meanwhile; one that backed its target up replaces only that file.
    #[test]
    fn a_rename_replaces_only_what_it_found() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        std::fs::create_dir(tmp.path().join("d")).expect("mkdir");
        let from = RelPath::parse_rooted("s.txt").expect("rel");
        let to = RelPath::parse_rooted("d/n.txt").expect("rel");
        let (src, dst) = (tmp.path().join("s.txt"), tmp.path().join("d/n.txt"));
        std::fs::write(&src, "moved").expect("write");
        std::fs::write(&dst, "appeared").expect("write");
        let err = ws
            .rename(&from, &to, Replace::Nothing)
            .expect_err("refused");
        assert!(matches!(err, WsError::Raced), "{err}");
        let (dev, ino) = id(&dst);
        replace_by_hand(&dst, "replaced by hand");
        let err = ws
            .rename(&from, &to, Replace::Saved(dev, ino))
            .expect_err("refused");
        assert!(matches!(err, WsError::Replaced), "{err}");
        assert_eq!(
            std::fs::read_to_string(&dst).expect("read"),
            "replaced by hand"
        );
        let (dev, ino) = id(&dst);
        ws.rename(&from, &to, Replace::Saved(dev, ino))
            .expect("rename");
        assert_eq!(std::fs::read_to_string(&dst).expect("read"), "moved");
        assert!(!src.exists());
    }

    /// A rename that never replaces takes no name that anything holds: a file, a
    /// directory, a dangling symlink; the source stays. A free name it takes.
    #[test]
    fn a_no_replace_rename_takes_only_a_free_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = |s: &str| RelPath::parse_rooted(s).expect("rel");
        let src = tmp.path().join("s.txt");
        std::fs::write(&src, "moved").expect("write");
        std::fs::write(tmp.path().join("f.txt"), "kept").expect("write");
        std::fs::create_dir(tmp.path().join("d")).expect("mkdir");
        std::os::unix::fs::symlink("nowhere", tmp.path().join("l")).expect("symlink");
        for taken in ["f.txt", "d", "l"] {
            let err = ws
                .rename_no_replace(&rel("s.txt"), &rel(taken))
                .expect_err("refused");
            assert!(matches!(err, WsError::DestinationExists), "{taken}: {err}");
        }
        assert_eq!(std::fs::read_to_string(&src).expect("read"), "moved");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("f.txt")).expect("read"),
            "kept"
        );
        ws.rename_no_replace(&rel("s.txt"), &rel("d/n.txt"))
            .expect("rename");
        let moved = tmp.path().join("d/n.txt");
        assert_eq!(std::fs::read_to_string(moved).expect("read"), "moved");
        assert!(!src.exists());
    }

    /// An rm removes only what it checked: the file its backup saved, or a link that
    /// needed none; a regular file that took either's name stays.
    #[test]
    fn a_removal_takes_only_what_it_checked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = RelPath::parse_rooted("f.txt").expect("rel");
        let path = tmp.path().join("f.txt");
        std::fs::write(&path, "saved").expect("write");
        let (dev, ino) = id(&path);
        replace_by_hand(&path, "the user's");
        let err = ws
            .remove(&rel, Removal::Saved(dev, ino))
            .expect_err("refused");
        assert!(matches!(err, WsError::Replaced), "{err}");
        let (dev, ino) = id(&path);
        ws.remove(&rel, Removal::Saved(dev, ino)).expect("removed");
        assert!(!path.exists());
        let link = RelPath::parse_rooted("l").expect("rel");
        let link_path = tmp.path().join("l");
        std::os::unix::fs::symlink("elsewhere", &link_path).expect("symlink");
        std::fs::remove_file(&link_path).expect("unlink");
        std::fs::write(&link_path, "a file now").expect("write");
        let err = ws.remove(&link, Removal::NotAFile).expect_err("refused");
        assert!(matches!(err, WsError::Raced), "{err}");
        assert_eq!(
            std::fs::read_to_string(&link_path).expect("read"),
            "a file now"
        );
        std::fs::remove_file(&link_path).expect("unlink");
        std::os::unix::fs::symlink("elsewhere", &link_path).expect("symlink");
        ws.remove(&link, Removal::NotAFile).expect("removed");
        assert!(std::fs::symlink_metadata(&link_path).is_err());
    }

    /// The new content keeps the replaced file's permission bits, but never its
    /// set-user-ID or set-group-ID.
    #[test]
    fn a_replaced_file_s_set_id_bits_are_not_kept() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = RelPath::parse_rooted("run.sh").expect("rel");
        let path = tmp.path().join("run.sh");
        std::fs::write(&path, "#!/bin/sh\n").expect("write");
        let set_id = std::fs::Permissions::from_mode(0o6754);
        std::fs::set_permissions(&path, set_id).expect("chmod");
        let temp = TempName::new().expect("name");
        ws.write_atomic(&rel, b"echo agent\n", &temp, Replace::AnyFile)
            .expect("write");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o7777, 0o754, "{mode:o}");
    }
}
