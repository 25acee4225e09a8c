//! Making the agent's cgroup, before Landlock: fsgate's own cgroup v2 directory found
//! from `/proc/self/cgroup` and `/proc/self/mountinfo`, the cgroups a crashed fsgate
//! left behind swept, and the new cgroup's control files opened; and ending it when the
//! session ends.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Prefix of the cgroups fsgate makes, so a later start can clean up after a crash.
const PREFIX: &str = "fsgate-agent-";

/// How long ending the agent's tree waits for the kernel to empty the cgroup.
const EMPTY_WAIT: Duration = Duration::from_secs(5);

/// An agent's cgroup and the descriptors that act on it after confinement.
pub struct Group {
    /// Its directory (for messages and the record).
    pub(super) dir: PathBuf,
    /// `cgroup.procs`, open for writing: a process joins by writing `0`.
    pub(super) procs: File,
    /// `cgroup.kill`, open for writing: `1` kills every process in it.
    kill: File,
    /// `cgroup.events`, open for reading: `populated 0` once it is empty.
    events: File,
    /// `cgroup.procs` again, open for reading: who is left.
    members: File,
    /// Already ended.
    ended: bool,
}

/// Makes the agent's cgroup under fsgate's own, after sweeping what a crashed fsgate
/// left there, and opens its control files; on failure, removes it again.
pub(super) fn make_group() -> Result<Group, String> {
    let own = own_cgroup_dir()?;
    sweep(&own);
    let name = format!("{PREFIX}{}-{}", std::process::id(), hex::encode(rand4()));
    let dir = own.join(name);
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let open = |file: &str, write: bool| {
        let p = dir.join(file);
        let opened = std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .open(&p);
        opened.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("{} is missing (kernel before 5.14?)", p.display())
            }
            _ => format!("{}: {e}", p.display()),
        })
    };
    let opened = (|| {
        let procs = open("cgroup.procs", true)?;
        let members = open("cgroup.procs", false)?;
        let kill = open("cgroup.kill", true)?;
        Ok::<_, String>((procs, members, kill, open("cgroup.events", false)?))
    })();
    match opened {
        Ok((procs, members, kill, events)) => Ok(Group {
            dir,
            procs,
            kill,
            events,
            members,
            ended: false,
        }),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            Err(e)
        }
    }
}

fn rand4() -> [u8; 4] {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    b
}

/// fsgate's own cgroup v2 directory: the unified hierarchy's mount point joined with
/// the `0::` line of `/proc/self/cgroup`.
fn own_cgroup_dir() -> Result<PathBuf, String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let rel = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no cgroup v2 hierarchy")?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let mount = cgroup2_mount(&mountinfo).ok_or("cgroup2 is not mounted")?;
    // (The root cgroup has no cgroup.kill of its own; the agent's, made below it, must.)
    Ok(mount.join(rel.trim_start_matches('/')))
}

/// The mount point of the cgroup2 filesystem in a mountinfo text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let point = left.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(unescape(point)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Kills and removes the cgroups a crashed fsgate left behind (whose fsgate is gone).
fn sweep(own: &Path) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = rustix::process::Pid::from_raw(pid)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        if alive {
            continue;
        }
        let _ = std::fs::write(e.path().join("cgroup.kill"), "1");
        let deadline = Instant::now() + Duration::from_secs(1);
        while std::fs::remove_dir(e.path()).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Group {
    /// Kills what is left in the cgroup and waits until it is empty (once).
    pub(super) fn end(&mut self) -> Result<usize, String> {
        if self.ended {
            return Ok(0);
        }
        self.ended = true;
        let left = count_procs(&mut self.members);
        self.kill
            .write_all(b"1")
            .map_err(|e| format!("{}/cgroup.kill: {e}", self.dir.display()))?;
        let deadline = Instant::now() + EMPTY_WAIT;
        while populated(&mut self.events) {
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not empty in {EMPTY_WAIT:?}",
                    self.dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Confined, fsgate may not remove it: the next start does (`sweep`).
        let _ = std::fs::remove_dir(&self.dir);
        Ok(left)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Err(e) = self.end() {
            tracing::warn!("ending the agent's process tree: {e}");
        }
    }
}

/// Whether `cgroup.events` says processes are still in the cgroup.
fn populated(events: &mut File) -> bool {
    let mut text = String::new();
    let read = events
        .rewind()
        .and_then(|()| events.read_to_string(&mut text));
    read.is_ok() && text.lines().any(|l| l == "populated 1")
}

/// How many processes are in the cgroup (best effort, for the record).
fn count_procs(members: &mut File) -> usize {
    let mut text = String::new();
    let read = members
        .rewind()
        .and_then(|()| members.read_to_string(&mut text));
    read.map(|_| text.lines().filter(|l| !l.is_empty()).count())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_in_mountinfo() {
        let info = "25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                    33 25 0:29 / /sys/fs/cgroup/unified\\040x rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified x"))
        );
        assert_eq!(
            cgroup2_mount("25 30 0:22 / /sys rw - sysfs sysfs rw\n"),
            None
        );
    }
}
