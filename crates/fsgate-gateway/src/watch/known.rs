//! What the watcher knows exists, and whether each is a directory, held compactly: per
//! directory, its entries' names one after another in one string, sorted, with each
//! one's end and kind in a `u32`. A path then costs its name's length and 4 bytes: the
//! 1,050,000 paths of the benchmark's monorepo take about 25 MiB, against about 120 MiB
//! as a `HashMap<RelPath, bool>` (a string, a hash slot and an allocation each).

use std::collections::HashMap;

use fsgate_base::path::RelPath;

/// Set in an end offset for a directory.
const DIR: u32 = 1 << 31;

/// Known paths, by directory.
#[derive(Debug, Default)]
pub(super) struct Known {
    /// Directory path (`""` for the root) -> its known entries.
    dirs: HashMap<Box<str>, Entries>,
}

/// One directory's known entries.
#[derive(Debug, Default)]
struct Entries {
    /// The names, one after another.
    names: String,
    /// Each name's end in `names`, [`DIR`] set for a directory.
    ends: Vec<u32>,
    /// False after [`Entries::push`]: sorted on the next lookup.
    sorted: bool,
}

impl Entries {
    fn name(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p] & !DIR);
        &self.names[start as usize..(self.ends[i] & !DIR) as usize]
    }

    fn is_dir(&self, i: usize) -> bool {
        self.ends[i] & DIR != 0
    }

    fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        (0..self.ends.len()).map(|i| (self.name(i), self.is_dir(i)))
    }

    /// Appends without keeping the order (the initial scan's many names). False if the
    /// names would no longer fit the offsets (2 GiB of names in one directory).
    fn push(&mut self, name: &str, is_dir: bool) -> bool {
        let Some(end) = self.end_after(name.len()) else {
            return false;
        };
        self.names.push_str(name);
        self.ends.push(end | if is_dir { DIR } else { 0 });
        self.sorted = self.ends.len() < 2;
        true
    }

    fn end_after(&self, added: usize) -> Option<u32> {
        u32::try_from(self.names.len() + added)
            .ok()
            .filter(|e| e & DIR == 0)
    }

    /// Sorts by name, exactly sized (the scan's growth slack given back).
    fn sort(&mut self) {
        if self.sorted {
            return;
        }
        let mut all: Vec<(&str, bool)> = self.iter().collect();
        // Stable, so that of a name recorded twice the last record stays.
        all.sort_by(|a, b| a.0.cmp(b.0));
        let mut last: Vec<(&str, bool)> = Vec::with_capacity(all.len());
        for entry in all {
            match last.last_mut() {
                Some(l) if l.0 == entry.0 => *l = entry,
                _ => last.push(entry),
            }
        }
        let all = last;
        let mut sorted = Entries {
            names: String::with_capacity(self.names.len()),
            ends: Vec::with_capacity(all.len()),
            sorted: true,
        };
        for (name, is_dir) in all {
            sorted.push(name, is_dir);
        }
        sorted.sorted = true;
        *self = sorted;
    }

    fn find(&mut self, name: &str) -> Result<usize, usize> {
        self.sort();
        let (mut lo, mut hi) = (0, self.ends.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.name(mid).cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn get(&mut self, name: &str) -> Option<bool> {
        self.find(name).ok().map(|i| self.is_dir(i))
    }

    fn insert(&mut self, name: &str, is_dir: bool) {
        let flag = if is_dir { DIR } else { 0 };
        match self.find(name) {
            Ok(i) => self.ends[i] = (self.ends[i] & !DIR) | flag,
            Err(i) => {
                let Some(_) = self.end_after(name.len()) else {
                    return;
                };
                let start = i.checked_sub(1).map_or(0, |p| self.ends[p] & !DIR);
                self.names.insert_str(start as usize, name);
                let len = name.len() as u32;
                for e in &mut self.ends[i..] {
                    *e += len;
                }
                self.ends.insert(i, (start + len) | flag);
            }
        }
    }

    fn remove(&mut self, name: &str) -> Option<bool> {
        let i = self.find(name).ok()?;
        let is_dir = self.is_dir(i);
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p] & !DIR);
        let len = name.len() as u32;
        self.names
            .replace_range(start as usize..(start + len) as usize, "");
        self.ends.remove(i);
        for e in &mut self.ends[i..] {
            *e -= len;
        }
        Some(is_dir)
    }
}

/// `path` split into its directory and its name (None for the root).
fn split(path: &RelPath) -> Option<(&str, &str)> {
    let s = path.as_str();
    if s.is_empty() {
        return None;
    }
    Some(s.rsplit_once('/').unwrap_or(("", s)))
}

/// True if the directory key `dir` is `path` or lies beneath it.
fn at_or_beneath(dir: &str, path: &str) -> bool {
    path.is_empty()
        || dir
            .strip_prefix(path)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl Known {
    /// Records an existing path, without keeping its directory in order (the initial
    /// scan; see [`Known::compact`]).
    pub(super) fn record(&mut self, path: &RelPath, is_dir: bool) {
        let Some((dir, name)) = split(path) else {
            return;
        };
        match self.dirs.get_mut(dir) {
            Some(e) => {
                e.push(name, is_dir);
            }
            None => {
                let mut e = Entries::default();
                e.push(name, is_dir);
                self.dirs.insert(dir.into(), e);
            }
        }
    }

    /// Sorts every directory and gives back the growth slack (after the initial scan).
    pub(super) fn compact(&mut self) {
        for e in self.dirs.values_mut() {
            e.sort();
        }
        self.dirs.shrink_to_fit();
    }

    /// `Some(is_dir)` if `path` is known to exist.
    pub(super) fn get(&mut self, path: &RelPath) -> Option<bool> {
        let (dir, name) = split(path)?;
        self.dirs.get_mut(dir)?.get(name)
    }

    /// Records that `path` exists (a directory or not).
    pub(super) fn insert(&mut self, path: &RelPath, is_dir: bool) {
        let Some((dir, name)) = split(path) else {
            return;
        };
        match self.dirs.get_mut(dir) {
            Some(e) => e.insert(name, is_dir),
            None => {
                let mut e = Entries::default();
                e.insert(name, is_dir);
                self.dirs.insert(dir.into(), e);
            }
        }
    }

    /// Forgets `path`, and everything beneath it if it was a directory.
    pub(super) fn remove(&mut self, path: &RelPath) {
        let Some((dir, name)) = split(path) else {
            return;
        };
        let Some(e) = self.dirs.get_mut(dir) else {
            return;
        };
        let was_dir = e.remove(name);
        if e.ends.is_empty() {
            self.dirs.remove(dir);
        }
        if was_dir == Some(true) {
            self.dirs.retain(|d, _| !at_or_beneath(d, path.as_str()));
        }
    }

    /// Every known path that is `start` or lies beneath it.
    pub(super) fn beneath(&self, start: &RelPath) -> Vec<RelPath> {
        let mut out = Vec::new();
        if let Some((dir, name)) = split(start)
            && let Some(e) = self.dirs.get(dir)
            && e.iter().any(|(n, _)| n == name)
        {
            out.push(start.clone());
        }
        for (dir, e) in &self.dirs {
            if at_or_beneath(dir, start.as_str()) {
                let dir = RelPath::parse_rooted(dir).unwrap_or_else(|_| RelPath::root());
                out.extend(e.iter().map(|(n, _)| dir.join(n)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::parse_rooted(s).expect("path")
    }

    #[test]
    fn recorded_paths_are_known_with_their_kind_in_any_order() {
        let mut k = Known::default();
        for (path, dir) in [("b", true), ("a.txt", false), ("b/z", false), ("b/c", true)] {
            k.record(&p(path), dir);
        }
        k.record(&p("b/c/x"), false);
        k.compact();
        assert_eq!(k.get(&p("b")), Some(true));
        assert_eq!(k.get(&p("a.txt")), Some(false));
        assert_eq!(k.get(&p("b/c")), Some(true));
        assert_eq!(k.get(&p("b/c/x")), Some(false));
        assert_eq!(k.get(&p("b/y")), None);
        assert_eq!(k.get(&p("c")), None);
    }

    #[test]
    fn insert_and_remove_keep_the_others() {
        let mut k = Known::default();
        for name in ["m", "c", "x", "a"] {
            k.record(&p(&format!("d/{name}")), false);
        }
        k.insert(&p("d/b"), false);
        k.insert(&p("d/zz"), true);
        k.insert(&p("d/c"), true); // a type change
        k.remove(&p("d/m"));
        for (name, want) in [
            ("a", Some(false)),
            ("b", Some(false)),
            ("c", Some(true)),
            ("m", None),
            ("x", Some(false)),
            ("zz", Some(true)),
        ] {
            assert_eq!(k.get(&p(&format!("d/{name}"))), want, "{name}");
        }
    }

    #[test]
    fn removing_a_directory_forgets_what_lies_beneath_it_only() {
        let mut k = Known::default();
        for (path, dir) in [
            ("d", true),
            ("d/x", false),
            ("d/e", true),
            ("d/e/y", false),
            ("dx", false),
            ("dx2", true),
            ("dx2/z", false),
        ] {
            k.record(&p(path), dir);
        }
        k.remove(&p("d"));
        assert_eq!(k.get(&p("d")), None);
        assert_eq!(k.get(&p("d/x")), None);
        assert_eq!(k.get(&p("d/e/y")), None);
        assert_eq!(k.get(&p("dx")), Some(false), "a sibling sharing the prefix");
        assert_eq!(k.get(&p("dx2/z")), Some(false));
        let mut all = k.beneath(&RelPath::root());
        all.sort();
        assert_eq!(all, [p("dx"), p("dx2"), p("dx2/z")]);
        let mut some = k.beneath(&p("dx2"));
        some.sort();
        assert_eq!(some, [p("dx2"), p("dx2/z")]);
    }

    /// Against a plain map, on random operations over a small name space.
    #[test]
    fn agrees_with_a_map() {
        use std::collections::BTreeMap;
        let names = ["a", "b", "ab", "b/a", "b/ab", "b/a/c", "ba", "c"];
        let mut k = Known::default();
        let mut want: BTreeMap<String, bool> = BTreeMap::new();
        let mut seed = 0x9e37_79b9_u32;
        for step in 0..4000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let name = names[seed as usize % names.len()];
            let path = p(name);
            let is_dir = seed & 0x100 != 0;
            match (seed >> 9) % 3 {
                0 if step < 40 => {
                    if !want.contains_key(name) {
                        k.record(&path, is_dir);
                        want.insert(name.into(), is_dir);
                    }
                }
                0 | 1 => {
                    k.insert(&path, is_dir);
                    want.insert(name.into(), is_dir);
                }
                _ => {
                    k.remove(&path);
                    if want.remove(name) == Some(true) {
                        want.retain(|n, _| !n.starts_with(&format!("{name}/")));
                    }
                }
            }
            for n in names {
                assert_eq!(k.get(&p(n)), want.get(n).copied(), "step {step}: {n}");
            }
        }
    }
}
