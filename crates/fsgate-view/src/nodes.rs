//! The inodes the kernel holds: each node id is the file's real inode number with its
//! birth time mixed into the top bits, remembered with the directory and name it was
//! found under, so a request on it names a workspace path.
//!
//! Why not the inode number alone: a change through the gateway replaces a file (a new
//! inode), and the filesystem soon gives the freed number to the next new file; the
//! kernel, still holding the old number for the old name, would then read the new file
//! through the old name (seen with git's lock files). With the birth time in it, a
//! reused number is a new node id. The id is stable for one version of a file, which is
//! what git compares (with made-up ids that change, it reads every file again).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// The root's node id (FUSE's own).
pub(crate) const ROOT: u64 = 1;

/// The deepest path walked up from a node: the kernel's `PATH_MAX` in one-byte names.
const MAX_DEPTH: usize = 4096;

/// Bits of the inode number kept whole (ext4, XFS and btrfs numbers fit).
const INO_BITS: u32 = 40;

/// The node id of a file with inode number `ino`, born at `born` (where the filesystem
/// says; else the inode number alone). Never the root's id, never 0.
pub(crate) fn node_id(ino: u64, born: Option<SystemTime>) -> u64 {
    let nanos = born
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    let tag = if nanos == 0 {
        0
    } else {
        (nanos.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> INO_BITS) << INO_BITS
    };
    match (ino & ((1 << INO_BITS) - 1)) | tag {
        0 | ROOT => u64::MAX,
        id => id,
    }
}

#[derive(Debug)]
struct Node {
    parent: u64,
    name: String,
    /// Lookups the kernel has not forgotten yet.
    lookups: u64,
}

/// Every node the kernel knows, and which node each (directory, name) holds now.
#[derive(Debug, Default)]
pub(crate) struct Nodes {
    nodes: HashMap<u64, Node>,
    names: HashMap<(u64, String), u64>,
    /// Nodes whose file a write through the view just replaced: the next version found
    /// under their name is still theirs.
    replaced: std::collections::HashSet<u64>,
    /// A version's own id -> the node it continues (a file written through the view
    /// keeps its node, as a file written in place keeps its inode), and back.
    aliases: HashMap<u64, u64>,
    alias_of: HashMap<u64, Vec<u64>>,
    /// Nodes whose name a removal or a rename over it took while the kernel still held
    /// them (a file still open): what is written to them goes nowhere, as on a disk.
    detached: std::collections::HashSet<u64>,
}

impl Nodes {
    /// The workspace path of `ino` (`/` for the root), if it is known.
    pub(crate) fn path(&self, ino: u64) -> Option<String> {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let node = self.nodes.get(&at)?;
            parts.push(node.name.as_str());
            at = node.parent;
            if parts.len() > MAX_DEPTH {
                return None;
            }
        }
        let mut path = String::new();
        for part in parts.iter().rev() {
            path.push('/');
            path.push_str(part);
        }
        if path.is_empty() {
            path.push('/');
        }
        Some(path)
    }

    /// For a workspace path (`a/b`, `/a/b`): the directory node the kernel holds it in,
    /// its last name, and the node the kernel holds under that name, if any. None when
    /// the kernel holds no directory on the way (so nothing of the path).
    pub(crate) fn held_at(&self, path: &str) -> Option<(u64, String, Option<u64>)> {
        let mut parts = path.split('/').filter(|p| !p.is_empty() && *p != ".");
        let mut name = parts.next()?;
        let mut dir = ROOT;
        for next in parts {
            dir = *self.names.get(&(dir, name.to_string()))?;
            name = next;
        }
        let node = self.names.get(&(dir, name.to_string())).copied();
        Some((dir, name.to_string(), node))
    }

    /// The directory and name `ino` was last found under.
    pub(crate) fn place(&self, ino: u64) -> Option<(u64, String)> {
        self.nodes.get(&ino).map(|n| (n.parent, n.name.clone()))
    }

    /// The workspace path of `name` in the directory `parent`.
    pub(crate) fn child_path(&self, parent: u64, name: &str) -> Option<String> {
        let mut path = self.path(parent)?;
        if !path.ends_with('/') {
            path.push('/');
        }
        path.push_str(name);
        Some(path)
    }

    /// The kernel now holds one more lookup of `ino`, found as `name` in `parent`.
    pub(crate) fn found(&mut self, ino: u64, parent: u64, name: &str) {
        if ino == ROOT {
            return;
        }
        let key = (parent, name.to_string());
        self.names.insert(key, ino);
        self.detached.remove(&ino);
        let node = self.nodes.entry(ino).or_insert_with(|| Node {
            parent,
            name: String::new(),
            lookups: 0,
        });
        node.parent = parent;
        node.name = name.to_string();
        node.lookups += 1;
    }

    /// A write through the view replaced the file of node `ino` with a new version.
    pub(crate) fn replaced(&mut self, ino: u64) {
        if self.nodes.contains_key(&ino) {
            self.replaced.insert(ino);
        }
    }

    /// The node that version id `id`, found as `name` in `parent`, stands for: the
    /// node whose file a write through the view replaced there, else the one it
    /// continues already, else its own. A program that compares the inode of its open
    /// file with its name's (SQLite does) sees the same file.
    pub(crate) fn settle(&mut self, id: u64, parent: u64, name: &str) -> u64 {
        if let Some(&node) = self.aliases.get(&id) {
            return node;
        }
        let held = self.names.get(&(parent, name.to_string())).copied();
        match held {
            Some(node) if node != id && self.replaced.remove(&node) => {
                // Only the newest version is found under the name again: the older
                // ones were replaced, so their aliases go (else one per write is kept
                // for as long as the kernel holds the node).
                let older = self.alias_of.insert(node, vec![id]).unwrap_or_default();
                for old in older {
                    self.aliases.remove(&old);
                }
                self.aliases.insert(id, node);
                node
            }
            _ => id,
        }
    }

    /// The kernel forgot `n` lookups of `ino`.
    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 {
            let key = (node.parent, std::mem::take(&mut node.name));
            if self.names.get(&key) == Some(&ino) {
                self.names.remove(&key);
            }
            self.nodes.remove(&ino);
            self.replaced.remove(&ino);
            self.detached.remove(&ino);
            for id in self.alias_of.remove(&ino).unwrap_or_default() {
                self.aliases.remove(&id);
            }
        }
    }

    /// `name` in `parent` was removed.
    pub(crate) fn removed(&mut self, parent: u64, name: &str) {
        if let Some(ino) = self.names.remove(&(parent, name.to_string())) {
            self.detach(ino);
        }
    }

    /// Whether the name of `ino` was removed, or renamed over, while it was held.
    pub(crate) fn detached(&self, ino: u64) -> bool {
        self.detached.contains(&ino)
    }

    fn detach(&mut self, ino: u64) {
        if self.nodes.contains_key(&ino) {
            self.detached.insert(ino);
        }
    }

    /// `name` in `parent` is now `new_name` in `new_parent`.
    pub(crate) fn moved(&mut self, from: (u64, &str), to: (u64, &str)) {
        let over = self.names.remove(&(to.0, to.1.to_string()));
        let moving = self.names.remove(&(from.0, from.1.to_string()));
        if let Some(old) = over.filter(|old| Some(*old) != moving) {
            self.detach(old);
        }
        let Some(ino) = moving else {
            return;
        };
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.parent = to.0;
            node.name = to.1.to_string();
        }
        self.names.insert((to.0, to.1.to_string()), ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_named_by_its_path_and_follows_a_rename() {
        let mut n = Nodes::default();
        assert_eq!(n.path(ROOT).as_deref(), Some("/"));
        n.found(10, ROOT, "src");
        n.found(11, 10, "a.rs");
        assert_eq!(n.path(11).as_deref(), Some("/src/a.rs"));
        assert_eq!(n.child_path(ROOT, "x").as_deref(), Some("/x"));
        n.moved((ROOT, "src"), (ROOT, "lib"));
        assert_eq!(n.path(11).as_deref(), Some("/lib/a.rs"));
        n.forget(11, 1);
        assert_eq!(n.path(11), None);
        assert_eq!(node_id(ROOT, None), u64::MAX);
        // A reused inode number is another node when the file was born later.
        let t = |s| Some(UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_ne!(node_id(77, t(1_000)), node_id(77, t(1_001)));
        assert_eq!(node_id(77, t(1_000)), node_id(77, t(1_000)));
        assert_eq!(node_id(77, None), 77);
    }

    /// A node whose name is removed, or renamed over, is detached until it is found
    /// under a name again; the node moved is not.
    #[test]
    fn a_node_losing_its_name_is_detached() {
        let mut n = Nodes::default();
        n.found(10, ROOT, "a");
        n.found(11, ROOT, "b");
        n.found(12, ROOT, "c");
        n.removed(ROOT, "a");
        assert!(n.detached(10));
        n.moved((ROOT, "c"), (ROOT, "b"));
        assert!(n.detached(11) && !n.detached(12));
        assert_eq!(n.path(12).as_deref(), Some("/b"));
        n.found(10, ROOT, "a");
        assert!(!n.detached(10));
        n.removed(ROOT, "never-found");
        n.forget(11, 1);
        assert!(!n.detached(11));
    }

    /// A file a write through the view replaced keeps its node under its name; a new
    /// file under another name, or a version found without a write, gets its own.
    #[test]
    fn a_replaced_file_keeps_its_node() {
        let mut n = Nodes::default();
        n.found(10, ROOT, "t.db");
        assert_eq!(n.settle(11, ROOT, "t.db"), 11, "not replaced: its own id");
        n.replaced(10);
        assert_eq!(n.settle(12, ROOT, "t.db"), 10);
        assert_eq!(n.settle(12, ROOT, "t.db"), 10, "remembered");
        assert_eq!(n.settle(13, ROOT, "other"), 13);
        n.forget(10, 1);
        assert_eq!(n.settle(12, ROOT, "t.db"), 12, "forgotten with its node");
    }

    /// A file written again and again while the kernel holds it keeps one alias, its
    /// newest version's, not one per write.
    #[test]
    fn a_file_written_many_times_keeps_one_alias() {
        let mut n = Nodes::default();
        n.found(10, ROOT, "log");
        for version in 100..1100 {
            n.replaced(10);
            assert_eq!(n.settle(version, ROOT, "log"), 10);
        }
        assert_eq!(n.aliases.len(), 1);
        assert_eq!(n.alias_of.get(&10).map(Vec::len), Some(1));
        assert_eq!(
            n.settle(1099, ROOT, "log"),
            10,
            "the newest is still this node"
        );
    }
}
