//! The confined agent's private scratch directory (its HOME and TMPDIR): made fresh and
//! locked, emptied when the agent ends; what earlier gateways left is swept, a bounded
//! share at each start.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fsgate_base::text::EscPath;

use super::emptying::{self, Emptied};

const SCRATCH_PREFIX: &str = "fsgate-agent-";

/// A new private (0700) scratch directory `fsgate-agent-PID-RANDOM` in `tmp`, locked
/// (flock) for as long as this gateway runs. The random part keeps a directory left by an
/// earlier gateway with the same pid (its own sandbox may keep it from removing the
/// directory itself) from blocking this one; the lock keeps another gateway's sweep from
/// taking it, whatever PID namespace that gateway sees.
pub(in crate::cli) fn create_scratch(tmp: &std::path::Path) -> Result<Scratch, String> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for _ in 0..8 {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| format!("cannot draw a random name: {e}"))?;
        let dir = tmp.join(format!(
            "{SCRATCH_PREFIX}{}-{}",
            std::process::id(),
            hex::encode(bytes)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => match lock_own(&dir) {
                Some(lock) => {
                    return Ok(Scratch { path: dir, lock });
                }
                // Swept between its creation and its lock: draw another name.
                None => last = Some(dir),
            },
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(dir),
            Err(e) => {
                return Err(format!(
                    "cannot create the agent's scratch dir {}: {e}",
                    dir.display()
                ));
            }
        }
    }
    Err(format!(
        "cannot create the agent's scratch dir: every name tried exists (last {})",
        last.map(|d| d.display().to_string()).unwrap_or_default()
    ))
}

/// Opens and locks the scratch dir just made at `dir`; None if the lock is taken or the
/// name no longer holds the directory opened.
fn lock_own(dir: &std::path::Path) -> Option<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let file = try_lock(dir)?;
    let held = file.metadata().ok()?;
    let named = std::fs::symlink_metadata(dir).ok()?;
    (held.dev() == named.dev() && held.ino() == named.ino()).then_some(file)
}

/// The directory at `dir`, opened and exclusively locked, if no one holds its lock.
fn try_lock(dir: &std::path::Path) -> Option<std::fs::File> {
    use rustix::fs::{FlockOperation, flock};
    let file = std::fs::File::open(dir).ok()?;
    flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(file)
}

/// How long one start may spend removing what killed gateways left in their scratch
/// dirs; the rest goes at later starts.
const SWEEP_BUDGET: Duration = Duration::from_millis(100);

/// Removes the scratch directories earlier gateways left in `tmp`: a confined gateway
/// can empty its own but not remove it, and one killed with SIGKILL leaves it full.
/// Only this user's, unlocked (a running gateway holds its own's lock, and the kernel
/// lets go of it when the gateway dies), whose gateway (the pid in the name) this process
/// cannot see alive, named exactly as [`create_scratch`] names them (of any mode: the
/// agent may have changed its HOME's).
/// Never in a temp dir inside one of the `workspaces`, where an agent could give any
/// directory such a name. Bounded by [`SWEEP_BUDGET`] so that a large tree (an agent's
/// caches: 2.2 GB) never holds up a start: what is left goes at the next. Best effort.
pub(in crate::cli) fn sweep_stale_scratch(
    tmp: &std::path::Path,
    workspaces: &[std::path::PathBuf],
) {
    sweep_within(tmp, workspaces, Instant::now() + SWEEP_BUDGET);
}

fn sweep_within(tmp: &std::path::Path, workspaces: &[std::path::PathBuf], deadline: Instant) {
    let canonical = std::fs::canonicalize(tmp).unwrap_or_else(|_| tmp.to_path_buf());
    if workspaces.iter().any(|w| canonical.starts_with(w)) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        if Instant::now() >= deadline {
            return;
        }
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(scratch_pid) else {
            continue;
        };
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        if !alive && is_own_dir(&entry) {
            remove_stale(&entry.path(), deadline);
        }
    }
}

/// Removes the stale scratch dir at `dir` if its lock is free (held while removing, so
/// its owner cannot be starting up now), or as much of it as `deadline` allows.
fn remove_stale(dir: &std::path::Path, deadline: Instant) {
    // Unreadable to its owner (its agent chmod'ed its HOME): given back, then locked.
    let lock = lock_own(dir).or_else(|| match owner_may_enter(dir) {
        Ok(()) => lock_own(dir),
        Err(e) => {
            tracing::debug!("stale scratch dir {} kept: {e}", EscPath(dir));
            None
        }
    });
    let Some(lock) = lock else {
        return;
    };
    let removed = match emptying::empty_dir(lock.as_fd(), Some(deadline)) {
        Ok(Emptied::All) => std::fs::remove_dir(dir),
        Ok(Emptied::Stopped) => return,
        Err(e) => Err(e),
    };
    if let Err(e) = removed {
        tracing::debug!("stale scratch dir {} kept: {e}", EscPath(dir));
    }
}

/// The pid in a scratch dir's name `fsgate-agent-PID-HEX16`; None for any other name.
fn scratch_pid(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(SCRATCH_PREFIX)?.split_once('-')?;
    let hex16 = random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit());
    hex16.then(|| pid.parse().ok()).flatten()
}

/// A directory (not a link to one) owned by this process's user, of any mode: its
/// agent may have changed it (the scratch dir is its HOME), and only the owner could
/// have, who may remove the directory anyway.
fn is_own_dir(entry: &std::fs::DirEntry) -> bool {
    use std::os::unix::fs::MetadataExt;
    entry
        .metadata()
        .is_ok_and(|m| m.is_dir() && m.uid() == rustix::process::geteuid().as_raw())
}

/// Gives the owner back the right to read and change the directory at `dir` (never
/// through a link) if its agent took it away, so that it can be locked and emptied.
fn owner_may_enter(dir: &std::path::Path) -> rustix::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let at = rustix::fs::open(dir, flags, Mode::empty())?;
    let st = rustix::fs::fstat(&at)?;
    let mode = st.st_mode;
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(rustix::io::Errno::PERM);
    }
    if mode & 0o700 == 0o700 {
        return Ok(());
    }
    // A path descriptor takes no chmod of its own: through its /proc entry, which
    // leads to this directory alone.
    let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&at));
    rustix::fs::chmod(proc_path.as_str(), Mode::from_raw_mode(mode | 0o700))
}

/// The agent's private scratch directory, locked while this gateway runs, cleaned when
/// dropped.
pub(in crate::cli) struct Scratch {
    pub(in crate::cli) path: PathBuf,
    lock: std::fs::File,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        clean_scratch(self);
    }
}

/// How long the end of a run may spend emptying the scratch dir: a process of the
/// agent's still writing there (one that left its tree) cannot hold fsgate's exit.
const CLEAN_BUDGET: Duration = Duration::from_secs(10);

/// Empties the agent's scratch directory. The directory itself stays (empty) when the
/// gateway's own sandbox gives it no right to remove entries of the temp dir.
fn clean_scratch(scratch: &Scratch) {
    let dir = &scratch.path;
    let deadline = Instant::now() + CLEAN_BUDGET;
    match emptying::empty_dir(scratch.lock.as_fd(), Some(deadline)) {
        Ok(Emptied::All) => {}
        Ok(Emptied::Stopped) => {
            tracing::warn!(
                "{} not emptied within {} s: later starts remove the rest",
                EscPath(dir),
                CLEAN_BUDGET.as_secs()
            );
            return;
        }
        Err(e) => tracing::warn!("cannot clean {}: {e}", EscPath(dir)),
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!("scratch dir {} left empty: {e}", EscPath(dir));
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn scratch_dirs_are_private_fresh_and_never_blocked_by_an_old_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // What an earlier gateway with this pid left under the old fixed name.
        let old = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
        std::fs::create_dir(&old).expect("mkdir");
        let a = create_scratch(tmp.path()).expect("scratch");
        let b = create_scratch(tmp.path()).expect("scratch");
        assert_ne!(a.path, b.path);
        let mode = std::fs::metadata(&a.path)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn scratch_dirs_of_gone_gateways_are_swept_with_their_content_never_past_a_link() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // pid_max is at most 2^22: these pids are never alive.
        let name = |pid: &str| format!("{SCRATCH_PREFIX}{pid}-0123456789abcdef");
        let gone = tmp.path().join(name("99999999"));
        let full = tmp.path().join(name("99999998"));
        let live = tmp.path().join(name(&std::process::id().to_string()));
        let other = tmp.path().join("not-fsgate-99999999");
        let outside = tmp.path().join("outside");
        // Not of the form a scratch dir is made with: kept.
        let odd = tmp.path().join(format!("{SCRATCH_PREFIX}99999995-x"));
        let wide = tmp.path().join(name("99999994"));
        for d in [&gone, &full, &live, &other, &outside, &odd, &wide] {
            std::fs::create_dir(d).expect("mkdir");
        }
        for d in [&gone, &full, &live, &odd] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        }
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::create_dir_all(full.join(".cache/deep")).expect("mkdir");
        std::fs::write(full.join(".cache/deep/kept"), "x").expect("write");
        std::fs::write(outside.join("precious"), "x").expect("write");
        std::os::unix::fs::symlink(&outside, full.join("link")).expect("symlink");
        // A link named like a scratch dir is not one.
        let named_link = tmp.path().join(name("99999996"));
        std::os::unix::fs::symlink(&outside, &named_link).expect("symlink");
        sweep_stale_scratch(tmp.path(), &[]);
        assert!(!gone.exists());
        // What a gateway killed with SIGKILL left: its agent's files go too.
        assert!(!full.exists(), "a killed gateway's scratch dir was kept");
        // Its agent made its HOME readable by all: swept all the same.
        assert!(!wide.exists(), "a scratch dir of another mode was kept");
        assert!(live.exists() && other.exists() && odd.exists());
        assert!(
            outside.join("precious").exists(),
            "the sweep followed a link"
        );
        assert!(named_link.symlink_metadata().is_ok());
    }

    /// As its owner without root's overrides (dropped on this thread alone): a killed
    /// gateway's scratch dir its agent made unreadable (mode 000) is swept too.
    #[test]
    fn an_unreadable_stale_scratch_dir_is_swept_by_its_owner() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let shut = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}99999992-0123456789abcdef"));
        std::fs::create_dir_all(shut.join(".cache")).expect("mkdir");
        std::fs::write(shut.join(".cache/f"), "x").expect("write");
        std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        crate::cli::wall::emptying::tests::as_owner_only(|| {
            sweep_stale_scratch(tmp.path(), &[]);
        });
        assert!(!shut.exists(), "an unreadable scratch dir was kept");
    }

    #[test]
    fn no_sweep_in_a_temp_dir_inside_a_workspace() {
        // An agent could give any directory of its workspace a scratch dir's name.
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical");
        let planted = root.join(format!("{SCRATCH_PREFIX}99999993-0123456789abcdef"));
        std::fs::create_dir(&planted).expect("mkdir");
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        sweep_stale_scratch(&root, std::slice::from_ref(&root));
        assert!(planted.exists());
        sweep_stale_scratch(&root, &[]);
        assert!(!planted.exists());
    }

    #[test]
    fn a_scratch_dir_in_use_is_kept_even_when_its_pid_is_not_seen() {
        // A gateway in another PID namespace sharing /tmp: its pid means nothing here,
        // but it holds its scratch dir's lock, and its agent may not have written yet.
        let tmp = tempfile::tempdir().expect("tempdir");
        let other_ns = create_scratch(tmp.path()).expect("scratch");
        let foreign = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}99999997-0123456789abcdef"));
        std::fs::rename(&other_ns.path, &foreign).expect("rename");
        sweep_stale_scratch(tmp.path(), &[]);
        assert!(foreign.exists(), "a locked scratch dir was swept");
        drop(other_ns);
        sweep_stale_scratch(tmp.path(), &[]);
        assert!(!foreign.exists(), "an unlocked husk was kept");
    }

    #[test]
    fn a_large_tree_a_killed_gateway_left_goes_a_bounded_share_at_each_start() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let left = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}99999992-0123456789abcdef"));
        let cache = left.join(".npm/_cacache");
        std::fs::create_dir_all(&cache).expect("mkdir");
        std::fs::set_permissions(&left, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        for f in 0..5000 {
            std::fs::write(cache.join(format!("{f:05}")), "x").expect("write");
        }
        let start = Instant::now();
        sweep_within(tmp.path(), &[], Instant::now() + Duration::from_millis(5));
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        let remaining = std::fs::read_dir(&cache).expect("list").count();
        // 5,000 unlinks take far longer than 5 ms: the pass stopped at its deadline.
        assert!(remaining > 0, "{remaining} left");
        for _ in 0..10_000 {
            if !left.exists() {
                return;
            }
            sweep_within(tmp.path(), &[], Instant::now() + Duration::from_millis(5));
        }
        panic!("the tree was never removed");
    }
}
