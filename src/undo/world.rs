//! What the undo looks at and acts on: the workspace itself (each action a request
//! through the gateway), or for `--dry-run` a model of it, the disk as it is with the
//! actions laid over it, so a dry run checks each step against the state the steps
//! before it would leave.

use fsgate_gateway::ops;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use fsgate_base::sha256::Sha256;
use serde_json::{Map, Value};

use fsgate_backup::{BackupRef, BackupStore};
use fsgate_base::path::RelPath;
use fsgate_gateway::ops::{Op, RequestCtx};
use fsgate_gateway::{Gateway, How, Request};
use fsgate_workspace::{FileKind, Workspace, WsError};

/// Where a file's content is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// In the workspace file at this path (for a dry run: where it is on disk now).
    Disk(String),
    /// In this backup.
    Saved(String),
}

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Nothing.
    Absent,
    /// A directory.
    Dir,
    /// A regular file.
    File(Content),
    /// A symbolic link or special file (or a path through one).
    Other,
}

/// One thing the undo does, each one request through the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write the content of backup `id` to `path` (parents made as needed).
    Put {
        /// The file.
        path: String,
        /// The backup.
        id: String,
    },
    /// Remove `path` (with all beneath it when `tree`; every file is backed up).
    Remove {
        /// What to remove.
        path: String,
        /// A directory with content.
        tree: bool,
    },
    /// Make the directory `path` and its missing parents.
    Mkdir {
        /// The directory.
        path: String,
    },
    /// Move `from` to `to` (making `to`'s missing parents first).
    Move {
        /// The source.
        from: String,
        /// The target.
        to: String,
    },
    /// Set `path`'s permission bits to `mode`.
    Chmod {
        /// The file or directory.
        path: String,
        /// The permission bits.
        mode: u32,
    },
}

/// The state the undo reads and changes.
pub trait World {
    /// What `path` holds now.
    fn node(&mut self, path: &str) -> Result<Node, String>;
    /// The permission bits of the file or directory `path` (None: nothing there).
    fn mode(&mut self, path: &str) -> Result<Option<u32>, String>;
    /// Whether the directory `path` holds nothing.
    fn is_empty_dir(&mut self, path: &str) -> Result<bool, String>;
    /// Does `action`.
    fn act(&mut self, action: &Action) -> Result<(), String>;
    /// SHA-256 (hex) of `c`.
    fn sha(&mut self, c: &Content) -> Result<String, String>;
    /// The record of backup `id`.
    fn saved(&mut self, id: &str) -> Result<BackupRef, String>;
    /// The bytes of `c`, if it holds at most `limit` (None: more).
    fn bytes(&mut self, c: &Content, limit: u64) -> Result<Option<Vec<u8>>, String>;
}

/// Reading the workspace (through its handle) and the backup store.
pub struct Sources<'a> {
    ws: &'a Workspace,
    store: Option<&'a BackupStore>,
    saved: HashMap<String, BackupRef>,
}

/// A workspace-relative path from the log as a [`RelPath`].
pub fn rel_path(p: &str) -> Result<RelPath, String> {
    RelPath::parse_rooted(&format!("/{p}")).map_err(|e| format!("{p}: {e}"))
}

impl<'a> Sources<'a> {
    /// Reads `ws`, and backups from `store` (None: there is no store).
    pub fn new(ws: &'a Workspace, store: Option<&'a BackupStore>) -> Sources<'a> {
        Sources {
            ws,
            store,
            saved: HashMap::new(),
        }
    }

    /// What the disk holds at `path`.
    pub fn disk_node(&self, path: &str) -> Result<Node, String> {
        match self.ws.entry_kind(&rel_path(path)?) {
            Ok(FileKind::File) => Ok(Node::File(Content::Disk(path.to_owned()))),
            Ok(FileKind::Directory) => Ok(Node::Dir),
            Ok(_) | Err(WsError::Raced | WsError::SymlinkEscape) => Ok(Node::Other),
            Err(WsError::NotFound | WsError::NotDir) => Ok(Node::Absent),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }

    /// The permission bits of `path` on disk (None: nothing there).
    pub fn disk_mode(&self, path: &str) -> Result<Option<u32>, String> {
        match self.ws.mode_of(&rel_path(path)?) {
            Ok(m) => Ok(Some(m)),
            Err(WsError::NotFound | WsError::NotDir) => Ok(None),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }

    /// The names in the directory `path` on disk.
    pub fn disk_names(&self, path: &str) -> Result<Vec<String>, String> {
        let entries = self.ws.list_names(&rel_path(path)?);
        let entries = entries.map_err(|e| format!("{path}: {e}"))?;
        Ok(entries.into_iter().map(|e| e.name.into()).collect())
    }

    /// The record of backup `id`.
    pub fn saved(&mut self, id: &str) -> Result<BackupRef, String> {
        if let Some(r) = self.saved.get(id) {
            return Ok(r.clone());
        }
        let (r, _) = self.open_saved(id)?;
        self.saved.insert(id.to_owned(), r.clone());
        Ok(r)
    }

    fn open_saved(
        &self,
        id: &str,
    ) -> Result<(BackupRef, std::io::Take<cap_std::fs::File>), String> {
        let store = self
            .store
            .ok_or_else(|| format!("backup {id}: there is no backup store"))?;
        store.open_id(id).map_err(|e| e.to_string())
    }

    /// SHA-256 (hex) of `c`.
    pub fn sha(&mut self, c: &Content) -> Result<String, String> {
        match c {
            Content::Saved(id) => Ok(self.saved(id)?.sha256),
            Content::Disk(path) => {
                let (mut file, _) = self
                    .ws
                    .open_regular(&rel_path(path)?)
                    .map_err(|e| format!("{path}: {e}"))?;
                let (_, sha) = fsgate_backup::store::copy_hashing(&mut file, &mut std::io::sink())
                    .map_err(|e| format!("{path}: {e}"))?;
                Ok(sha)
            }
        }
    }

    /// The bytes of `c`, if it holds at most `limit` (None: more).
    pub fn bytes(&mut self, c: &Content, limit: u64) -> Result<Option<Vec<u8>>, String> {
        match c {
            Content::Saved(id) => {
                let (r, reader) = self.open_saved(id)?;
                if r.size > limit {
                    return Ok(None);
                }
                read_checked(reader, &r).map(Some)
            }
            Content::Disk(path) => match self.ws.read_file(&rel_path(path)?, limit) {
                Ok(c) => Ok(Some(c.bytes)),
                Err(WsError::TooLarge { .. }) => Ok(None),
                Err(e) => Err(format!("{path}: {e}")),
            },
        }
    }

    /// The whole content of backup `id`, checked against its hash.
    pub fn saved_bytes(&mut self, id: &str) -> Result<Vec<u8>, String> {
        let (r, reader) = self.open_saved(id)?;
        read_checked(reader, &r)
    }
}

fn read_checked(mut reader: impl Read, r: &BackupRef) -> Result<Vec<u8>, String> {
    // The record's size is a hint only: a damaged one cannot make this reserve much.
    let hint = usize::try_from(r.size.min(1 << 26)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(hint);
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| format!("backup {}: {e}", r.id))?;
    if hex::encode(Sha256::digest(&bytes)) != r.sha256 {
        return Err(format!(
            "backup {} is damaged: its content does not match its SHA-256",
            r.id
        ));
    }
    Ok(bytes)
}

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
        let mut note = self.note.clone();
        if let Some((k, v)) = extra {
            note.insert(k.into(), v.into());
        }
        self.gateway
            .serve(&self.ctx, Request::Op(op), How::noted(note))
            .0
            .map(|_| ())
            .map_err(|e| e.message())
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
            Action::Move { from, to } => {
                if let Some((parent, _)) = to.rsplit_once('/')
                    && self.src.disk_node(parent)? == Node::Absent
                {
                    self.act(&Action::Mkdir {
                        path: parent.to_owned(),
                    })?;
                }
                let op = Op::Rename(ops::Rename {
                    from: rooted(from),
                    to: rooted(to),
                    replace: true,
                });
                self.serve(op, None)
            }
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

/// What the model says a path holds, over what the disk says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Over {
    Absent,
    File(Content),
    /// A directory; what lies beneath it is on disk at `origin` (None: nothing).
    Dir(Option<String>),
}

/// The disk with the actions of a dry run laid over it.
pub struct Model<'a> {
    src: Sources<'a>,
    over: BTreeMap<String, Over>,
    /// Permission bits the actions set.
    modes: BTreeMap<String, u32>,
}

/// `key` beneath `from`, moved beneath `to`.
fn moved(key: &str, from: &str, to: &str) -> String {
    format!("{to}{}", &key[from.len()..])
}

impl<'a> Model<'a> {
    /// The disk as `src` reads it, nothing laid over yet.
    pub fn new(src: Sources<'a>) -> Model<'a> {
        Model {
            src,
            over: BTreeMap::new(),
            modes: BTreeMap::new(),
        }
    }

    /// Where on disk what the model shows at `path` is, if the model laid nothing over
    /// it: the path itself, or its place beneath a directory moved there.
    fn origin(&self, path: &str) -> Option<String> {
        if let Some(o) = self.over.get(path) {
            return match o {
                Over::Dir(origin) => origin.clone(),
                _ => None,
            };
        }
        for a in super::plan::ancestors(path) {
            match self.over.get(a) {
                None => continue,
                Some(Over::Dir(Some(o))) => return Some(moved(path, a, o)),
                Some(_) => return None,
            }
        }
        Some(path.to_owned())
    }

    fn keys_beneath(&self, dir: &str) -> Vec<String> {
        let start = format!("{dir}/");
        self.over
            .range(start.clone()..)
            .take_while(|(k, _)| k.starts_with(&start))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn drop_beneath(&mut self, dir: &str) {
        for k in self.keys_beneath(dir) {
            self.over.remove(&k);
        }
    }

    /// Makes `path`'s missing parents directories.
    fn make_parents(&mut self, path: &str) -> Result<(), String> {
        let parents: Vec<String> = super::plan::ancestors(path).map(str::to_owned).collect();
        for p in parents.iter().rev() {
            if self.node(p)? == Node::Absent {
                self.over.insert(p.clone(), Over::Dir(None));
            }
        }
        Ok(())
    }

    fn put(&mut self, path: &str, over: Over) -> Result<(), String> {
        self.make_parents(path)?;
        self.drop_beneath(path);
        self.over.insert(path.to_owned(), over);
        Ok(())
    }

    fn move_node(&mut self, from: &str, to: &str) -> Result<(), String> {
        let over = match self.node(from)? {
            Node::Absent => return Err(format!("{from}: nothing to move")),
            Node::File(c) => Over::File(c),
            Node::Dir => Over::Dir(self.origin(from)),
            Node::Other => return Err(format!("{from}: not a file or directory")),
        };
        let laid: Vec<(String, Over)> = self
            .keys_beneath(from)
            .into_iter()
            .filter_map(|k| self.over.remove(&k).map(|o| (moved(&k, from, to), o)))
            .collect();
        self.put(to, over)?;
        self.over.extend(laid);
        self.over.insert(from.to_owned(), Over::Absent);
        Ok(())
    }
}

impl World for Model<'_> {
    fn mode(&mut self, path: &str) -> Result<Option<u32>, String> {
        if self.node(path)? == Node::Absent {
            return Ok(None);
        }
        if let Some(m) = self.modes.get(path) {
            return Ok(Some(*m));
        }
        match self.origin(path) {
            Some(o) => self.src.disk_mode(&o),
            None => Ok(None),
        }
    }

    fn node(&mut self, path: &str) -> Result<Node, String> {
        match self.over.get(path) {
            Some(Over::Absent) => return Ok(Node::Absent),
            Some(Over::File(c)) => return Ok(Node::File(c.clone())),
            Some(Over::Dir(_)) => return Ok(Node::Dir),
            None => {}
        }
        match self.origin(path) {
            None => Ok(Node::Absent),
            Some(o) => Ok(match self.src.disk_node(&o)? {
                Node::File(_) => Node::File(Content::Disk(o)),
                n => n,
            }),
        }
    }

    fn is_empty_dir(&mut self, path: &str) -> Result<bool, String> {
        let mut names: BTreeMap<String, bool> = BTreeMap::new();
        if let Some(o) = self.origin(path) {
            for n in self.src.disk_names(&o)? {
                names.insert(n, true);
            }
        }
        for k in self.keys_beneath(path) {
            let rest = &k[path.len() + 1..];
            if !rest.contains('/') {
                names.insert(rest.to_owned(), self.over[&k] != Over::Absent);
            }
        }
        Ok(!names.values().any(|&present| present))
    }

    fn act(&mut self, action: &Action) -> Result<(), String> {
        match action {
            Action::Put { path, id } => self.put(path, Over::File(Content::Saved(id.clone()))),
            Action::Remove { path, .. } => {
                self.drop_beneath(path);
                self.over.insert(path.clone(), Over::Absent);
                Ok(())
            }
            Action::Mkdir { path } => match self.node(path)? {
                Node::Dir => Ok(()),
                _ => self.put(path, Over::Dir(None)),
            },
            Action::Move { from, to } => self.move_node(from, to),
            Action::Chmod { path, mode } => {
                self.modes.insert(path.clone(), *mode);
                Ok(())
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(files: &[(&str, &str)], dirs: &[&str]) -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().expect("tempdir");
        for d in dirs {
            std::fs::create_dir_all(tmp.path().join(d)).expect("mkdir");
        }
        for (p, text) in files {
            let p = tmp.path().join(p);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        let ws = Workspace::open(tmp.path()).expect("open");
        (tmp, ws)
    }

    fn disk(p: &str) -> Node {
        Node::File(Content::Disk(p.into()))
    }

    #[test]
    fn the_model_starts_as_the_disk_and_lays_actions_over_it() {
        let (_t, ws) = workspace(&[("a/f", "1"), ("a/g", "2")], &["e"]);
        let mut m = Model::new(Sources::new(&ws, None));
        assert_eq!(m.node("a/f").unwrap(), disk("a/f"));
        assert_eq!(m.node("a").unwrap(), Node::Dir);
        assert_eq!(m.node("nope/x").unwrap(), Node::Absent);
        assert!(m.is_empty_dir("e").unwrap());
        assert!(!m.is_empty_dir("a").unwrap());

        m.act(&Action::Put {
            path: "n/m/x".into(),
            id: "id".into(),
        })
        .unwrap();
        assert_eq!(m.node("n").unwrap(), Node::Dir);
        assert_eq!(
            m.node("n/m/x").unwrap(),
            Node::File(Content::Saved("id".into()))
        );
        assert!(!m.is_empty_dir("n/m").unwrap());

        m.act(&Action::Remove {
            path: "a/f".into(),
            tree: false,
        })
        .unwrap();
        assert_eq!(m.node("a/f").unwrap(), Node::Absent);
        m.act(&Action::Remove {
            path: "a/g".into(),
            tree: false,
        })
        .unwrap();
        assert!(m.is_empty_dir("a").unwrap());
    }

    #[test]
    fn a_moved_directory_shows_its_disk_content_at_its_new_place() {
        let (_t, ws) = workspace(&[("b/x", "1"), ("b/sub/y", "2")], &[]);
        let mut m = Model::new(Sources::new(&ws, None));
        m.act(&Action::Put {
            path: "b/new".into(),
            id: "id".into(),
        })
        .unwrap();
        m.act(&Action::Move {
            from: "b".into(),
            to: "a/b2".into(),
        })
        .unwrap();
        assert_eq!(m.node("b").unwrap(), Node::Absent);
        assert_eq!(m.node("b/x").unwrap(), Node::Absent);
        assert_eq!(m.node("a").unwrap(), Node::Dir);
        assert_eq!(m.node("a/b2/x").unwrap(), disk("b/x"));
        assert_eq!(m.node("a/b2/sub/y").unwrap(), disk("b/sub/y"));
        assert_eq!(
            m.node("a/b2/new").unwrap(),
            Node::File(Content::Saved("id".into()))
        );
        // And back again.
        m.act(&Action::Move {
            from: "a/b2".into(),
            to: "b".into(),
        })
        .unwrap();
        assert_eq!(m.node("b/sub/y").unwrap(), disk("b/sub/y"));
        assert_eq!(m.node("a/b2").unwrap(), Node::Absent);
        assert!(m.is_empty_dir("a").unwrap());
        let err = m.act(&Action::Move {
            from: "gone".into(),
            to: "c".into(),
        });
        assert!(err.is_err());
    }
}
