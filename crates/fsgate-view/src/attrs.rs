//! A file's mode through the view: `chmod` (a setattr with a mode) is the gateway's
//! `chmod`, and a file created with a mode gets it; an owner change is refused. Times
//! set (`touch`, `utime`) are the gateway's `utimes`.

use fsgate_gateway::ops;
use std::ffi::OsStr;

use fsgate_gateway::ops::Op;
use fuser::{Errno, FileAttr, FileType, INodeNo, Request};

use crate::fs::View;
use crate::handles::Handle;

/// The mode the gateway gives a new file.
const NEW_FILE: u32 = 0o644;

impl View {
    /// A change of mode, as the gateway's chmod; of owner, refused (the same owner
    /// asked again is no change).
    pub(crate) fn set_owner_mode(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
    ) -> Result<(), Errno> {
        if mode.is_none() && owner == (None, None) {
            return Ok(());
        }
        let attr = self.attr_of(req, ino, None)?;
        let same_owner =
            owner.0.is_none_or(|u| u == attr.uid) && owner.1.is_none_or(|g| g == attr.gid);
        if !same_owner {
            return Err(Errno::EPERM);
        }
        match mode.map(|m| m & 0o7777) {
            Some(m) if m != u32::from(attr.perm) => {
                let path = self.path(ino)?;
                self.change(req, Op::Chmod(ops::Chmod { path, mode: m }))
            }
            _ => Ok(()),
        }
    }

    /// The file a `create` found already there: the kernel sends a create when it
    /// believes `name` absent, and it may remember that for a while, during which the
    /// file can appear (made outside the view, or through another door). It is opened
    /// as an `open` with the same flags would open it (for reading, or for writing,
    /// emptied only if `O_TRUNC` asks), as `open(O_CREAT)` on a disk; with `O_EXCL`,
    /// it is `EEXIST`.
    pub(crate) fn open_found(
        &self,
        req: &Request,
        attr: &FileAttr,
        flags: i32,
    ) -> Result<Handle, Errno> {
        match attr.kind {
            _ if flags & libc::O_EXCL != 0 => Err(Errno::EEXIST),
            FileType::RegularFile if flags & libc::O_ACCMODE == libc::O_RDONLY => self
                .open_read(req, attr.ino)
                .map(|f| Handle::Read(f, attr.ino.0)),
            FileType::RegularFile => {
                let truncate = flags & libc::O_TRUNC != 0;
                let append = flags & libc::O_APPEND != 0;
                self.open_write(req, attr.ino, (truncate, append))
            }
            FileType::Directory => Err(Errno::EISDIR),
            _ => Err(Errno::EEXIST),
        }
    }

    /// Forgets the lookup of `ino` counted for an entry that never reached the kernel
    /// (its request failed after the lookup).
    pub(crate) fn unlooked(&self, ino: INodeNo) {
        if let Ok(mut nodes) = self.nodes.lock() {
            nodes.forget(ino.0, 1);
        }
    }

    /// A new empty file `name` in `parent`, open for writing, with the mode asked
    /// for (see [`created_with_mode`](Self::created_with_mode)).
    pub(crate) fn create_with_mode(
        &self,
        req: &Request,
        (parent, name): (INodeNo, &OsStr),
        mode: u32,
        umask: u32,
    ) -> Result<(FileAttr, u64), Errno> {
        let (attr, fh) = self.create_file(req, parent, name)?;
        let moded = self
            .child(req, parent, name)
            .and_then(|(path, _)| self.created_with_mode(req, path, mode, umask))
            .and_then(|()| self.attr_again(req, parent, name));
        match moded {
            Ok(moded) => Ok((
                FileAttr {
                    ino: attr.ino,
                    ..moded
                },
                fh,
            )),
            Err(e) => {
                self.handles.remove(fh);
                self.unlooked(attr.ino);
                Err(e)
            }
        }
    }

    /// A file just created as `path` with `mode` (and the process's `umask`): the
    /// mode it asked for where it matters (executable, or narrower than the
    /// gateway's 0644), else the gateway's default is kept (no second change per file).
    /// Set-ID and sticky bits are dropped, as no process in the view may set them.
    fn created_with_mode(
        &self,
        req: &Request,
        path: String,
        mode: u32,
        umask: u32,
    ) -> Result<(), Errno> {
        let want = mode & !umask & 0o777;
        let executable = want & 0o111 != 0;
        let narrower = NEW_FILE & !want != 0;
        if want == NEW_FILE || !(executable || narrower) {
            return Ok(());
        }
        self.change(req, Op::Chmod(ops::Chmod { path, mode: want }))
    }
}

/// A time asked for by a setattr, as the gateway's utimes takes it.
fn set_time(t: Option<fuser::TimeOrNow>) -> ops::SetTime {
    match t {
        None => ops::SetTime::Leave,
        Some(fuser::TimeOrNow::Now) => ops::SetTime::Now,
        Some(fuser::TimeOrNow::SpecificTime(at)) => {
            let ns = match at.duration_since(std::time::UNIX_EPOCH) {
                Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
                Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
            };
            ops::SetTime::At(ns)
        }
    }
}

impl View {
    /// A change of times (`touch`, `utime`, `cp -p`), as the gateway's utimes.
    pub(crate) fn set_times(
        &self,
        req: &Request,
        ino: INodeNo,
        (atime, mtime): (Option<fuser::TimeOrNow>, Option<fuser::TimeOrNow>),
    ) -> Result<(), Errno> {
        if atime.is_none() && mtime.is_none() {
            return Ok(());
        }
        // Times set on a file still open with unwritten changes (`cp -p` sets them
        // before it closes): the changes are applied first, or the close would undo them.
        let tgid = crate::peer::process_of(req.pid());
        for fh in self.handles.pending_of(ino.0, tgid) {
            self.apply(req, fuser::FileHandle(fh))?;
        }
        let path = self.path(ino)?;
        let (atime, mtime) = (set_time(atime), set_time(mtime));
        self.change(req, Op::Utimes(ops::Utimes { path, atime, mtime }))
    }
}
