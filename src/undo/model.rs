//! For `--dry-run`: the disk with the actions laid over it, so each step is checked
//! against the state the steps before it would leave.

use std::collections::BTreeMap;

use fsgate_backup::BackupRef;

use super::sources::Sources;
use super::world::{Action, Content, Node, World};

/// What the model says a path holds, over what the disk says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Over {
    Absent,
    File(Content),
    /// A directory; what lies beneath it is on disk at `origin` (None: nothing).
    Dir(Option<String>),
    /// A symbolic link (moved, or made by an action).
    Link,
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

    /// The mode of `path` if it is a file (a link's, or a directory's, is not asked).
    fn file_mode(&mut self, path: &str) -> Result<Option<u32>, String> {
        match self.node(path)? {
            Node::File(_) => self.mode(path),
            _ => Ok(None),
        }
    }

    fn move_node(&mut self, from: &str, to: &str) -> Result<(), String> {
        // A file's mode moves with it (its content may no longer name a file on disk).
        let mode = self.file_mode(from)?;
        let over = match self.node(from)? {
            Node::Absent => return Err(format!("{from}: nothing to move")),
            Node::File(c) => Over::File(c),
            Node::Dir => Over::Dir(self.origin(from)),
            Node::Other => Over::Link,
        };
        let laid: Vec<(String, Over)> = self
            .keys_beneath(from)
            .into_iter()
            .filter_map(|k| self.over.remove(&k).map(|o| (moved(&k, from, to), o)))
            .collect();
        self.put(to, over)?;
        self.over.extend(laid);
        self.over.insert(from.to_owned(), Over::Absent);
        let beneath = format!("{from}/");
        let moved_modes: Vec<(String, u32)> = (self.modes.iter())
            .filter(|(k, _)| k.starts_with(&beneath))
            .map(|(k, m)| (moved(k, from, to), *m))
            .collect();
        self.modes
            .retain(|k, _| k != from && !k.starts_with(&beneath));
        self.modes.extend(moved_modes);
        if let Some(m) = mode {
            self.modes.insert(to.to_owned(), m);
        }
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
            Some(Over::Link) => return Ok(Node::Other),
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
            Action::Put { path, id } => {
                // A write keeps the mode of the file it replaces (a new file gets
                // 0644), as the gateway's does.
                let kept = self.file_mode(path)?.map_or(0o644, |m| m & 0o1777);
                self.put(path, Over::File(Content::Saved(id.clone())))?;
                self.modes.insert(path.clone(), kept);
                Ok(())
            }
            Action::Remove { path, .. } => {
                self.drop_beneath(path);
                self.over.insert(path.clone(), Over::Absent);
                Ok(())
            }
            Action::Mkdir { path } => match self.node(path)? {
                Node::Dir => Ok(()),
                _ => self.put(path, Over::Dir(None)),
            },
            Action::Move { from, to, .. } => self.move_node(from, to),
            Action::Link { path, .. } => match self.node(path)? {
                Node::Absent => self.put(path, Over::Link),
                _ => Err(format!("{path}: already exists")),
            },
            // Times are not modelled: nothing a later step checks depends on them.
            Action::Utimes { .. } => Ok(()),
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
    use fsgate_workspace::Workspace;

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
            or_copy: false,
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
            or_copy: false,
        })
        .unwrap();
        assert_eq!(m.node("b/sub/y").unwrap(), disk("b/sub/y"));
        assert_eq!(m.node("a/b2").unwrap(), Node::Absent);
        assert!(m.is_empty_dir("a").unwrap());
        let err = m.act(&Action::Move {
            from: "gone".into(),
            to: "c".into(),
            or_copy: false,
        });
        assert!(err.is_err());
    }
}
