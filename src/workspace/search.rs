//! glob and grep over the tree, with ripgrep's searcher on files opened beneath the root.

use globset::GlobMatcher;
use grep_regex::RegexMatcher;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};

use std::io::Read as _;

use super::kind::FileKind;
use super::walk::{Entry, Visit};
use super::{Workspace, WsError};
use crate::path::RelPath;

/// Longest line returned by grep; longer lines are cut (minified files).
const MAX_LINE_BYTES: usize = 4096;

/// One grep hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepMatch {
    /// The file.
    pub path: RelPath,
    /// 1-based line number.
    pub line_number: u64,
    /// The line, without its line ending.
    pub line: String,
}

/// Decides from a file's path and whole content whether grep may search it.
pub type ContentGate<'a> = dyn Fn(&RelPath, &[u8]) -> bool + 'a;

/// What to grep for.
pub struct GrepOptions<'a> {
    /// The compiled regex.
    pub matcher: &'a RegexMatcher,
    /// Only files whose name (or, for patterns with `/`, relative path) matches.
    pub include: Option<&'a IncludeGlob>,
    /// Stop after this many matches.
    pub max_results: usize,
    /// Skip files larger than this.
    pub max_file_bytes: u64,
    /// Stop once the hits would take this many bytes in the answer (then say so).
    pub max_answer_bytes: u64,
    /// Bytes each hit adds to the answer beyond its path and line (the root, when
    /// paths are shown absolute).
    pub item_extra: u64,
    /// A gate on each file's content: when given, the file is read whole and searched
    /// only if the gate passes those very bytes (so a file cannot change between the
    /// check and the search). `None`: files are streamed unchecked.
    pub content_gate: Option<&'a ContentGate<'a>>,
}

/// An include filter: matched on the file name, or on the path if it contains `/`.
pub struct IncludeGlob {
    matcher: GlobMatcher,
    on_path: bool,
}

impl IncludeGlob {
    /// Compiles an include glob.
    pub fn new(pattern: &str) -> Result<IncludeGlob, globset::Error> {
        let on_path = pattern.contains('/');
        let glob = globset::GlobBuilder::new(pattern.trim_start_matches('/'))
            .literal_separator(true)
            .build()?;
        Ok(IncludeGlob {
            matcher: glob.compile_matcher(),
            on_path,
        })
    }

    fn matches(&self, e: &Entry) -> bool {
        if self.on_path {
            self.matcher.is_match(e.path.as_str())
        } else {
            self.matcher.is_match(&e.name)
        }
    }
}

impl Workspace {
    /// Paths under `base` matching `glob`, in walk order. `visible` decides, per entry,
    /// whether it may be seen (and, for directories, entered).
    pub fn glob(
        &self,
        glob: &GlobMatcher,
        base: &RelPath,
        (max_answer_bytes, item_extra): (u64, u64),
        visible: &dyn Fn(&Entry) -> bool,
    ) -> Result<(Vec<RelPath>, bool), WsError> {
        let mut out = Vec::new();
        let mut used = 0u64;
        let mut truncated = false;
        let r = self.walk(base, &mut |e| {
            if !visible(e) {
                return Visit::Skip;
            }
            if glob.is_match(e.path.as_str()) {
                used += json_string_len(e.path.as_str()) + PER_ITEM + item_extra;
                if used > max_answer_bytes {
                    truncated = true;
                    return Visit::Stop;
                }
                out.push(e.path.clone());
            }
            Visit::Descend
        });
        match r {
            // Cut at the depth limit: say so, as for the answer's size.
            Ok(walked) => Ok((out, truncated || walked.truncated())),
            Err(WsError::NotFound) | Err(WsError::NotDir) => Ok((out, truncated)),
            Err(e) => Err(e),
        }
    }

    /// Searches the file or tree at `start` (canonical). `readable` decides per entry
    /// whether it may be seen; a file it refuses is never opened.
    pub fn grep(
        &self,
        start: &RelPath,
        start_is_dir: bool,
        opts: &GrepOptions<'_>,
        readable: &dyn Fn(&Entry) -> bool,
    ) -> Result<(Vec<GrepMatch>, bool), WsError> {
        let mut out = Vec::new();
        let used = std::cell::Cell::new(0u64);
        let truncated = std::cell::Cell::new(false);
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        // Err for a file that cannot be searched (special, hard-linked, too large...):
        // a named file reports it, a file met in a walk is skipped.
        let mut search_one = |path: &RelPath, out: &mut Vec<GrepMatch>| -> Result<(), WsError> {
            let (file, meta) = self.open_regular(path)?;
            if meta.len() > opts.max_file_bytes {
                return Err(WsError::TooLarge {
                    size: meta.len(),
                    limit: opts.max_file_bytes,
                });
            }
            let remaining = opts.max_results.saturating_sub(out.len());
            let mut found = 0usize;
            let sink = Lossy(|lnum, line| {
                let line = clip(line.trim_end_matches(['\n', '\r']));
                let size = json_string_len(&line)
                    + json_string_len(path.as_str())
                    + PER_ITEM
                    + opts.item_extra;
                if used.get() + size > opts.max_answer_bytes {
                    truncated.set(true);
                    return Ok(false);
                }
                used.set(used.get() + size);
                out.push(GrepMatch {
                    path: path.clone(),
                    line_number: lnum,
                    line,
                });
                found += 1;
                Ok(found < remaining)
            });
            match opts.content_gate {
                None => {
                    let _ = searcher.search_file(opts.matcher, &file, sink);
                }
                Some(gate) => {
                    let mut bytes = Vec::new();
                    std::io::Read::take(&file, opts.max_file_bytes.saturating_add(1))
                        .read_to_end(&mut bytes)?;
                    if bytes.len() as u64 > opts.max_file_bytes {
                        return Err(WsError::TooLarge {
                            size: bytes.len() as u64,
                            limit: opts.max_file_bytes,
                        });
                    }
                    if gate(path, &bytes) {
                        let _ = searcher.search_slice(opts.matcher, &bytes, sink);
                    }
                }
            }
            Ok(())
        };
        if !start_is_dir {
            search_one(start, &mut out)?;
            return Ok((out, truncated.get()));
        }
        let walked = self.walk(start, &mut |e| {
            if out.len() >= opts.max_results || truncated.get() {
                return Visit::Stop;
            }
            if !readable(e) {
                return Visit::Skip;
            }
            match e.kind {
                FileKind::Directory => Visit::Descend,
                FileKind::File => {
                    if opts.include.is_none_or(|g| g.matches(e)) {
                        let _ = search_one(&e.path, &mut out);
                    }
                    Visit::Skip
                }
                _ => Visit::Skip,
            }
        })?;
        out.truncate(opts.max_results);
        Ok((out, truncated.get() || walked.truncated()))
    }
}

/// What one listed item adds to an answer beyond its strings (field names, numbers).
const PER_ITEM: u64 = 48;

/// The size of `s` once written as a JSON string (quotes included), without building it.
pub fn json_string_len(s: &str) -> u64 {
    let extra: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + extra + 2
}

fn clip(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_string();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}
