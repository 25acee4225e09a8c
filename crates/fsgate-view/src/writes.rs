//! The write path: a file opened for writing is a private copy (an unnamed file in
//! memory), applied as one `write` of the gateway when it is closed, synced or released,
//! so that a refused write changes nothing and fails where the process can see it.

use fsgate_gateway::ops;
use std::ffi::OsStr;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use fsgate_gateway::ops::{Op, OpenAccess, Output};
use fuser::{Errno, FileHandle, INodeNo, Request};

use crate::errno::{Refusal, errno};
use crate::fs::Answers;
use crate::fs::View;
use crate::handles::{self, Handle, Writer};
use crate::standing::Standing;

impl View {
    /// What the view's private copies may hold together (see `handles::Private::count`).
    fn copies_total(&self) -> u64 {
        let per_file = self.gw.policy().limits().max_process_file_bytes;
        per_file.saturating_mul(handles::COPIES_PER_FILE_LIMIT)
    }

    /// The read's decision on `ino`, and the file opened for it.
    pub(crate) fn open_read(
        &self,
        req: &Request,
        ino: INodeNo,
    ) -> Result<Arc<std::fs::File>, Errno> {
        self.opened(req, ino, OpenAccess::Read, None)?
            .ok_or(Errno::EIO)
    }

    /// The gateway's decision on opening `ino` for `access`: the file, where it is read.
    /// A question a person allows is kept in `standing`.
    fn opened(
        &self,
        req: &Request,
        ino: INodeNo,
        access: OpenAccess,
        standing: Option<&Answers>,
    ) -> Result<Option<Arc<std::fs::File>>, Errno> {
        let path = self.path(ino)?;
        let op = Op::Open(ops::Open { path, access });
        match self.serve_standing(req, op, standing) {
            Ok(Output::Opened(file)) => Ok(Some(file)),
            Ok(Output::Unit) if access == OpenAccess::Write => Ok(None),
            Ok(_) => Err(Errno::EIO),
            Err(e) => Err(errno(&e, Refusal::Denied)),
        }
    }

    /// A private copy of `ino` to write, once the write's decision on its path allows
    /// it (a refusal is the open's errno): the node's copy already open for writing, if
    /// any (it holds what was written there and not applied yet), else one holding the
    /// file's content (read under the read's decision); emptied if the open truncates.
    pub(crate) fn open_write(
        &self,
        req: &Request,
        ino: INodeNo,
        (truncate, append): (bool, bool),
    ) -> Result<Handle, Errno> {
        let access = if truncate {
            OpenAccess::Write
        } else {
            OpenAccess::ReadWrite
        };
        let mut tries = 0;
        let shared = loop {
            let version = self.handles.version_of(ino.0);
            let allowed = Arc::new(Standing::default());
            let keep = Answers::Keep(Arc::clone(&allowed));
            let held = self.opened(req, ino, access, Some(&keep))?;
            let shared = self
                .handles
                .copy_on(ino.0, req.pid())
                .map_err(Errno::from)?;
            // No apply of the copy runs while it is looked at and filled.
            let turn = shared.turn().map_err(|_| Errno::EIO)?;
            let mut p = shared.lock().map_err(|_| Errno::EIO)?;
            p.written_by(req.pid());
            p.opened_by(&allowed);
            let now = self.handles.version_of(ino.0);
            if truncate {
                p.copy.set_len(0).map_err(Errno::from)?;
                p.count(0, self.copies_total()).map_err(Errno::from)?;
                (p.dirty, p.oversized, p.refused) = (true, None, false);
            } else if !p.dirty
                && p.current_at != Some(now)
                && let Some(file) = held
            {
                // Another writer applied a version since `file` was opened (a write
                // renames a new file over the old): open the new one.
                tries += 1;
                if now != version && tries < 8 {
                    continue;
                }
                // Nothing pending: the copy takes the file as it is now.
                let len = file.metadata().map_err(Errno::from)?.len();
                p.count(len, self.copies_total()).map_err(Errno::from)?;
                p.copy.set_len(0).map_err(Errno::from)?;
                handles::copy_into(&file, &p.copy).map_err(Errno::from)?;
                (p.oversized, p.current_at, p.refused) = (None, Some(version), false);
            }
            drop((p, turn));
            break (shared, allowed);
        };
        let (shared, allowed) = shared;
        Ok(Handle::Write(Writer::new(shared, append, allowed)))
    }

    /// Writes `data` at `offset` of the private copy open as `fh`, for thread `tid`.
    pub(crate) fn write_private(
        &self,
        tid: u32,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
    ) -> Result<u32, Errno> {
        let handle = self.handles.get(fh.0).ok_or(Errno::EBADF)?;
        let Handle::Write(w) = handle.as_ref() else {
            return Err(Errno::EBADF);
        };
        let max = self.gw.policy().limits().max_process_file_bytes;
        let mut p = w.lock().map_err(|_| Errno::EIO)?;
        let offset = match w.append.load(std::sync::atomic::Ordering::Relaxed) {
            true => p.copy.metadata().map_err(Errno::from)?.len(),
            false => offset,
        };
        let end = offset.saturating_add(data.len() as u64);
        if end > max {
            (p.oversized, p.dirty) = (p.oversized.max(Some(end)), true);
            return Err(Errno::EFBIG);
        }
        p.written_by(tid);
        p.grow_to(end, self.copies_total()).map_err(Errno::from)?;
        p.copy.write_all_at(data, offset).map_err(Errno::from)?;
        p.dirty = true;
        Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
    }

    /// Applies a changed private copy as one write through the gateway (backup,
    /// intent, content rules, outcome). A refusal is the errno of this close or fsync;
    /// the file keeps what it had. The copy is taken at the start, in its turn, and
    /// not held meanwhile (see [`handles::Shared`]).
    pub(crate) fn apply(&self, req: &Request, fh: FileHandle) -> Result<(), Errno> {
        let Some(handle) = self.handles.get(fh.0) else {
            return Ok(());
        };
        let Handle::Write(w) = handle.as_ref() else {
            return Ok(());
        };
        let turn = w.turn().map_err(|_| Errno::EIO)?;
        if self.writer_detached(w)? {
            return Ok(());
        }
        let Some((ino, content)) = self.take_copy(w)? else {
            return Ok(());
        };
        let path = match self.path(INodeNo(ino)) {
            Ok(path) => path,
            Err(e) => {
                // Not decided: still to apply at the next close.
                let mut p = w.lock().map_err(|_| Errno::EIO)?;
                (p.dirty, p.applying) = (true, false);
                return Err(e);
            }
        };
        let open = w
            .lock()
            .map(|p| p.open_standings())
            .map_err(|_| Errno::EIO)?;
        let write = Op::Write(ops::Write { path, content });
        let written = (self.serve_standing(req, write, Some(&Answers::Open(open))))
            .map(|_| ())
            .map_err(|e| errno(&e, Refusal::Denied));
        let mut p = w.lock().map_err(|_| Errno::EIO)?;
        p.applying = false;
        if let Err(e) = written {
            // The copy holds what was refused: the next open fills it again, and until
            // then no open's answer stands for it.
            (p.current_at, p.refused) = (None, true);
            drop((p, turn));
            // So may the kernel's pages of the file (a writer's shared mapping puts its
            // bytes there): they are taken back, and no reader is served them.
            self.invalidator.replaced(ino, None);
            return Err(e);
        }
        self.handles.wrote(ino);
        p.current_at = Some(self.handles.version_of(ino));
        drop((p, turn));
        // A new version under the name: the kernel's view of the old one is taken back.
        // Neither the copy's lock nor its turn is held: this waits for the writeback of
        // mapped pages, which writes to the copy, and the other closers of the file
        // need not wait behind it.
        let place = self.nodes.lock().ok().and_then(|mut n| {
            n.replaced(ino);
            n.place(ino)
        });
        self.invalidator.replaced(ino, place);
        Ok(())
    }

    /// Whether the file `w` writes lost its name (removed, or renamed over) since it
    /// was opened: then what was written goes nowhere, as on a disk, and is dropped.
    fn writer_detached(&self, w: &Writer) -> Result<bool, Errno> {
        // Never both locks at once: the node table is taken without a copy's lock.
        let ino = w.lock().map_err(|_| Errno::EIO)?.ino;
        if !self.nodes.lock().is_ok_and(|n| n.detached(ino)) {
            return Ok(false);
        }
        let mut p = w.lock().map_err(|_| Errno::EIO)?;
        if p.dirty {
            tracing::debug!("view: node {ino} lost its name: its writes are dropped");
            p.dirty = false;
        }
        Ok(true)
    }

    /// What a changed copy holds, to apply (its node and content), marked as being
    /// applied; None if it is not changed.
    fn take_copy(&self, w: &Writer) -> Result<Option<(u64, ops::Content)>, Errno> {
        let mut p = w.lock().map_err(|_| Errno::EIO)?;
        if !p.dirty {
            return Ok(None);
        }
        let max = self.gw.policy().limits().max_process_file_bytes;
        let content = match p.oversized {
            // What was written up to the limit is not applied either: the file keeps
            // what it had, as after any refused write.
            Some(len) => ops::Content::Oversized { len },
            None => match handles::whole(&p.copy, max).map_err(Errno::from)? {
                Ok(bytes) => ops::Content::Bytes(bytes),
                Err(len) => ops::Content::Oversized { len },
            },
        };
        // Refused or not, this copy has been decided: the next close does not ask again
        // (a copy once written past the limit is refused at every close it is changed).
        (p.dirty, p.applying) = (false, true);
        Ok(Some((p.ino, content)))
    }

    /// Truncates `ino` to `size`: its open private copy, or the file (one write).
    pub(crate) fn truncate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: Option<FileHandle>,
        size: u64,
    ) -> Result<(), Errno> {
        let max = self.gw.policy().limits().max_process_file_bytes;
        if let Some(h) = fh.and_then(|fh| self.handles.get(fh.0))
            && let Handle::Write(p) = h.as_ref()
        {
            let mut p = p.lock().map_err(|_| Errno::EIO)?;
            if size > max {
                (p.oversized, p.dirty) = (p.oversized.max(Some(size)), true);
                return Err(Errno::EFBIG);
            }
            p.count(size, self.copies_total()).map_err(Errno::from)?;
            p.copy.set_len(size).map_err(Errno::from)?;
            p.dirty = true;
            return Ok(());
        }
        if size > max {
            // Refused on its size alone, before any of it is held in memory.
            let content = ops::Content::Oversized { len: size };
            return self.change(
                req,
                Op::Write(ops::Write {
                    path: self.path(ino)?,
                    content,
                }),
            );
        }
        let mut content = Vec::new();
        if size > 0 {
            let file = self.open_read(req, ino)?;
            content = handles::read_at(&file, 0, u32::try_from(size).map_err(|_| Errno::EFBIG)?)
                .map_err(Errno::from)?;
        }
        content.resize(usize::try_from(size).map_err(|_| Errno::EFBIG)?, 0);
        let path = self.path(ino)?;
        let written = self.change(req, Op::Write(ops::Write::bytes(path, content)));
        self.handles.wrote(ino.0);
        written
    }

    /// A new empty file (a change of its own), open for writing.
    pub(crate) fn create_file(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<(fuser::FileAttr, u64), Errno> {
        let (path, _) = self.child(req, parent, name)?;
        // The create is this handle's open: what a person allows here stands for it.
        let allowed = Arc::new(Standing::default());
        let keep = Answers::Keep(Arc::clone(&allowed));
        let create = Op::Write(ops::Write::bytes(path, Vec::new()));
        (self.serve_standing(req, create, Some(&keep))).map_err(|e| errno(&e, Refusal::Denied))?;
        let attr = self.look_up(req, parent, name)?;
        match self.created_copy(req, attr.ino, &allowed) {
            Ok(shared) => {
                let writer = Writer::new(shared, false, allowed);
                Ok((attr, self.handles.add(Handle::Write(writer))))
            }
            Err(e) => {
                // No entry reaches the kernel: the lookup counted above is not held.
                self.unlooked(attr.ino);
                Err(e)
            }
        }
    }

    /// The private copy of a file just created empty, open for writing by `req`.
    fn created_copy(
        &self,
        req: &Request,
        ino: INodeNo,
        allowed: &Arc<Standing>,
    ) -> Result<Arc<handles::Shared>, Errno> {
        let shared = (self.handles.copy_on(ino.0, req.pid())).map_err(Errno::from)?;
        {
            let _turn = shared.turn().map_err(|_| Errno::EIO)?;
            let mut p = shared.lock().map_err(|_| Errno::EIO)?;
            p.written_by(req.pid());
            p.opened_by(allowed);
            if !p.dirty {
                // The file was just made empty.
                p.copy.set_len(0).map_err(Errno::from)?;
                p.count(0, self.copies_total()).map_err(Errno::from)?;
            }
        }
        Ok(shared)
    }
}
