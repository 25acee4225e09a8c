//! What the kernel may keep without asking the gateway again, and how the view takes it
//! back.
//!
//! Names and attributes: the kernel keeps a found name and a node's attributes for
//! [`TTL`]. The policy's decision on a `stat` depends on the path, the policy, the kind,
//! the size and where a symlink leads. A run's policy is fixed (SIGHUP goes to the
//! command, nothing reloads it), and a name the policy hides is never cached (a refused
//! lookup is an error, which the kernel asks again); a name that is not there is (node
//! 0: a build or an interpreter probes the same missing names over and over), and a
//! directory's listing is kept across its opens. What another door changes (an agent's
//! file tool under `fsgate acp`) is taken back before that door answers (`outside.rs`).
//! What changes through the view is
//! taken back at once: the kernel itself drops or moves the names it creates, removes
//! and renames, and a file replaced by a write applied at close has its node's
//! attributes, pages and name invalidated here before the close returns (but for a
//! close while six others wait so: see [`Invalidator::replaced`]). What a program
//! outside the view changes (size, kind, a symlink's target) is seen, and decided, at
//! most [`TTL`] later: that bounds how long a cached entry can outlive the decision the
//! policy would make now. Every open still reaches the gateway (decided and recorded);
//! a lookup or `stat` the kernel answers from its cache is not recorded again.
//!
//! Pages: a file opened for reading keeps the kernel's page cache
//! ([`FopenFlags::FOPEN_KEEP_CACHE`]) only when the file opened is the node's own
//! version (its inode number and birth time give the node id, `nodes.rs`): a write
//! through the view replaces a file (a new version, which keeps its node, as a file
//! written in place keeps its inode, but whose pages were invalidated and which is not
//! the node's first version, so not kept), so cached pages are never another version's. A file changed in place from outside is caught by the
//! kernel's own check of its modification time (`FUSE_AUTO_INVAL_DATA`) once its
//! attributes are asked again.

use std::ffi::OsStr;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use fuser::{FopenFlags, INodeNo, Notifier};

use crate::waits::Waits;

/// How long the kernel keeps a name or a node's attributes.
pub(crate) const TTL: Duration = Duration::from_secs(10);

/// How many nodes may wait for the invalidator's own thread; beyond, a node is left to
/// the kernel's own checks (its pages are not kept at the next open: `read_flags`).
const DEFERRED_AT_MOST: usize = 65_536;

/// The kernel's caches, taken back when the view changes what they hold.
#[derive(Default)]
pub(crate) struct Invalidator {
    notifier: OnceLock<Notifier>,
    /// The view's threads waiting now (for a writeback or an answer, `waits.rs`).
    pub(crate) waits: Arc<Waits>,
    /// Replaced nodes left to the invalidator's own thread.
    deferred: Arc<Deferred>,
}

/// What is taken back: a replaced node, and the name it was found as (its directory's
/// node and the name).
type Replaced = (Option<u64>, Option<(u64, String)>);

/// Replaced nodes taken back on a thread of their own, and whether it was started.
#[derive(Default)]
struct Deferred {
    nodes: Mutex<(Vec<Replaced>, bool)>,
    wake: Condvar,
}

impl std::fmt::Debug for Invalidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invalidator").finish()
    }
}

impl Invalidator {
    /// Notifications go through `notifier` from now on (once the session exists).
    pub(crate) fn connect(&self, notifier: Notifier) {
        let _ = self.notifier.set(notifier);
    }

    /// Node `ino`, found as `name` in `parent`, was replaced by a change of the view's:
    /// its attributes and pages, and the name, are asked again. Called from a close, a
    /// sync or a change of times, never from a lookup. The node is taken back before
    /// this returns unless as many of the view's threads as may wait do so already
    /// (`waits.rs`): then on the invalidator's own thread, so that every thread of the
    /// view waiting on a writeback only its threads can serve is never possible. The name is always
    /// taken back there: that takes its directory's lock, which a rename or removal in
    /// it may hold while it waits for the file's own, which the kernel holds through
    /// an `fsync` or a `setattr` that this request serves.
    pub(crate) fn replaced(&self, ino: u64, at: Option<(u64, String)>) {
        let Some(n) = self.notifier.get() else {
            return;
        };
        match self.waits.enter() {
            Some(_wait) => {
                take_back(n, (Some(ino), None));
                self.defer(n, (None, at));
            }
            None => self.defer(n, (Some(ino), at)),
        }
    }

    /// Leaves `what` to the invalidator's thread, started the first time (if it cannot
    /// start, a node is taken back here and a name left to its [`TTL`]).
    fn defer(&self, n: &Notifier, what: Replaced) {
        if what == (None, None) {
            return;
        }
        let Ok(mut queue) = self.deferred.nodes.lock() else {
            return;
        };
        if queue.0.len() >= DEFERRED_AT_MOST {
            tracing::debug!("view: {what:?} left to the kernel's own checks");
            return;
        }
        if !queue.1 {
            let (deferred, n) = (Arc::clone(&self.deferred), n.clone());
            let started = std::thread::Builder::new()
                .name("fsgate-inval".into())
                .spawn(move || deferred.serve(&n));
            queue.1 = started.is_ok();
        }
        if !queue.1 {
            drop(queue);
            return take_back(n, (what.0, None));
        }
        queue.0.push(what);
        self.deferred.wake.notify_one();
    }

    /// The entry `name` of directory `parent` (and `node`, the node it held, if any)
    /// was changed by another door: the name (found or not found), the node's
    /// attributes and pages and the directory's attributes and listing are asked again.
    /// Never called from a request of the view's own (see `outside.rs`).
    pub(crate) fn changed_outside(&self, parent: u64, name: &str, node: Option<u64>) {
        let Some(n) = self.notifier.get() else {
            return;
        };
        let quiet = |what: &str, r: std::io::Result<()>| {
            if let Err(e) = r
                && e.raw_os_error() != Some(libc::ENOENT)
            {
                tracing::debug!("view: invalidating {what} after another door's change: {e}");
            }
        };
        quiet("a name", n.inval_entry(INodeNo(parent), OsStr::new(name)));
        if let Some(node) = node {
            quiet("a node", n.inval_inode(INodeNo(node), 0, 0));
        }
        quiet("a directory", n.inval_inode(INodeNo(parent), 0, 0));
    }
}

impl Deferred {
    /// Takes back the nodes left here, for as long as the view runs.
    fn serve(&self, n: &Notifier) {
        loop {
            let batch = {
                let Ok(mut queue) = self.nodes.lock() else {
                    return;
                };
                while queue.0.is_empty() {
                    queue = match self.wake.wait(queue) {
                        Ok(q) => q,
                        Err(_) => return,
                    };
                }
                std::mem::take(&mut queue.0)
            };
            for what in batch {
                take_back(n, what);
            }
        }
    }
}

/// Asks the kernel to drop a node's attributes and pages, and a name.
fn take_back(n: &Notifier, (ino, at): Replaced) {
    // ENOENT: the kernel no longer holds it, nothing to take back.
    if let Some(ino) = ino
        && let Err(e) = n.inval_inode(INodeNo(ino), 0, 0)
        && e.raw_os_error() != Some(libc::ENOENT)
    {
        tracing::debug!("view: invalidating node {ino}: {e}");
    }
    if let Some((parent, name)) = at
        && let Err(e) = n.inval_entry(INodeNo(parent), OsStr::new(&name))
        && e.raw_os_error() != Some(libc::ENOENT)
    {
        tracing::debug!("view: invalidating a name in node {parent}: {e}");
    }
}

/// The open flags of a file opened for reading as node `ino`: the page cache kept when
/// `file` is the node's own version. Its close is not waited on (`FOPEN_NOFLUSH`): a
/// handle that only reads has nothing to apply, so the kernel need not ask the gateway
/// before `close` returns (its release still comes, without a wait).
pub(crate) fn read_flags(file: &std::fs::File, ino: u64) -> FopenFlags {
    use std::os::unix::fs::MetadataExt;
    let keep = match file.metadata() {
        Ok(m) if crate::nodes::node_id(m.ino(), m.created().ok()) == ino => {
            FopenFlags::FOPEN_KEEP_CACHE
        }
        _ => FopenFlags::empty(),
    };
    keep | FopenFlags::FOPEN_NOFLUSH
}

/// What a name that is not there is answered with: node 0, which the kernel keeps as
/// "not there" for [`TTL`]. A name the policy hides is answered with an error instead,
/// asked again (and refused, and recorded) every time.
pub(crate) fn absent() -> fuser::FileAttr {
    fuser::FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: std::time::UNIX_EPOCH,
        mtime: std::time::UNIX_EPOCH,
        ctime: std::time::UNIX_EPOCH,
        crtime: std::time::UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

/// How a directory is opened: its listing (decided and recorded at each open) is kept
/// by the kernel across opens until the directory changes (the kernel drops it itself
/// for the view's own changes, `outside.rs` for other doors', its modification time
/// for a change from outside fsgate, seen within [`TTL`]).
pub(crate) const DIR_FLAGS: FopenFlags =
    FopenFlags::FOPEN_CACHE_DIR.union(FopenFlags::FOPEN_KEEP_CACHE);

/// Asks the kernel to drop a node's cached pages when its modification time or size
/// is found changed (a file changed in place from outside the view).
pub(crate) fn init(config: &mut fuser::KernelConfig) {
    let _ = config.add_capabilities(fuser::InitFlags::FUSE_AUTO_INVAL_DATA);
}
