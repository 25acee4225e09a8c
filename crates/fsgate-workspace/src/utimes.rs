//! utimes: the access and modification times of a file or directory, set through a
//! descriptor opened beneath the root (never through a name a symlink could lead elsewhere).

use std::fs::FileTimes;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsgate_base::path::RelPath;

use crate::error::WsError;
use crate::open::{OpenKind, open_beneath};
use crate::root::Workspace;

/// A file's access and modification times, in nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// Last access.
    pub atime: i64,
    /// Last modification.
    pub mtime: i64,
}

fn nanos(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn system_time(ns: i64) -> SystemTime {
    let (secs, sub) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let at = Duration::from_nanos(sub.unsigned_abs());
    match u64::try_from(secs) {
        Ok(s) => UNIX_EPOCH + Duration::from_secs(s) + at,
        Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + at,
    }
}

impl Workspace {
    /// The times of the regular file or directory `real` (a link is not followed).
    pub fn times_of(&self, real: &RelPath) -> Result<Times, WsError> {
        let probe = open_beneath(&self.root, real, OpenKind::Path).map_err(WsError::from_io)?;
        let meta = probe.metadata()?;
        Ok(Times {
            atime: nanos(meta.atime(), meta.atime_nsec()),
            mtime: nanos(meta.mtime(), meta.mtime_nsec()),
        })
    }

    /// Sets the times of the regular file or directory `real` (None: left as they are)
    /// and syncs the change. A link, a special file, or a file with several hard links
    /// (it may be a link to a file outside) is refused, as for chmod.
    pub fn utimes(
        &self,
        real: &RelPath,
        atime: Option<i64>,
        mtime: Option<i64>,
    ) -> Result<(), WsError> {
        let file = self.open_to_change_metadata(real)?;
        let mut times = FileTimes::new();
        if let Some(a) = atime {
            times = times.set_accessed(system_time(a));
        }
        if let Some(m) = mtime {
            times = times.set_modified(system_time(m));
        }
        file.set_times(times)?;
        file.sync_all()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_round_trip_through_system_time_either_side_of_the_epoch() {
        for ns in [0, 1, 1_577_923_200_123_456_789, -1, -1_500_000_000] {
            let t = system_time(ns);
            let back = match t.duration_since(UNIX_EPOCH) {
                Ok(d) => i64::try_from(d.as_nanos()).unwrap(),
                Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap(),
            };
            assert_eq!(back, ns);
        }
    }

    #[test]
    fn utimes_sets_the_times_and_never_follows_a_link() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("a.txt"), "a\n").expect("write");
        std::os::unix::fs::symlink("a.txt", tmp.path().join("link")).expect("symlink");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = |p: &str| RelPath::parse_rooted(p).expect("rel");
        let before = ws.times_of(&rel("/a.txt")).expect("times");
        ws.utimes(&rel("/a.txt"), None, Some(7)).expect("utimes");
        let after = ws.times_of(&rel("/a.txt")).expect("times");
        assert_eq!(after, Times { mtime: 7, ..before });
        assert!(ws.utimes(&rel("/link"), Some(0), Some(0)).is_err());
        assert_eq!(ws.times_of(&rel("/a.txt")).expect("times"), after);
    }
}
