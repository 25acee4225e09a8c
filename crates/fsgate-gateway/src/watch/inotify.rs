//! The watcher's kernel side: one inotify instance, a watch per directory, and only the
//! events that can change what a client sees.
//!
//! notify's inotify backend also watches opens (`IN_OPEN`), so every file the gateway
//! read woke its thread (a tenth of the server's time over pipelined WebSocket reads);
//! its watch mask cannot be set. This asks the kernel only for entries created,
//! removed, moved, modified or given new attributes, and for the watched directory's
//! own removal or move.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// Bytes of events read at once (the kernel's queue holds 16,384 events by default).
const EVENT_BUF: usize = 64 * 1024;

fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// The kernel's bound on inotify watches that applies to this process: the sysctl's
/// name and its value. Read once, before Landlock (see [`read_watch_limit`]).
static WATCH_LIMIT: OnceLock<(&'static str, Option<u64>)> = OnceLock::new();

/// Reads the watch limit now (at start, while /proc is still readable): the smaller of
/// `fs.inotify.max_user_watches` and, inside a user namespace, its own
/// `user.max_inotify_watches`.
pub fn read_watch_limit() {
    WATCH_LIMIT.get_or_init(|| {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        let fs = read("/proc/sys/fs/inotify/max_user_watches");
        let user = read("/proc/sys/user/max_inotify_watches");
        match (fs, user) {
            (Some(f), Some(u)) if u < f => ("user.max_inotify_watches", Some(u)),
            (f, _) => ("fs.inotify.max_user_watches", f),
        }
    });
}

/// The watch limit: its sysctl's name, and its value if it could be read.
pub(super) fn watch_limit() -> (&'static str, Option<u64>) {
    read_watch_limit();
    WATCH_LIMIT
        .get()
        .copied()
        .unwrap_or(("fs.inotify.max_user_watches", None))
}

/// What one wait saw.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Something changed at this absolute path (an entry, or a watched directory).
    Path(PathBuf),
    /// The kernel's queue overflowed: events were lost.
    Overflow,
}

/// How a wait ended.
#[derive(Debug)]
pub(super) enum Woke {
    /// Events (possibly none: the timeout passed).
    Events(Vec<Seen>),
    /// The stop pipe was closed.
    Stop,
}

/// An inotify instance and the directories it watches.
pub(super) struct Kernel {
    ino: Inotify,
    dirs: HashMap<WatchDescriptor, PathBuf>,
    wds: HashMap<PathBuf, WatchDescriptor>,
    buf: Vec<u8>,
}

impl Kernel {
    /// A new inotify instance (non-blocking, close-on-exec).
    pub(super) fn new() -> io::Result<Kernel> {
        Ok(Kernel {
            ino: Inotify::init()?,
            dirs: HashMap::new(),
            wds: HashMap::new(),
            buf: vec![0; EVENT_BUF],
        })
    }

    /// Watches the directory `dir` (absolute).
    ///
    /// # Ambient Authority
    /// inotify takes a path; the caller found `dir` through the workspace's handle.
    pub(super) fn watch(&mut self, dir: &Path) -> io::Result<()> {
        let wd = self.ino.watches().add(dir, mask())?;
        self.dirs.insert(wd.clone(), dir.to_path_buf());
        self.wds.insert(dir.to_path_buf(), wd);
        Ok(())
    }

    /// Stops watching `dir`, if it is watched.
    pub(super) fn unwatch(&mut self, dir: &Path) {
        if let Some(wd) = self.wds.remove(dir) {
            self.dirs.remove(&wd);
            // Err: the watch is gone already (its directory was removed).
            let _ = self.ino.watches().remove(wd);
        }
    }

    /// Waits at most `timeout` for events, or until `stop` is readable (its writer gone).
    pub(super) fn wait(&mut self, stop: &impl AsFd, timeout: Duration) -> io::Result<Woke> {
        let mut fds = [
            PollFd::new(&self.ino, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        let ts = Timespec::try_from(timeout).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        });
        match poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        if !fds[1].revents().is_empty() {
            return Ok(Woke::Stop);
        }
        if fds[0].revents().is_empty() {
            return Ok(Woke::Events(Vec::new()));
        }
        self.read().map(Woke::Events)
    }

    /// Reads what is queued, mapped to paths.
    fn read(&mut self) -> io::Result<Vec<Seen>> {
        let events = match self.ino.read_events(&mut self.buf) {
            Ok(events) => events,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut seen = Vec::new();
        let mut ignored = Vec::new();
        for ev in events {
            if ev.mask.contains(EventMask::Q_OVERFLOW) {
                seen.push(Seen::Overflow);
                continue;
            }
            if ev.mask.contains(EventMask::IGNORED) {
                ignored.push(ev.wd.clone());
            }
            let Some(dir) = self.dirs.get(&ev.wd) else {
                continue;
            };
            if ev.mask.contains(EventMask::IGNORED) && ev.name.is_none() {
                continue;
            }
            seen.push(Seen::Path(match ev.name {
                Some(name) => dir.join(name),
                None => dir.clone(),
            }));
        }
        // The kernel dropped these watches (directory removed, or unwatched).
        for wd in ignored {
            if let Some(dir) = self.dirs.remove(&wd)
                && self.wds.get(&dir) == Some(&wd)
            {
                // (Unless the path is watched again already, on a new directory.)
                self.wds.remove(&dir);
            }
        }
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use crate::watch::*;

    fn paths(woke: Woke) -> Vec<PathBuf> {
        match woke {
            Woke::Events(v) => v
                .into_iter()
                .filter_map(|s| match s {
                    Seen::Path(p) => Some(p),
                    Seen::Overflow => None,
                })
                .collect(),
            Woke::Stop => Vec::new(),
        }
    }

    /// Creations, writes and removals are seen with their paths; opening and reading a
    /// file is not seen at all; a closed stop pipe ends the wait.
    #[test]
    fn changes_are_seen_and_reads_are_not() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mut k = Kernel::new().expect("inotify");
        k.watch(&dir).expect("watch");
        let (stop, wake) = std::io::pipe().expect("pipe");
        std::fs::write(dir.join("a.txt"), "x").expect("write");
        let seen = paths(k.wait(&stop, Duration::from_secs(5)).expect("wait"));
        assert!(seen.contains(&dir.join("a.txt")), "{seen:?}");
        while !paths(k.wait(&stop, Duration::from_millis(50)).expect("wait")).is_empty() {}
        let text = std::fs::read_to_string(dir.join("a.txt")).expect("read");
        assert_eq!(text, "x");
        let after_read = k.wait(&stop, Duration::from_millis(100)).expect("wait");
        assert!(paths(after_read).is_empty(), "a read is not an event");
        std::fs::remove_file(dir.join("a.txt")).expect("rm");
        let seen = paths(k.wait(&stop, Duration::from_secs(5)).expect("wait"));
        assert_eq!(seen, [dir.join("a.txt")]);
        drop(wake);
        assert!(matches!(
            k.wait(&stop, Duration::from_secs(5)),
            Ok(Woke::Stop)
        ));
    }
}
