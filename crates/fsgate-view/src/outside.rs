//! Changes another door made: under `fsgate acp --confine-agent` the agent's own file
//! tools write through the ACP door, not through the view. What the kernel holds of
//! such a path (its name, or that it was not there; the node's attributes and pages;
//! the directory's listing) is taken back before that door answers, so the agent's
//! shell, run right after its edit, reads the file as the edit left it.
//!
//! The view's own changes need none of this (the kernel updates what it holds itself,
//! and `writes.rs` takes back what a write at close replaced); they are skipped, which
//! also keeps a notification from waiting on a directory lock the kernel holds for the
//! very request being served.

use std::sync::{Arc, Mutex};

use fsgate_gateway::{ChangeNote, ChangeWatch};

use crate::cache::Invalidator;
use crate::nodes::Nodes;

/// The door name the view's own requests carry.
pub(crate) const TRANSPORT: &str = "view";

/// The view, as its requests carry it. It reads files' bytes as they are (no read of
/// text is ever refused as binary or too large for an answer), so it names no way to
/// read them otherwise.
pub(crate) const DOOR: fsgate_gateway::DoorSpec = fsgate_gateway::DoorSpec {
    name: TRANSPORT,
    content_copies: 1,
    read_in_parts: "",
    binary_read: "",
    media_read: "",
    for_processes: true,
};

/// Takes back what the kernel holds of paths other doors changed, and counts a new
/// version of their nodes (a private copy that held the old one is not joined as it
/// is by the next writer, but filled again).
#[derive(Debug)]
pub(crate) struct OutsideChanges {
    pub(crate) nodes: Arc<Mutex<Nodes>>,
    pub(crate) invalidator: Arc<Invalidator>,
    pub(crate) versions: crate::handles::Versions,
}

impl ChangeWatch for OutsideChanges {
    fn changed(&self, note: &ChangeNote, door: &str) {
        if door == TRANSPORT {
            return;
        }
        for path in std::iter::once(&note.path).chain(note.path2.as_ref()) {
            let held = match self.nodes.lock() {
                Ok(nodes) => nodes.held_at(path.as_str()),
                Err(_) => None,
            };
            if let Some((parent, name, node)) = held {
                if let Some(node) = node {
                    self.versions.wrote(node);
                }
                self.invalidator.changed_outside(parent, &name, node);
            }
        }
    }
}
