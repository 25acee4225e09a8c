//! Symbolic links: one made is the gateway's `symlink` (its target checked there), and
//! a link's target is read with the gateway's `stat` of the link itself. The kernel
//! follows a link through the view, so where it leads is decided at every step.

use fsgate_gateway::ops;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fsgate_gateway::ops::Op;
use fuser::{Errno, FileAttr, INodeNo, Request};

use crate::fs::View;

impl View {
    /// `symlink(2)`: the link `name` in `parent` leading to `target`; its attributes.
    pub(crate) fn make_link(
        &self,
        req: &Request,
        (parent, name): (INodeNo, &OsStr),
        target: &std::path::Path,
    ) -> Result<FileAttr, Errno> {
        let (path, _) = self.child(req, parent, name)?;
        // A target the gateway cannot name (not UTF-8) is refused as one leading out.
        let target = target.to_str().ok_or(Errno::EPERM)?.to_owned();
        self.change(req, Op::Symlink(ops::Symlink { path, target }))?;
        self.look_up(req, parent, name)
    }

    /// `readlink(2)`: the target of the link `ino`, as it holds it.
    pub(crate) fn link_target(&self, req: &Request, ino: INodeNo) -> Result<Vec<u8>, Errno> {
        let path = self.path(ino)?;
        let info = self.lstat(req, &path)?;
        let target = info.target.ok_or(Errno::EINVAL)?;
        Ok(target.as_os_str().as_bytes().to_vec())
    }
}
