//! The workspace itself as the undo's world: every action a request through the gateway.

use fsgate_gateway::ops;
use fsgate_gateway::{How, Request};
use serde_json::{Map, Value};

use fsgate_backup::BackupRef;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Op, RequestCtx};

use super::sources::Sources;
use super::world::{Action, Content, Node, World};

/// The workspace itself: every action is a request through the gateway, recorded with
/// `note` (`args.undo`, ...) and backed up as any change is.
pub struct Real<'g> {
    src: Sources<'g>,
    gateway: &'g Gateway,
    ctx: RequestCtx,
    note: Map<String, Value>,
}

impl<'g> Real<'g> {
    /// Acts through `gateway` as `ctx`, adding `note` to every record's `args`; reads
    /// the gateway's workspace and backup store.
    pub fn new(gateway: &'g Gateway, ctx: RequestCtx, note: Map<String, Value>) -> Self {
        let src = Sources::new(gateway.workspace(), gateway.backups());
        Real {
            src,
            gateway,
            ctx,
            note,
        }
    }

    fn serve(&self, op: Op, extra: Option<(&str, &str)>) -> Result<(), String> {
        self.serve_as_is(op, extra).map_err(|e| e.message())
    }

    fn serve_as_is(
        &self,
        op: Op,
        extra: Option<(&str, &str)>,
    ) -> Result<(), fsgate_base::error::GatewayError> {
        let mut note = self.note.clone();
        if let Some((k, v)) = extra {
            note.insert(k.into(), v.into());
        }
        self.gateway
            .serve(&self.ctx, Request::Op(op), How::noted(note))
            .0
            .map(|_| ())
    }

    /// Moves `from` back to `to`. With `or_copy` (the next action writes `from` again),
    /// where the policy refuses to take the file away from `from` (`.git/HEAD`, which
    /// git renames a lock file over, and which a policy keeps in place), its content is
    /// written at `to` instead: with the replaced content put back at `from` next, the
    /// tree is the same, each write decided by the policy as any other.
    fn move_back(&mut self, from: &str, to: &str, or_copy: bool) -> Result<(), String> {
        let rooted = |p: &str| format!("/{p}");
        let op = Op::Rename(ops::Rename {
            from: rooted(from),
            to: rooted(to),
            replace: true,
        });
        match self.serve_as_is(op, None) {
            // The policy's own refusal of `from`: not a race, a file type or the
            // workspace's bounds (the gateway's `workspace-` rules).
            Err(fsgate_base::error::GatewayError::Refused { rule, path, .. })
                if or_copy
                    && path == rooted(from)
                    && !rule.starts_with("workspace-")
                    && matches!(self.src.disk_node(from)?, Node::File(_)) =>
            {
                let limit = self.gateway.policy().limits().max_write_bytes;
                let content = (self.src.bytes(&Content::Disk(from.to_owned()), limit)?)
                    .ok_or_else(|| format!("{from}: too large to copy back"))?;
                let op = Op::Write(ops::Write::bytes(rooted(to), content));
                self.serve(op, Some(("copiedFrom", from)))
            }
            other => other.map_err(|e| e.message()),
        }
    }
}

impl World for Real<'_> {
    fn node(&mut self, path: &str) -> Result<Node, String> {
        self.src.disk_node(path)
    }

    fn mode(&mut self, path: &str) -> Result<Option<u32>, String> {
        self.src.disk_mode(path)
    }

    fn is_empty_dir(&mut self, path: &str) -> Result<bool, String> {
        Ok(self.src.disk_names(path)?.is_empty())
    }

    fn act(&mut self, action: &Action) -> Result<(), String> {
        let rooted = |p: &str| format!("/{p}");
        match action {
            Action::Put { path, id } => {
                let content = self.src.saved_bytes(id)?;
                let op = Op::Write(ops::Write::bytes(rooted(path), content));
                self.serve(op, Some(("restoredFrom", id)))
            }
            Action::Remove { path, tree } => self.serve(
                Op::Rm(ops::Rm {
                    path: rooted(path),
                    recursive: *tree,
                }),
                None,
            ),
            Action::Mkdir { path } => self.serve(
                Op::Mkdir(ops::Mkdir {
                    path: rooted(path),
                    recursive: true,
                }),
                None,
            ),
            Action::Move { from, to, or_copy } => {
                if let Some((parent, _)) = to.rsplit_once('/')
                    && self.src.disk_node(parent)? == Node::Absent
                {
                    self.act(&Action::Mkdir {
                        path: parent.to_owned(),
                    })?;
                }
                self.move_back(from, to, *or_copy)
            }
            Action::Link { path, target } => self.serve(
                Op::Symlink(ops::Symlink {
                    path: rooted(path),
                    target: target.clone(),
                }),
                None,
            ),
            Action::Utimes { path, atime, mtime } => self.serve(
                Op::Utimes(ops::Utimes {
                    path: rooted(path),
                    atime: ops::SetTime::At(*atime),
                    mtime: ops::SetTime::At(*mtime),
                }),
                None,
            ),
            Action::Chmod { path, mode } => self.serve(
                Op::Chmod(ops::Chmod {
                    path: rooted(path),
                    mode: *mode,
                }),
                None,
            ),
        }
    }

    fn sha(&mut self, c: &Content) -> Result<String, String> {
        self.src.sha(c)
    }

    fn saved(&mut self, id: &str) -> Result<BackupRef, String> {
        self.src.saved(id)
    }

    fn bytes(&mut self, c: &Content, limit: u64) -> Result<Option<Vec<u8>>, String> {
        self.src.bytes(c, limit)
    }
}
