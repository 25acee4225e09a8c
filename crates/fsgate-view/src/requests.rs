//! The FUSE requests a process makes through the view, each as the gateway's operation.

use fsgate_gateway::ops;
use std::ffi::OsStr;

use fsgate_gateway::ops::{Op, Output};
use fuser::{
    Errno, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

use crate::errno::{Refusal, errno};
use crate::fs::{GENERATION, TTL, View, kind};
use crate::handles::{self, Handle, Listing};
use crate::nodes::{self, ROOT};

impl Filesystem for View {
    /// Asks the kernel to pass `O_TRUNC` on to `open` (else it truncates with a
    /// separate request that names no open file, which would change the file at once,
    /// before the content that replaces it is decided); and, where it can, to let a
    /// private copy (opened without its page cache) be mapped shared.
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        config
            .add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC)
            .map_err(|_| std::io::Error::other("the kernel cannot pass O_TRUNC to open"))?;
        self.writers_map_shared = config
            .add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
            .is_ok();
        crate::cache::init(config);
        self.passthrough.init(config);
        Ok(())
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        View::no_xattrs(|e| reply.error(e));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        View::no_xattrs(|e| reply.error(e));
    }

    #[allow(clippy::too_many_arguments)]
    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        View::no_xattrs(|e| reply.error(e));
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        View::no_xattrs(|e| reply.error(e));
    }

    /// The kernel copies with reads and writes instead (each write decided as any), and
    /// asks no more: ENOSYS, answered quietly (the library's default logs a warning on
    /// the command's terminal each time).
    #[allow(clippy::too_many_arguments)]
    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        reply.error(Errno::ENOSYS);
    }

    /// The kernel answers EOPNOTSUPP from now on (`posix_fallocate` then writes zeros,
    /// each write decided as any).
    #[allow(clippy::too_many_arguments)]
    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    /// `SEEK_DATA` and `SEEK_HOLE`: the kernel treats the whole file as data from now on.
    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: i64,
        _whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        match self.make_link(req, (parent, link_name), target) {
            Ok(attr) => reply.entry(&TTL, &attr, GENERATION),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.link_target(req, ino) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EPERM);
    }

    /// A FIFO, socket or device: none is made in the workspace, at any door. A regular
    /// file asked for this way (`os.mknod`) is refused too: files come by `create`.
    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EPERM);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: fuser::ReplyStatfs) {
        // The workspace's filesystem, as it is (`df` in the view, free-space checks).
        match rustix::fs::statvfs(&self.root) {
            Ok(v) => reply.statfs(
                v.f_blocks,
                v.f_bfree,
                v.f_bavail,
                v.f_files,
                v.f_ffree,
                u32::try_from(v.f_bsize).unwrap_or(4096),
                u32::try_from(v.f_namemax).unwrap_or(255),
                u32::try_from(v.f_frsize).unwrap_or(4096),
            ),
            Err(e) => reply.error(Errno::from(std::io::Error::from(e))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        // A file of the view is no terminal (isatty asks with TCGETS).
        reply.error(Errno::ENOTTY);
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.look_up_or_absent(req, parent, name) {
            Ok(Some(attr)) => {
                reply.entry_with_ttls(&self.attr_ttl(attr.ino), &TTL, &attr, GENERATION)
            }
            // Node 0: the kernel remembers the name is not there (see `cache.rs`).
            Ok(None) => reply.entry(&TTL, &crate::cache::absent(), GENERATION),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if let Ok(mut nodes) = self.nodes.lock() {
            nodes.forget(ino.0, nlookup);
        }
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr_of(req, ino, fh) {
            Ok(attr) => reply.attr(&self.attr_ttl(ino), &attr),
            Err(e) => reply.error(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<fuser::TimeOrNow>,
        mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A file that lost its name while open: a change of it is seen by nobody (its
        // name is another file's, or none), as on a disk. Only its copy is truncated.
        if self.detached(ino) {
            let copy = fh.filter(|fh| self.handles.is_write(fh.0));
            let done = match (size, copy) {
                (Some(size), Some(_)) => self.truncate(req, ino, copy, size),
                _ => Ok(()),
            };
            return match done.and_then(|()| self.attr_of(req, ino, fh)) {
                Ok(attr) => reply.attr(&TTL, &attr),
                Err(e) => reply.error(e),
            };
        }
        let done = self
            .set_owner_mode(req, ino, mode, (uid, gid))
            .and_then(|()| match size {
                Some(size) => self.truncate(req, ino, fh, size),
                None => Ok(()),
            })
            .and_then(|()| self.set_times(req, ino, (atime, mtime)))
            .and_then(|()| self.attr_of(req, ino, fh));
        match done {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if !self.handles.room() {
            return reply.error(Errno::ENFILE);
        }
        match self
            .list(req, ino)
            .and_then(|l| self.handles.add_listing(l))
        {
            Ok(fh) => reply.opened(FileHandle(fh), crate::cache::DIR_FLAGS),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(handle) = self.handles.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let Handle::Dir(listing) = handle.as_ref() else {
            return reply.error(Errno::ENOTDIR);
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (ino, kind, name)) in listing.iter().enumerate().skip(start) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    /// Every change the gateway makes is durable, its directory entry too, before it
    /// is answered: a directory's sync (SQLite's, after its journal) has nothing left.
    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.handles.remove(fh.0);
        reply.ok();
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if !self.handles.room() {
            return reply.error(Errno::ENFILE);
        }
        let opened = match flags.acc_mode() {
            OpenAccMode::O_RDONLY => self.open_read(req, ino).map(|f| Handle::Read(f, ino.0)),
            OpenAccMode::O_WRONLY | OpenAccMode::O_RDWR => {
                let truncate = flags.0 & libc::O_TRUNC != 0;
                let append = flags.0 & libc::O_APPEND != 0;
                self.open_write(req, ino, (truncate, append))
            }
        };
        match opened {
            Ok(h) => {
                let flags = self.open_flags(&h);
                let read = match &h {
                    Handle::Read(file, _) => Some(std::sync::Arc::clone(file)),
                    _ => None,
                };
                let fh = self.handles.add(h);
                match read {
                    Some(file) => self.passthrough.reply(reply, (fh, ino.0), &file, flags),
                    None => reply.opened(FileHandle(fh), flags),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(handle) = self.handles.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let read = match handle.as_ref() {
            Handle::Read(file, _) => handles::read_at(file, offset, size),
            Handle::Write(p) => match p.lock() {
                Ok(p) => handles::read_at(&p.copy, offset, size),
                Err(_) => return reply.error(Errno::EIO),
            },
            Handle::Dir(_) => return reply.error(Errno::EISDIR),
        };
        match read {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(Errno::from(e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.write_private(req.pid(), fh, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.apply(req, fh) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        match self.apply(req, fh) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // A copy not applied yet (no flush came) is applied now; its refusal reaches
        // no one but the record.
        let applied = self.apply(req, fh);
        let refused = self.refused_copy(fh);
        self.handles.remove(fh.0);
        self.passthrough.released(fh.0);
        // The pages a mapping of the refused copy faulted in since its refusal go too.
        if let Some(ino) = refused {
            self.invalidator.replaced(ino, None);
        }
        match applied {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        if !self.handles.room() {
            return reply.error(Errno::ENFILE);
        }
        let found = match self.look_up_or_absent(req, parent, name) {
            Ok(found) => found,
            Err(e) => return reply.error(e),
        };
        if let Some(attr) = found {
            return match self.open_found(req, &attr, flags) {
                Ok(h) => {
                    let fopen = self.open_flags(&h);
                    let fh = self.handles.add(h);
                    reply.created(&TTL, &attr, GENERATION, FileHandle(fh), fopen)
                }
                Err(e) => {
                    self.unlooked(attr.ino);
                    reply.error(e)
                }
            };
        }
        match self.create_with_mode(req, (parent, name), mode, umask) {
            Ok((attr, fh)) => {
                if flags & libc::O_APPEND != 0 {
                    self.handles.appending(fh);
                }
                reply.created(&TTL, &attr, GENERATION, FileHandle(fh), PRIVATE_COPY)
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let made = self.child(req, parent, name).and_then(|(path, _)| {
            self.change(
                req,
                Op::Mkdir(ops::Mkdir {
                    path,
                    recursive: false,
                }),
            )
        });
        match made.and_then(|()| self.look_up(req, parent, name)) {
            Ok(attr) => reply.entry(&TTL, &attr, GENERATION),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, reply);
    }

    #[allow(clippy::too_many_arguments)]
    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // RENAME_NOREPLACE is the gateway's no-replace rename; RENAME_EXCHANGE (and
        // RENAME_WHITEOUT) are no operation of the gateway's.
        let replace = if flags == RenameFlags::empty() {
            true
        } else if flags == RenameFlags::RENAME_NOREPLACE {
            false
        } else {
            return reply.error(Errno::EINVAL);
        };
        let moved = self.child(req, parent, name).and_then(|(from, from_name)| {
            let (to, to_name) = self.child(req, newparent, newname)?;
            self.change(req, Op::Rename(ops::Rename { from, to, replace }))?;
            if let Ok(mut nodes) = self.nodes.lock() {
                nodes.moved((parent.0, &from_name), (newparent.0, &to_name));
            }
            Ok(())
        });
        match moved {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// Requests the view answers without the gateway: `access` (each open is decided when
/// it comes), extended attributes (none: the kernel then stops asking) and `statfs`.
impl View {
    pub(crate) fn no_xattrs(reply: impl FnOnce(Errno)) {
        reply(Errno::ENOSYS);
    }
}

/// How a file opened for writing is opened: past the page cache, which the file's
/// readers share, so that what is written reaches none of them before it is applied
/// (nor ever, if it is refused). The handles open for writing share one copy.
const PRIVATE_COPY: FopenFlags = FopenFlags::FOPEN_DIRECT_IO;

/// How a file is opened for reading while another process writes it: its reads past
/// the page cache. They stop at the workspace's end, short of the size every process is
/// told (`Handles::copy_size_on`); through the page cache, such a short read would have
/// the kernel shorten the file's size under the pages a writer mapped past it. The cache
/// is kept: dropping it at this open would unmap the writer's pages for nothing.
const BESIDE_A_WRITER: FopenFlags = FopenFlags::FOPEN_DIRECT_IO
    .union(FopenFlags::FOPEN_KEEP_CACHE)
    .union(FopenFlags::FOPEN_NOFLUSH);

impl View {
    /// The node of handle `fh`'s private copy, if its last apply was refused (it may
    /// hold what was refused, and so may the pages mapped from it).
    fn refused_copy(&self, fh: FileHandle) -> Option<u64> {
        let handle = self.handles.get(fh.0)?;
        let Handle::Write(w) = handle.as_ref() else {
            return None;
        };
        let p = w.lock().ok()?;
        p.refused.then_some(p.ino)
    }

    fn open_flags(&self, h: &Handle) -> FopenFlags {
        match h {
            Handle::Write(_) => PRIVATE_COPY,
            // Where writers cannot map their copy shared (a kernel before 6.6), nothing
            // is mapped past the workspace's end, and a reader's shared mapping of a
            // handle opened so would fail (ENODEV).
            Handle::Read(_, ino)
                if self.writers_map_shared && self.handles.copy_size_on(*ino).is_some() =>
            {
                BESIDE_A_WRITER
            }
            Handle::Read(file, ino) => crate::cache::read_flags(file, *ino),
            Handle::Dir(_) => FopenFlags::empty(),
        }
    }
}

impl View {
    /// The attributes of `ino`; of an open private copy, its size now.
    pub(crate) fn attr_of(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: Option<FileHandle>,
    ) -> Result<fuser::FileAttr, Errno> {
        let handle = fh.and_then(|fh| self.handles.get(fh.0));
        let stated = match self.detached(ino) {
            // Its name is another file's now, or none's.
            true => Err(Errno::ENOENT),
            false => self.path(ino).and_then(|path| self.stat(req, &path)),
        };
        let mut attr = match stated {
            Ok((_, attr)) => attr,
            // Gone from its name (removed, or replaced: `fstat` names no open file): a
            // file still open answers for itself (one being written, as its copy).
            Err(e) => return self.attr_of_open(ino).ok_or(e)?,
        };
        attr.ino = ino;
        if let Some(h) = &handle
            && let Handle::Write(p) = h.as_ref()
            && let Ok(p) = p.lock()
        {
            attr.size = p.copy.metadata().map_err(Errno::from)?.len();
            attr.blocks = attr.size.div_ceil(512);
        } else if self.handles.pending_on(ino.0)
            && let Some(size) = self
                .handles
                .pending_size_of(ino.0, crate::peer::process_of(req.pid()))
        {
            attr.size = size;
            attr.blocks = size.div_ceil(512);
        } else {
            // Another process writes it: its content is not decided yet, but the
            // pages mapped there must not be cut off.
            self.not_below_copy(&mut attr);
        }
        Ok(attr)
    }

    /// The attributes of node `ino` gone from its name, from a file of it still open
    /// for reading, else from its private copy (no name left: no link).
    fn attr_of_open(&self, ino: INodeNo) -> Option<Result<fuser::FileAttr, Errno>> {
        if let Some(open) = self.handles.read_of(ino.0) {
            return Some(open.metadata().map_err(Errno::from).map(|meta| {
                let mut attr = self.owned(crate::fs::attr_of_file(ino.0, &meta));
                self.not_below_copy(&mut attr);
                attr
            }));
        }
        let meta = self.handles.copy_meta_on(ino.0)?;
        let mut attr = self.owned(crate::fs::attr_of_file(ino.0, &meta));
        (attr.perm, attr.nlink) = (0o644, 0);
        Some(Ok(attr))
    }

    /// `attr`'s size raised to that of its node's private copy, if one is open and
    /// larger (see `Handles::copy_size_on`).
    pub(crate) fn not_below_copy(&self, attr: &mut fuser::FileAttr) {
        if let Some(size) = self.handles.copy_size_on(attr.ino.0)
            && size > attr.size
        {
            attr.size = size;
            attr.blocks = size.div_ceil(512);
        }
    }

    /// How long the kernel may keep `ino`'s attributes: not at all while a private
    /// copy of it has changes not applied, whose size its writer alone sees (the
    /// kernel's cache is every process's).
    fn attr_ttl(&self, ino: INodeNo) -> std::time::Duration {
        match self.handles.pending_on(ino.0) {
            true => std::time::Duration::ZERO,
            false => TTL,
        }
    }

    /// The entries of directory `ino`, every page of its listing, with `.` and `..`.
    fn list(&self, req: &Request, ino: INodeNo) -> Result<Listing, Errno> {
        let path = self.path(ino)?;
        let mut listing: Listing = vec![
            (ino.0, FileType::Directory, ".".into()),
            (ROOT, FileType::Directory, "..".into()),
        ];
        let mut cursor = None;
        loop {
            let op = Op::Ls(ops::Ls {
                path: path.clone(),
                cursor: cursor.take(),
                kinds_only: true,
            });
            match self.serve(req, op) {
                Ok(Output::Entries { entries, next, .. }) => {
                    listing.extend(entries.into_iter().map(|e| {
                        // The birth time is not listed: a listing's d_ino is the real
                        // inode number (stat's is the node id, see nodes.rs).
                        let id = e.ino.map_or(u64::MAX - 1, |ino| nodes::node_id(ino, None));
                        (id, kind(e.kind), e.name.to_string())
                    }));
                    match next {
                        Some(n) => cursor = Some(n),
                        None => return Ok(listing),
                    }
                }
                Ok(_) => return Err(Errno::EIO),
                Err(e) => return Err(errno(&e, Refusal::Hidden)),
            }
        }
    }

    fn remove(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let removed = self.child(req, parent, name).and_then(|(path, name)| {
            self.change(
                req,
                Op::Rm(ops::Rm {
                    path,
                    recursive: false,
                }),
            )?;
            if let Ok(mut nodes) = self.nodes.lock() {
                nodes.removed(parent.0, &name);
            }
            Ok(())
        });
        match removed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// Serves a change; its refusal is EACCES (or what the workspace said).
    pub(crate) fn change(&self, req: &Request, op: Op) -> Result<(), Errno> {
        self.serve(req, op)
            .map(|_| ())
            .map_err(|e| errno(&e, Refusal::Denied))
    }
}
