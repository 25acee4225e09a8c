//! Linking an unnamed (`O_TMPFILE`) file into a directory, shared by the atomic write
//! that publishes one and the spare files made ahead for the next write.

use std::fs::File;

use cap_std::fs::Dir;

/// A link's failure that is this write's own (no space, no quota, too many links, a
/// read-only or failing disk, a name too long), not the filesystem's way.
pub(crate) fn is_this_writes(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    matches!(
        e,
        Errno::NOSPC | Errno::DQUOT | Errno::MLINK | Errno::ROFS | Errno::IO | Errno::NAMETOOLONG
    )
}

/// Links an `O_TMPFILE` at `name`: by its descriptor (`AT_EMPTY_PATH`, which needs
/// `CAP_DAC_READ_SEARCH` on older kernels), else through `/proc/self/fd`. `EEXIST`
/// means the name is taken (nothing was linked).
#[cfg(target_os = "linux")]
pub(crate) fn link_unnamed(f: &File, parent: &Dir, name: &str) -> rustix::io::Result<()> {
    use rustix::fs::{AtFlags, CWD, linkat};
    use std::os::fd::AsRawFd;
    match linkat(f, "", parent, name, AtFlags::EMPTY_PATH) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::EXIST) => return Err(rustix::io::Errno::EXIST),
        Err(_) => {}
    }
    let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
    linkat(
        CWD,
        proc_path.as_str(),
        parent,
        name,
        AtFlags::SYMLINK_FOLLOW,
    )
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn link_unnamed(_f: &File, _parent: &Dir, _name: &str) -> rustix::io::Result<()> {
    Err(rustix::io::Errno::NOSYS)
}
