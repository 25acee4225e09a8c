//! A filesystem of its own for each write workload: a new ext4 image on a loop device,
//! made on the work directory's disk, unmounted and deleted once the workload is done.
//!
//! Why: on ext4 without a journal, making an inode skips every one freed in the last
//! minutes, so one workload's clean-up slowed the next one's writes (back-to-back runs
//! disagreed 2x). On a filesystem made for it, every write workload starts alike.
//! Where the driver is not root or has no loop device, it says so and falls back to a
//! fresh directory on the work disk ([`Kind::Dir`]), which the report marks.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The image's size: sparse, so only what the workload writes takes room on the disk
/// (a full run's largest write workload writes about 50 MiB in 6,000 files; 1 GiB has
/// 65,536 inodes).
const IMAGE_BYTES: u64 = 1 << 30;

/// What a write workload ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A new ext4 image on a loop device (`journal`: made with one, as the work disk's).
    Loop { journal: bool },
    /// A new directory on the work disk, and why no filesystem could be made.
    Dir { why: String },
}

impl Kind {
    /// How the report names it.
    pub fn describe(&self) -> String {
        match self {
            Kind::Loop { journal } => format!(
                "each on a new ext4 filesystem of its own ({}, as the work directory's disk; a sparse image on that disk, `mount -o loop`, unmounted and deleted after)",
                if *journal {
                    "with a journal"
                } else {
                    "no journal"
                }
            ),
            Kind::Dir { why } => format!(
                "NOT on a filesystem of their own ({why}): each in a new directory of the work disk, where one workload's clean-up can slow the next one's writes"
            ),
        }
    }
}

/// A fresh place for one write workload; unmounted and removed when dropped.
pub struct FreshFs {
    /// Where to work (the mount point, or the directory).
    pub root: PathBuf,
    /// What it is.
    pub kind: Kind,
    image: Option<PathBuf>,
}

impl FreshFs {
    /// A new filesystem for workload `tag` under `work` (a loop-mounted ext4 image where
    /// the driver may make one, else a new directory).
    pub fn make(work: &Path, tag: &str) -> Result<FreshFs, Error> {
        let base = work.join("fresh");
        std::fs::create_dir_all(&base).map_err(|e| Error::io(&base, e))?;
        let root = base.join(tag);
        let image = base.join(format!("{tag}.img"));
        for p in [&root, &image] {
            unmount_if_mounted(p);
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
        std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
        let why = match loop_mount(work, &image, &root) {
            Ok(journal) => {
                return Ok(FreshFs {
                    root,
                    kind: Kind::Loop { journal },
                    image: Some(image),
                });
            }
            Err(why) => why,
        };
        let _ = std::fs::remove_file(&image);
        Ok(FreshFs {
            root,
            kind: Kind::Dir { why },
            image: None,
        })
    }
}

impl Drop for FreshFs {
    fn drop(&mut self) {
        if let Some(image) = &self.image {
            if !run("umount", &[self.root.as_os_str()]) {
                // Something still holds it: detach now, freed once let go.
                run("umount", &["-l".as_ref(), self.root.as_os_str()]);
            }
            let _ = std::fs::remove_file(image);
            let _ = std::fs::remove_dir(&self.root);
        } else {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// Makes `image` an ext4 filesystem like the work disk's (journal or not) and mounts it
/// at `at`; Ok(journal), or why it could not.
fn loop_mount(work: &Path, image: &Path, at: &Path) -> Result<bool, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the driver is not root".into());
    }
    if !Path::new("/dev/loop-control").exists() && !Path::new("/dev/loop0").exists() {
        return Err("no loop device".into());
    }
    let f = std::fs::File::create(image).map_err(|e| format!("{}: {e}", image.display()))?;
    f.set_len(IMAGE_BYTES)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    drop(f);
    let journal = has_journal(work);
    let features = if journal {
        "has_journal"
    } else {
        "^has_journal"
    };
    // Inode tables written now, not by a kernel thread during the workload.
    let made = run(
        "mkfs.ext4",
        &[
            "-q".as_ref(),
            "-F".as_ref(),
            "-O".as_ref(),
            features.as_ref(),
            "-E".as_ref(),
            "lazy_itable_init=0,lazy_journal_init=0".as_ref(),
            image.as_os_str(),
        ],
    );
    if !made {
        return Err("mkfs.ext4 failed or is missing".into());
    }
    // What mkfs wrote (the inode tables) reaches the disk now, not in the workload's
    // first sync (a sync on the loop filesystem syncs the image file).
    std::fs::File::open(image)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("{}: {e}", image.display()))?;
    if !run(
        "mount",
        &[
            "-o".as_ref(),
            "loop".as_ref(),
            image.as_os_str(),
            at.as_os_str(),
        ],
    ) {
        return Err("mount -o loop failed".into());
    }
    Ok(journal)
}

/// Whether the ext4 filesystem holding `dir` has a journal (`/proc/fs/jbd2/<dev>-8`);
/// false for any other filesystem (none to copy), whose images get ext4's default.
fn has_journal(dir: &Path) -> bool {
    let Some((source, fstype)) = mount_of(dir) else {
        return true;
    };
    if fstype != "ext4" {
        return true;
    }
    let dev = source.rsplit('/').next().unwrap_or(&source).to_string();
    Path::new(&format!("/proc/fs/jbd2/{dev}-8")).exists()
}

/// The source and type of the mount holding `dir` (the longest mount point above it).
fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dir = dir.canonicalize().ok()?;
    let text = std::fs::read_to_string("/proc/self/mounts").ok()?;
    text.lines()
        .filter_map(|l| {
            let mut it = l.split(' ');
            let (source, at, fstype) = (it.next()?, it.next()?, it.next()?);
            dir.starts_with(at)
                .then(|| (at.len(), source.to_string(), fstype.to_string()))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, s, t)| (s, t))
}

/// Unmounts `p` if a filesystem is mounted there (left by a run that was killed).
fn unmount_if_mounted(p: &Path) {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let at = p.to_string_lossy();
    if text.lines().any(|l| l.split(' ').nth(1) == Some(&at)) {
        run("umount", &["-l".as_ref(), p.as_os_str()]);
    }
}

/// Runs `cmd args`, quietly; true if it succeeded.
fn run(cmd: &str, args: &[&std::ffi::OsStr]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh place is empty and writable, is a filesystem of its own where the driver
    /// may make one (else says why not), and is gone once dropped.
    #[test]
    fn a_fresh_filesystem_is_empty_its_own_and_gone_after() {
        let work = std::env::temp_dir().join(format!("fsgate-fresh-{}", std::process::id()));
        let fresh = FreshFs::make(&work, "t").unwrap();
        let names: Vec<_> = std::fs::read_dir(&fresh.root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "lost+found")
            .collect();
        assert!(names.is_empty(), "{names:?}");
        std::fs::write(fresh.root.join("f"), b"x").unwrap();
        let root = fresh.root.clone();
        match &fresh.kind {
            Kind::Loop { .. } => {
                use std::os::unix::fs::MetadataExt;
                let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
                assert_ne!(dev(&root), dev(&work), "a filesystem of its own");
                assert!(fresh.kind.describe().contains("new ext4 filesystem"));
            }
            Kind::Dir { why } => {
                assert!(!why.is_empty());
                assert!(fresh.kind.describe().starts_with("NOT on a filesystem"));
            }
        }
        drop(fresh);
        assert!(!root.exists(), "unmounted and removed");
        assert!(!work.join("fresh").join("t.img").exists(), "image deleted");
        std::fs::remove_dir_all(&work).unwrap();
    }
}
