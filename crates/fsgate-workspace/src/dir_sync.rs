//! Directory syncs shared between concurrent changes (a group commit per directory).
//!
//! A change that added, renamed or removed an entry takes a ticket from its directory's
//! group, then waits until a sync that *started* after its ticket has finished: that
//! sync covers its entry, whoever made it. While one sync runs, the changes arriving
//! meanwhile wait and are then covered by a single next one, so N writes into one
//! directory at once make about two directory syncs instead of N. A failed sync covers
//! nobody: the next waiter makes its own (and reports its own failure).

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use cap_std::fs::Dir;

/// One directory's group.
#[derive(Default)]
struct Group {
    /// Tickets handed out (the last one's number).
    issued: u64,
    /// Every ticket up to this one is covered by a finished sync.
    covered: u64,
    /// A sync of this directory is running.
    running: bool,
    /// Changes waiting on this group (it is forgotten when none are).
    waiting: usize,
    /// Signalled when a sync of this directory ends: only its own waiters wake (one
    /// condvar for all directories woke every waiter of every directory each time).
    done: Arc<Condvar>,
}

/// Groups by (device, inode) of the directory; only directories with changes waiting
/// are held, so the map is bounded by the changes in flight.
static GROUPS: Mutex<Option<HashMap<(u64, u64), Group>>> = Mutex::new(None);

fn groups() -> MutexGuard<'static, Option<HashMap<(u64, u64), Group>>> {
    GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes every entry change made in `dir` before this call durable, sharing the sync
/// with the changes of other threads in the same directory.
pub fn sync_dir_shared(dir: &Dir) -> io::Result<()> {
    let key = {
        let st = rustix::fs::fstat(dir)?;
        (st.st_dev, st.st_ino)
    };
    let mut map = groups();
    let ticket = {
        let g = map.get_or_insert_with(HashMap::new).entry(key).or_default();
        g.issued += 1;
        g.waiting += 1;
        g.issued
    };
    let result = loop {
        let Some(g) = map.as_mut().and_then(|m| m.get_mut(&key)) else {
            break Err(io::Error::other("directory sync group lost"));
        };
        if g.covered >= ticket {
            break Ok(());
        }
        if g.running {
            let done = Arc::clone(&g.done);
            map = done
                .wait(map)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            continue;
        }
        g.running = true;
        let upto = g.issued;
        drop(map);
        let synced = sync_dir_now(dir);
        map = groups();
        if let Some(g) = map.as_mut().and_then(|m| m.get_mut(&key)) {
            g.running = false;
            if synced.is_ok() {
                g.covered = g.covered.max(upto);
            }
            // A wake-up with nobody waiting is still a syscall.
            if g.waiting > 1 {
                g.done.notify_all();
            }
        }
        if let Err(e) = synced {
            break Err(e);
        }
    };
    if let Some(m) = map.as_mut()
        && let Some(g) = m.get_mut(&key)
    {
        g.waiting -= 1;
        if g.waiting == 0 && !g.running {
            m.remove(&key);
        }
    }
    result
}

/// fsyncs a directory. A handle opened for reading is synced as it is; cap-std holds
/// some directories as `O_PATH` descriptors, which fsync rejects (EBADF), so for those
/// this opens `.` beneath the handle for reading first. (The flags are asked, not
/// found out by a failing fsync: every sync that fails is a fault worth seeing.)
fn sync_dir_now(dir: &Dir) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    if !rustix::fs::fcntl_getfl(dir)?.contains(OFlags::PATH) {
        rustix::fs::fsync(dir)?;
        return Ok(());
    }
    let fd = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fsync(&fd)?;
    Ok(())
}

/// A directory sync refused as unsupported by the filesystem (some FUSE and network
/// filesystems), not failed: nothing later would succeed either.
pub fn cannot_sync_dirs(e: &io::Error) -> bool {
    use rustix::io::Errno;
    e.raw_os_error().is_some_and(|n| {
        matches!(
            Errno::from_raw_os_error(n),
            Errno::INVAL | Errno::OPNOTSUPP | Errno::NOSYS
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Many threads syncing one directory each return once covered, and the group is
    /// forgotten afterwards (nothing held for a directory with no change waiting).
    #[test]
    fn concurrent_syncs_of_one_directory_all_return_and_leave_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir =
            Arc::new(Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir"));
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let dir = Arc::clone(&dir);
                std::thread::spawn(move || {
                    dir.write(format!("f{i}"), "x").expect("write");
                    sync_dir_shared(&dir)
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join").expect("synced");
        }
        let st = rustix::fs::fstat(&*dir).expect("stat");
        let key = (st.st_dev, st.st_ino);
        assert!(groups().as_ref().is_none_or(|m| !m.contains_key(&key)));
        assert_eq!(dir.entries().expect("ls").count(), 16);
    }

    /// A directory opened for reading is synced through its own handle, an `O_PATH` one
    /// through a second open: both succeed.
    #[test]
    fn readable_and_path_only_handles_both_sync() {
        use rustix::fs::{Mode, OFlags};
        let tmp = tempfile::tempdir().expect("tempdir");
        for flags in [OFlags::RDONLY, OFlags::PATH] {
            let fd = rustix::fs::open(
                tmp.path(),
                flags | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .expect("open");
            let dir = Dir::from_std_file(std::fs::File::from(fd));
            sync_dir_now(&dir).expect("synced");
            sync_dir_shared(&dir).expect("synced");
        }
    }
}
