//! A generated monorepo, deterministic from a seed: `files` files in `dirs` directories,
//! a mix of languages, a literal planted in some files, and some files the default
//! policy refuses (secrets by name). The driver knows every path without reading the
//! tree back, so it can say which of `fd`'s or `rg`'s results fsgate must leave out.
//!
//! Layout: `packages` top-level directories `pkg-NN`; each holds its share of the other
//! directories as an 8-ary tree filled breadth-first (`src3/core1/...`), so every
//! package has the same shape. File `f` lives in directory `f % dirs`.

use std::collections::BTreeSet;
use std::path::Path;

use crate::Error;
use crate::tree;

/// What to generate.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Mono {
    /// Files, secrets included.
    pub files: usize,
    /// Directories, the top-level packages included (the root itself not).
    pub dirs: usize,
    /// Top-level directories.
    pub packages: usize,
    /// Varies names' words, extensions, sizes and where the literal is planted.
    pub seed: u64,
}

impl Mono {
    /// The issue's monorepo: 1,000,000 files in 50,000 directories.
    pub const FULL: Mono = Mono {
        files: 1_000_000,
        dirs: 50_000,
        packages: 25,
        seed: 34,
    };
}

/// The literal the `mono_grep` workload looks for; planted in one file in 200 and in
/// every secret file (which fsgate must not show).
pub const NEEDLE: &str = "fsgate_mono_needle";

/// Children per directory inside a package.
const FANOUT: usize = 8;

const DIR_WORDS: [&str; 8] = [
    "src", "core", "api", "utils", "model", "view", "net", "store",
];
const FILE_WORDS: [&str; 8] = [
    "main", "lib", "handler", "types", "index", "config", "helper", "service",
];

/// Extensions and their weights (out of 100): 4 in 100 files are `.rs`, so that the
/// paths of `**/*.rs` in the full tree (about 40,000) fit one answer.
const EXTENSIONS: [(&str, u64); 9] = [
    ("ts", 29),
    ("js", 15),
    ("json", 12),
    ("md", 10),
    ("py", 10),
    ("rs", 4),
    ("go", 8),
    ("txt", 7),
    ("css", 5),
];

/// What one file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An ordinary source file; `needle` says if the literal is planted in it.
    Plain { needle: bool },
    /// Refused by the default policy's secret names; holds the literal.
    Secret,
}

fn mix(a: u64, b: u64) -> u64 {
    let mut x = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

impl Mono {
    fn per_package(&self) -> usize {
        self.dirs.saturating_sub(self.packages) / self.packages.max(1)
    }

    /// Directory `k`'s path, relative to the root (`k < dirs`).
    pub fn dir(&self, k: usize) -> String {
        let p = self.packages.max(1);
        if k < p {
            return format!("pkg-{k:02}");
        }
        // Inside package `k % p`: its `j`-th directory (0-based, breadth-first).
        let (pkg, mut j) = (k % p, (k - p) / p);
        let mut parts = Vec::new();
        loop {
            let word = DIR_WORDS[(mix(self.seed, j as u64) % 8) as usize];
            parts.push(format!("{word}{}", j % FANOUT));
            if j < FANOUT {
                break;
            }
            j = j / FANOUT - 1;
        }
        parts.push(format!("pkg-{pkg:02}"));
        parts.reverse();
        parts.join("/")
    }

    /// Directories that exist: those of packages past the even share are not made.
    pub fn dir_count(&self) -> usize {
        self.packages + self.per_package() * self.packages
    }

    /// File `f`'s path and kind (`f < files`).
    pub fn file(&self, f: usize) -> (String, Kind) {
        let d = self.dir_count().max(1);
        let (k, slot) = (f % d, f / d);
        let dir = self.dir(k);
        let secret = match slot {
            0 if k % 97 == 5 => Some(".env"),
            1 if k % 101 == 7 => Some("secret_keys.rs"),
            2 if k % 211 == 11 => Some("server.pem"),
            _ => None,
        };
        if let Some(name) = secret {
            return (format!("{dir}/{name}"), Kind::Secret);
        }
        let h = mix(self.seed, f as u64);
        let word = FILE_WORDS[(h % 8) as usize];
        let mut pick = (h >> 8) % 100;
        let ext = EXTENSIONS
            .iter()
            .find(|(_, w)| {
                let hit = pick < *w;
                pick = pick.saturating_sub(*w);
                hit
            })
            .map_or("txt", |(e, _)| e);
        let needle = (h >> 16).is_multiple_of(200);
        (format!("{dir}/{word}_{slot}.{ext}"), Kind::Plain { needle })
    }

    /// File `f`'s content: 64 to 2,047 bytes of words, the literal on a line of its own
    /// where planted.
    pub fn content(&self, f: usize, kind: &Kind) -> String {
        let h = mix(self.seed ^ 0x5EED, f as u64);
        let mut s = tree::text(h, 64 + (h % 1984) as usize);
        if matches!(kind, Kind::Plain { needle: true } | Kind::Secret) {
            s.push_str(&format!("let x = \"{NEEDLE}\";\n"));
        }
        s
    }

    /// Paths of every secret file (what fsgate must leave out of any answer).
    pub fn secrets(&self) -> BTreeSet<String> {
        (0..self.files)
            .map(|f| self.file(f))
            .filter(|(_, k)| *k == Kind::Secret)
            .map(|(p, _)| p)
            .collect()
    }

    /// Creates the tree under `root` (which must not exist), on `threads` threads.
    pub fn build(&self, root: &Path, threads: usize) -> Result<(), Error> {
        if root.exists() {
            return Err(Error::Setup(format!("{} exists already", root.display())));
        }
        for k in 0..self.dir_count() {
            let p = root.join(self.dir(k));
            std::fs::create_dir_all(&p).map_err(|e| Error::io(&p, e))?;
        }
        let n = threads.max(1);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..n)
                .map(|t| s.spawn(move || self.write_files(root, t, n)))
                .collect();
            workers.into_iter().try_for_each(|w| {
                w.join()
                    .unwrap_or(Err(Error::Setup("a writer panicked".into())))
            })
        })
    }

    fn write_files(&self, root: &Path, first: usize, step: usize) -> Result<(), Error> {
        for f in (first..self.files).step_by(step) {
            let (rel, kind) = self.file(f);
            let p = root.join(&rel);
            std::fs::write(&p, self.content(f, &kind)).map_err(|e| Error::io(&p, e))?;
        }
        Ok(())
    }
}

/// A directory of `n` empty files `e-0000000` ... (the 200,000-entry listing).
pub fn build_wide(dir: &Path, n: usize) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    for i in 0..n {
        let p = dir.join(wide_name(i));
        std::fs::File::create(&p).map_err(|e| Error::io(&p, e))?;
    }
    Ok(())
}

/// Entry `i` of a wide directory.
pub fn wide_name(i: usize) -> String {
    format!("e-{i:07}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Mono = Mono {
        files: 2_000,
        dirs: 100,
        packages: 4,
        seed: 7,
    };

    #[test]
    fn paths_are_unique_and_every_kind_occurs() {
        let paths: BTreeSet<String> = (0..SMALL.files).map(|f| SMALL.file(f).0).collect();
        assert_eq!(paths.len(), SMALL.files);
        let dirs: BTreeSet<String> = (0..SMALL.dir_count()).map(|k| SMALL.dir(k)).collect();
        assert_eq!(dirs.len(), SMALL.dir_count());
        // Every directory's parent is a directory too.
        for d in &dirs {
            if let Some((parent, _)) = d.rsplit_once('/') {
                assert!(dirs.contains(parent), "{d}");
            }
        }
        assert!(!SMALL.secrets().is_empty());
        assert!(paths.iter().any(|p| p.ends_with(".rs")));
        let planted = (0..SMALL.files)
            .filter(|f| SMALL.file(*f).1 == Kind::Plain { needle: true })
            .count();
        assert!(planted > 0);
    }

    #[test]
    fn the_full_tree_has_the_issues_counts() {
        assert_eq!(Mono::FULL.dir_count(), 50_000);
        let deepest = Mono::FULL.dir(Mono::FULL.dir_count() - 1);
        assert!(deepest.matches('/').count() <= 5, "{deepest}");
    }
}
