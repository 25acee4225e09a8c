//! Kernel passthrough for reads (Linux 6.9+, as root): a large file opened for reading
//! is read by the kernel from the very file the gateway opened, without a request per
//! page. The open is decided and recorded as every open is; only the bytes skip this
//! process.
//!
//! The kernel puts every open of one inode in the same mode and with the same backing
//! file, so one backing id is shared by the open handles of a node (a node is one version
//! of a file, `nodes.rs`) and closed with the last of them; a file is passed through or
//! not by its size, the same for every open of that version.
//!
//! Off ([`ASKED`]): while a file is open in passthrough, the kernel fails with EIO any
//! open of it that is not (Linux 6.18, `fuse_file_io_open`), and an open for writing
//! cannot be: its bytes must go to a private copy, decided at close, never to the file.
//! A log read by `tail -f` while a process appends to it would fail. Measured on: a warm
//! 64 MiB read is as fast with the page cache kept across opens (`cache.rs`).

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use fuser::{BackingId, FileHandle, FopenFlags, ReplyOpen};

/// Whether the view asks the kernel for passthrough at all (see above).
const ASKED: bool = false;

/// Files smaller than this are served by the gateway, through the page cache (each
/// passthrough open costs two more calls to the kernel than a read of a small file).
const MIN_BYTES: u64 = 1 << 20;

/// The backing ids of the nodes open for reading in passthrough.
#[derive(Debug, Default)]
pub(crate) struct Passthrough {
    /// The kernel agreed to it at `init` (FUSE_PASSTHROUGH).
    enabled: AtomicBool,
    /// Node -> its backing id, while a handle holds it.
    nodes: Mutex<HashMap<u64, Weak<BackingId>>>,
    /// Handle -> the backing id it holds.
    held: Mutex<HashMap<u64, Arc<BackingId>>>,
}

impl Passthrough {
    /// Asks the kernel for passthrough at `init`; the view uses it where it agreed.
    pub(crate) fn init(&self, config: &mut fuser::KernelConfig) {
        let asked = ASKED
            && config
                .add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH)
                .is_ok()
            && config.set_max_stack_depth(1).is_ok();
        self.enabled.store(asked, Ordering::Relaxed);
    }

    /// Answers the open of node `ino` as handle `fh` reading `file`: passed through when
    /// the kernel can, else with `flags` (the page cache's).
    pub(crate) fn reply(
        &self,
        reply: ReplyOpen,
        (fh, ino): (u64, u64),
        file: &File,
        flags: FopenFlags,
    ) {
        match self.backing(&reply, ino, file) {
            Some(id) => {
                // Held before the kernel knows the handle (its release may come at once).
                if let Ok(mut held) = self.held.lock() {
                    held.insert(fh, Arc::clone(&id));
                }
                reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &id);
            }
            None => reply.opened(FileHandle(fh), flags),
        }
    }

    /// The node's backing id, registered with the kernel for `file` if none is held.
    fn backing(&self, reply: &ReplyOpen, ino: u64, file: &File) -> Option<Arc<BackingId>> {
        if !self.enabled.load(Ordering::Relaxed) || file.metadata().ok()?.len() < MIN_BYTES {
            return None;
        }
        let mut nodes = self.nodes.lock().ok()?;
        if let Some(id) = nodes.get(&ino).and_then(Weak::upgrade) {
            return Some(id);
        }
        match reply.open_backing(file) {
            Ok(id) => {
                let id = Arc::new(id);
                nodes.retain(|_, w| w.strong_count() > 0);
                nodes.insert(ino, Arc::downgrade(&id));
                Some(id)
            }
            Err(e) => {
                // Not allowed here (no CAP_SYS_ADMIN, or the kernel refuses): the gateway
                // serves the data, from now on.
                tracing::debug!("view: no kernel passthrough: {e}");
                self.enabled.store(false, Ordering::Relaxed);
                None
            }
        }
    }

    /// Handle `fh` was released: its hold on the backing id ends.
    pub(crate) fn released(&self, fh: u64) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&fh);
        }
    }
}
