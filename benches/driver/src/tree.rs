//! The workspace every server gets a fresh copy of, generated from fixed seeds so the
//! driver knows every file's content and every search's matches.

use std::collections::BTreeSet;
use std::path::Path;

use crate::Error;

/// Sizes of one run (the full suite, or the quick proof).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sizes {
    /// 4 KiB files under `files/` (read, stat).
    pub small_files: usize,
    /// Entries of `list/`.
    pub list_entries: usize,
    /// Directories of `tree/`.
    pub tree_dirs: usize,
    /// Files per directory of `tree/`.
    pub tree_files_per_dir: usize,
    /// Bytes of each `tree/` file.
    pub tree_file_bytes: usize,
    /// Bytes of `big.txt`.
    pub big_bytes: usize,
}

/// The literal `search_literal` looks for: in every 20th tree file, on one line.
pub const LITERAL: &str = "fsgate_needle";
/// The regex `search_regex` looks for: in every 7th tree file, on two lines.
pub const REGEX: &str = r"zq[a-z]{2}[0-9]{3}\b";
/// Size of the read, stat and write workloads' files.
pub const SMALL: usize = 4096;

/// Words of the filler text: none holds `zq` or the literal, so only planted lines match.
const WORDS: [&str; 16] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa",
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Text of exactly `len` bytes: lines of words (ASCII), distinct for each seed.
pub fn text(seed: u64, len: usize) -> String {
    let mut r = Rng::new(seed);
    let mut s = String::with_capacity(len + 16);
    s.push_str(&format!("seed {seed}\n"));
    let mut col = 0;
    while s.len() < len {
        let w = WORDS[(r.next() % WORDS.len() as u64) as usize];
        if col + w.len() > 72 {
            s.push('\n');
            col = 0;
        } else if col > 0 {
            s.push(' ');
            col += 1;
        }
        s.push_str(w);
        col += w.len();
    }
    s.truncate(len.saturating_sub(1));
    s.push('\n');
    s
}

/// Content of `files/f{i}.txt`.
pub fn small(i: usize) -> String {
    text(1_000_000 + i as u64, SMALL)
}

/// Relative path of tree file `k`.
pub fn tree_file(sz: &Sizes, k: usize) -> String {
    format!(
        "tree/d{:03}/f{:04}.txt",
        k / sz.tree_files_per_dir,
        k % sz.tree_files_per_dir
    )
}

/// Content of tree file `k`, with its planted matches.
fn tree_content(sz: &Sizes, k: usize) -> String {
    let mut lines: Vec<String> = text(k as u64, sz.tree_file_bytes)
        .lines()
        .map(str::to_string)
        .collect();
    for (line, token) in planted(k, lines.len()) {
        lines[line - 1].push_str(&format!(" {token}"));
    }
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// (1-based line, token) planted in tree file `k` of `n` lines.
fn planted(k: usize, n: usize) -> Vec<(usize, String)> {
    let mut v = Vec::new();
    if n < 3 {
        return v;
    }
    if k.is_multiple_of(20) {
        v.push((1 + k % (n - 1), LITERAL.to_string()));
    }
    if k.is_multiple_of(7) {
        v.push((2, format!("zqab{:03}", k % 1000)));
        v.push((n, format!("zqxy{:03}", (k + 1) % 1000)));
    }
    v
}

/// The lines (tree-relative path, 1-based line number) each search must find.
pub fn expected_matches(sz: &Sizes, literal: bool) -> BTreeSet<(String, u64)> {
    let mut out = BTreeSet::new();
    for k in 0..sz.tree_dirs * sz.tree_files_per_dir {
        let n = tree_content(sz, k).lines().count();
        for (line, token) in planted(k, n) {
            if token.starts_with(LITERAL) == literal {
                out.insert((tree_file(sz, k), line as u64));
            }
        }
    }
    out
}

fn write(root: &Path, rel: &str, content: &str) -> Result<(), Error> {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    std::fs::write(&p, content).map_err(|e| Error::io(&p, e))
}

/// Creates the whole workspace under `root` (which must not exist yet).
pub fn build(root: &Path, sz: &Sizes) -> Result<(), Error> {
    for i in 0..sz.small_files {
        write(root, &format!("files/f{i}.txt"), &small(i))?;
    }
    for i in 0..sz.list_entries {
        write(root, &format!("list/entry-{i:05}.txt"), "x\n")?;
    }
    for k in 0..sz.tree_dirs * sz.tree_files_per_dir {
        write(root, &tree_file(sz, k), &tree_content(sz, k))?;
    }
    write(root, "big.txt", &big(sz))?;
    for d in ["new", "over"] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| Error::io(&root.join(d), e))?;
    }
    Ok(())
}

/// Content of `big.txt`.
pub fn big(sz: &Sizes) -> String {
    text(7, sz.big_bytes)
}
