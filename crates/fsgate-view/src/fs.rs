//! FUSE requests as the gateway's operations. Each request is served on the thread that
//! read it (several threads read at once), through [`Gateway::serve`] under the run's
//! session, naming the process that asked; the gateway decides, records and executes.

use fsgate_gateway::ops;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsgate_base::error::GatewayError;
use fsgate_gateway::ops::{FileKind, Op, Output, PathStyle, RequestCtx, StatInfo};
use fsgate_gateway::{Gateway, How};
use fuser::{Errno, FileAttr, FileType, Generation, INodeNo, Request};

use crate::errno::{Refusal, errno};
use crate::handles::Handles;
use crate::nodes::{self, Nodes, ROOT};
use crate::peer::Peers;
use crate::standing::Standing;

/// What a request does with a person's answers to its questions (crate::standing).
pub(crate) enum Answers {
    /// An open or a create for writing: keeps those allowed.
    Keep(Arc<Standing>),
    /// A close: answered by what every handle open for writing holds.
    Open(Vec<Arc<Standing>>),
}

/// How long the kernel may keep a name's or an inode's attributes without asking
/// again (`cache.rs`: why this long, and what takes them back sooner).
pub(crate) const TTL: Duration = crate::cache::TTL;

/// The rule of a name that is not UTF-8 (no request can name it).
const RULE_NAME_ENCODING: &str = "workspace-name-encoding";

/// What a run did: operations allowed that read, that changed, and refusals.
#[derive(Debug, Default)]
pub struct Counts {
    /// Reads, lookups and listings allowed.
    pub reads: AtomicU64,
    /// Changes made.
    pub changes: AtomicU64,
    /// Requests the policy refused.
    pub refusals: AtomicU64,
    /// Of those, the refusals past a size limit (`limits.max_process_file_bytes`,
    /// `backup.max_file_bytes`...), by limit: what a person may raise for builds.
    too_large: Mutex<BTreeMap<String, u64>>,
}

impl Counts {
    fn note(&self, change: bool, r: &Result<Output, GatewayError>) {
        // The size limits (a rate's names end otherwise): fsgate's own few names.
        if let Err(GatewayError::Limit { rule, .. }) = r
            && rule.ends_with("_bytes")
            && let Ok(mut sizes) = self.too_large.lock()
        {
            *sizes.entry(rule.clone()).or_default() += 1;
        }
        let counter = match r {
            Ok(_) if change => &self.changes,
            Ok(_) => &self.reads,
            Err(GatewayError::Refused { .. } | GatewayError::Limit { .. }) => &self.refusals,
            Err(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The refusals past a size limit, by the limit's name.
    pub fn too_large(&self) -> BTreeMap<String, u64> {
        self.too_large.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// (reads, changes, refusals).
    pub fn totals(&self) -> (u64, u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.changes.load(Ordering::Relaxed),
            self.refusals.load(Ordering::Relaxed),
        )
    }
}

/// The view of one workspace.
pub struct View {
    pub(crate) gw: Arc<Gateway>,
    session: String,
    /// The workspace's real path, in the gateway's own namespace (for `statfs` only).
    pub(crate) root: std::path::PathBuf,
    /// Mounted in a user namespace of the child's, where only root (this process's
    /// user outside) is mapped: every file is shown as root's (an unmapped owner makes
    /// the kernel refuse every change).
    owned_by_root: bool,
    pub(crate) nodes: Arc<Mutex<Nodes>>,
    pub(crate) handles: Handles,
    peers: Peers,
    counts: Arc<Counts>,
    /// Where an `ask` rule's question goes (None: nobody is asked).
    asks: Option<Arc<dyn crate::asks::Askers>>,
    /// Takes back what the kernel caches when the view changes it.
    pub(crate) invalidator: Arc<crate::cache::Invalidator>,
    /// Reads the kernel makes from the gateway's own open files.
    pub(crate) passthrough: crate::passthrough::Passthrough,
    /// The kernel lets a file opened past its page cache be mapped shared (6.6+): a
    /// writer's private copy may then be mapped, and its pages must be kept.
    pub(crate) writers_map_shared: bool,
    /// The workspace's name when the gateway serves several (one view each): every
    /// request names its paths in it, and the gateway routes them there.
    workspace: Option<String>,
    /// A confined ACP agent's sessions: requests are recorded under the one that can
    /// be told, else under `session`.
    agent_sessions: Option<Arc<fsgate_gateway::agent_sessions::AgentSessions>>,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("session", &self.session)
            .finish()
    }
}

impl View {
    /// The view of `gw`'s workspace at `root`, every request recorded under `session`.
    pub fn new(gw: Arc<Gateway>, session: String, root: std::path::PathBuf) -> View {
        View {
            gw,
            session,
            root,
            owned_by_root: false,
            nodes: Arc::default(),
            handles: Handles::default(),
            peers: Peers::default(),
            counts: Arc::default(),
            asks: None,
            invalidator: Arc::default(),
            passthrough: Default::default(),
            writers_map_shared: false,
            workspace: None,
            agent_sessions: None,
        }
    }

    /// Records each request under the ACP session of `sessions` that can be told.
    pub fn for_agent_sessions(
        mut self,
        sessions: Arc<fsgate_gateway::agent_sessions::AgentSessions>,
    ) -> View {
        self.agent_sessions = Some(sessions);
        self
    }

    /// The view of the workspace `name` among the several `gw` serves: its paths are
    /// named `/<name>/...`, and the gateway routes them there.
    pub fn of_workspace(mut self, name: &str) -> View {
        self.workspace = Some(name.to_owned());
        self
    }

    /// Counts what it does into `counts` (shared by a run's views).
    pub fn counting(mut self, counts: Arc<Counts>) -> View {
        self.counts = counts;
        self
    }

    /// `ask` rules put their questions to `asks` (`fsgate asks`, or the editor).
    pub fn asking(mut self, asks: Arc<dyn crate::asks::Askers>) -> View {
        self.asks = Some(asks);
        self
    }

    /// The view as mounted in a user namespace where only root is mapped (`fsgate run`
    /// by a user who is not root).
    pub fn in_user_namespace(mut self) -> View {
        self.owned_by_root = true;
        self
    }

    /// `attr` as the mount's user namespace sees its owner.
    pub(crate) fn owned(&self, mut attr: FileAttr) -> FileAttr {
        if self.owned_by_root {
            (attr.uid, attr.gid) = (0, 0);
        }
        attr
    }

    /// What takes back the kernel's view of paths other doors change: give it to the
    /// gateway that serves this view's workspace ([`Gateway::watch_changes`]).
    pub fn outside_changes(&self) -> Arc<dyn fsgate_gateway::ChangeWatch> {
        Arc::new(crate::outside::OutsideChanges {
            nodes: Arc::clone(&self.nodes),
            invalidator: Arc::clone(&self.invalidator),
            versions: self.handles.versions(),
        })
    }

    /// What the run did so far.
    pub fn counts(&self) -> Arc<Counts> {
        Arc::clone(&self.counts)
    }

    fn ctx(&self, req: &Request, standing: Option<&Answers>) -> RequestCtx {
        let peer = self.peers.name(req.pid());
        let waits = &self.invalidator.waits;
        let asker = (self.asks.as_ref()).map(|a| {
            let asker = Arc::clone(a).for_peer(peer.clone(), req.pid());
            crate::waits::bounded(asker, Arc::clone(waits))
        });
        let policy = || -> Arc<str> { self.gw.policy().sha256().into() };
        RequestCtx {
            style: PathStyle::Rooted,
            session: match &self.agent_sessions {
                Some(s) => s.current(),
                None => self.session.clone(),
            },
            door: &crate::outside::DOOR,
            asker: match standing {
                Some(Answers::Keep(s)) => asker.map(|a| s.keeping(a, policy())),
                Some(Answers::Open(open)) => {
                    asker.map(|a| crate::standing::answering(open.clone(), a, policy()))
                }
                None => asker,
            },
            peer,
            scope: Default::default(),
            notifier: None,
        }
    }

    /// Serves `op` for the process that sent `req`, counting what it did. A change and
    /// a refusal are answered once their records are durable, as at every door; an
    /// allowed read is not waited for: it is counted with the same process's other
    /// reads in one `reads` record, written within a second and before the run's
    /// `stop` (one `git status` makes thousands of lookups: a record and a sync each
    /// would be megabytes and seconds).
    pub(crate) fn serve(&self, req: &Request, op: Op) -> Result<Output, GatewayError> {
        self.serve_standing(req, op, None)
    }

    /// [`serve`](Self::serve), an open's allowed questions kept, or a close's answered
    /// from the open handles' (crate::standing).
    pub(crate) fn serve_standing(
        &self,
        req: &Request,
        op: Op,
        standing: Option<&Answers>,
    ) -> Result<Output, GatewayError> {
        let change = op.is_mutating();
        let op = match &self.workspace {
            Some(name) => op.in_workspace(name),
            None => op,
        };
        let request = fsgate_gateway::Request::Op(op);
        let ctx = self.ctx(req, standing);
        let r = if change {
            self.gw.serve(&ctx, request, How::alone()).0
        } else {
            let batch = fsgate_gateway::Batch::coalescing();
            let (r, _lease) = self.gw.serve(&ctx, request, How::in_batch(&batch));
            match r {
                Ok(out) => {
                    // Held or queued; the run's `stop` record is written after it.
                    drop(batch);
                    Ok(out)
                }
                Err(e) => self.gw.settle(batch).and(Err(e)),
            }
        };
        self.counts.note(change, &r);
        r
    }

    /// Records the refusal of `name` in `parent`, a name that is not UTF-8 (shown lossily,
    /// escaped); its errno.
    fn unnamable(&self, req: &Request, parent: INodeNo, name: &OsStr) -> Errno {
        let dir = self.path(parent).unwrap_or_default();
        let shown = format!("{}/{}", dir.trim_end_matches('/'), name.to_string_lossy());
        let reason = format!(
            "the name {} is not UTF-8: fsgate names every path in UTF-8, so no request can name it",
            fsgate_base::text::escape_for_humans(&shown)
        );
        let error = GatewayError::Refused {
            reason,
            rule: RULE_NAME_ENCODING.into(),
            path: shown,
        };
        let request = fsgate_gateway::Request::refusal(
            "view_name",
            RULE_NAME_ENCODING,
            (error.code(), error.to_string()),
        );
        let recorded = self.gw.serve(&self.ctx(req, None), request, How::alone()).0;
        self.counts.note(false, &Err(error));
        match recorded {
            Ok(_) => Errno::EILSEQ,
            Err(_) => Errno::EIO,
        }
    }

    /// The workspace path of `ino`.
    pub(crate) fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        let nodes = self.nodes.lock().map_err(|_| Errno::EIO)?;
        nodes.path(ino.0).ok_or(Errno::ESTALE)
    }

    /// Whether node `ino` lost its name (removed, or renamed over) while still held.
    pub(crate) fn detached(&self, ino: INodeNo) -> bool {
        self.nodes.lock().is_ok_and(|n| n.detached(ino.0))
    }

    /// The workspace path of `name` in `parent`. A name that is not UTF-8 is none the
    /// gateway can name: refused (EILSEQ), and recorded as refused.
    pub(crate) fn child(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<(String, String), Errno> {
        let Some(name) = name.to_str() else {
            return Err(self.unnamable(req, parent, name));
        };
        let nodes = self.nodes.lock().map_err(|_| Errno::EIO)?;
        let path = nodes.child_path(parent.0, name).ok_or(Errno::ESTALE)?;
        Ok((path, name.to_string()))
    }

    /// `stat` of `path`: its node id and attributes. A refusal hides the name.
    pub(crate) fn stat(&self, req: &Request, path: &str) -> Result<(u64, FileAttr), Errno> {
        self.stat_or_absent(req, path)?.ok_or(Errno::ENOENT)
    }

    /// [`stat`](Self::stat), where a name that is not there (and that the policy lets
    /// be seen) is `None`; a name the policy hides is still an error (ENOENT).
    fn stat_or_absent(&self, req: &Request, path: &str) -> Result<Option<(u64, FileAttr)>, Errno> {
        let Some(info) = self.lstat_or_absent(req, path)? else {
            return Ok(None);
        };
        let ino = if path == "/" {
            ROOT
        } else {
            nodes::node_id(info.ino, info.times[2])
        };
        Ok(Some((ino, self.owned(attr(ino, &info)))))
    }

    /// The gateway's `stat` of `path` itself, a symlink not followed (the kernel
    /// follows it, through the view). A refusal hides the name.
    pub(crate) fn lstat(&self, req: &Request, path: &str) -> Result<StatInfo, Errno> {
        self.lstat_or_absent(req, path)?.ok_or(Errno::ENOENT)
    }

    /// [`lstat`](Self::lstat), where a name that is not there is `None`.
    fn lstat_or_absent(&self, req: &Request, path: &str) -> Result<Option<StatInfo>, Errno> {
        let op = Op::Stat(ops::Stat {
            path: path.to_string(),
            follow: false,
        });
        match self.serve(req, op) {
            Ok(Output::Stat { info, .. }) => Ok(Some(info)),
            Ok(_) => Err(Errno::EIO),
            Err(GatewayError::NotFound { .. }) => Ok(None),
            Err(e) => Err(errno(&e, Refusal::Hidden)),
        }
    }

    /// [`stat`](Self::stat) of `name` in `parent`, remembered as a lookup the kernel
    /// now holds.
    pub(crate) fn look_up(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<FileAttr, Errno> {
        self.look_up_or_absent(req, parent, name)?
            .ok_or(Errno::ENOENT)
    }

    /// The attributes of `name` in `parent` now, as [`look_up`](Self::look_up) gives
    /// them but without counting a lookup: for a reply whose lookup was counted already
    /// (a created file asked again after its mode was set).
    pub(crate) fn attr_again(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let (path, name) = self.child(req, parent, name)?;
        let (ino, mut attr) = self.stat_or_absent(req, &path)?.ok_or(Errno::ENOENT)?;
        if let Ok(mut nodes) = self.nodes.lock() {
            attr.ino = INodeNo(nodes.settle(ino, parent.0, &name));
        }
        self.not_below_copy(&mut attr);
        Ok(attr)
    }

    /// [`look_up`](Self::look_up), where a name that is not there is `None`: the
    /// kernel may remember that (see `cache.rs`), a hidden name it may not.
    pub(crate) fn look_up_or_absent(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
    ) -> Result<Option<FileAttr>, Errno> {
        let (path, name) = self.child(req, parent, name)?;
        let Some((ino, mut attr)) = self.stat_or_absent(req, &path)? else {
            return Ok(None);
        };
        if let Ok(mut nodes) = self.nodes.lock() {
            let node = nodes.settle(ino, parent.0, &name);
            attr.ino = INodeNo(node);
            nodes.found(node, parent.0, &name);
        }
        self.not_below_copy(&mut attr);
        Ok(Some(attr))
    }
}

/// A time given as seconds and nanoseconds since the epoch (before it: the epoch).
fn at(secs: i64, nanos: i64) -> SystemTime {
    u64::try_from(secs)
        .ok()
        .map(|s| UNIX_EPOCH + Duration::new(s, u32::try_from(nanos).unwrap_or(0)))
        .unwrap_or(UNIX_EPOCH)
}

/// The attributes FUSE reports for `info`, as node `ino`.
pub(crate) fn attr(ino: u64, info: &StatInfo) -> FileAttr {
    let [mtime, atime, crtime] = info.times;
    let ctime = at(info.ctime.0, info.ctime.1);
    FileAttr {
        ino: INodeNo(ino),
        size: info.size,
        blocks: info.size.div_ceil(512),
        atime: atime.unwrap_or(UNIX_EPOCH),
        mtime: mtime.unwrap_or(UNIX_EPOCH),
        ctime,
        crtime: crtime.unwrap_or(UNIX_EPOCH),
        kind: kind(info.kind),
        perm: (info.mode & 0o7777) as u16,
        nlink: u32::try_from(info.nlink).unwrap_or(u32::MAX),
        uid: info.uid,
        gid: info.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// The attributes of a file the view holds open (its own `fstat`, already decided).
pub(crate) fn attr_of_file(ino: u64, meta: &std::fs::Metadata) -> FileAttr {
    use std::os::unix::fs::MetadataExt;
    FileAttr {
        ino: INodeNo(ino),
        size: meta.len(),
        blocks: meta.blocks(),
        atime: at(meta.atime(), meta.atime_nsec()),
        mtime: at(meta.mtime(), meta.mtime_nsec()),
        ctime: at(meta.ctime(), meta.ctime_nsec()),
        crtime: meta.created().unwrap_or(UNIX_EPOCH),
        kind: if meta.is_dir() {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: (meta.mode() & 0o7777) as u16,
        nlink: u32::try_from(meta.nlink()).unwrap_or(u32::MAX),
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// What an entry is, as FUSE says it (a link as a link: the kernel follows it).
pub(crate) fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::File | FileKind::Other => FileType::RegularFile,
    }
}

/// The generation every node has (inode numbers are not reused while the view runs
/// as far as it knows).
pub(crate) const GENERATION: Generation = Generation(0);
