//! Listings in the reference server's shapes: `[DIR]`/`[FILE]` lines, sizes and totals,
//! a JSON tree, name search by glob.

use fsgate_gateway::ops;
use globset::GlobSet;
use rmcp::model::CallToolResult;

use super::shared::{TRUNCATED_LINE, args_error, handle, list, more_line, names, unexpected};
use crate::door::Ops;
use crate::mcp::args::{ListArgs, ListSizesArgs, SearchFilesArgs, SortBy, TreeArgs};
use crate::mcp::render::Answer;
use crate::mcp::render::{ToolError, text};
use crate::mcp::tool_id::MAX_TREE_ENTRIES;
use fsgate_gateway::ops::{Entry, FileKind};
use fsgate_gateway::ops::{Op, Output, PathStyle};
use fsgate_gateway::{Gateway, escape_json_bytes_into, escape_json_into};

/// Deepest directory nesting `directory_tree` descends into.
const MAX_TREE_DEPTH: usize = 128;

fn tag(e: &Entry) -> &'static str {
    if e.kind == FileKind::Directory {
        "[DIR]"
    } else {
        "[FILE]"
    }
}

/// `list_directory`: `[DIR] name` / `[FILE] name` lines, from names and kinds only; a
/// page at a time, ending with how to ask for the next when more follow.
pub(in crate::mcp) fn list_directory(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: ListArgs,
) -> Result<CallToolResult, ToolError> {
    let (entries, truncated, next) =
        names(gw, ctx, &a.path, (1, a.cursor), Vec::new(), usize::MAX)?;
    let mut out = String::with_capacity(entries.iter().map(|e| e.name.len() + 8).sum());
    for e in &entries {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(tag(e));
        out.push(' ');
        out.push_str(&e.name);
    }
    if truncated {
        if !entries.is_empty() {
            out.push('\n');
        }
        match next {
            Some(c) => out.push_str(&more_line("list_directory", &c)),
            None => out.push_str(TRUNCATED_LINE),
        }
    }
    Ok(text(out))
}

/// Sizes as the reference server prints them (`4.00 KB`).
fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut unit = 0;
    let mut scaled = bytes as f64;
    while scaled >= 1024.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{scaled:.2} {}", UNITS[unit])
    }
}

/// JavaScript's `padEnd(width)`: blanks up to `width` UTF-16 units.
fn pad_end(name: &str, width: usize) -> String {
    let pad = width.saturating_sub(name.encode_utf16().count());
    format!("{name}{:pad$}", "")
}

/// `list_directory_with_sizes`: entries with sizes, then totals.
pub(in crate::mcp) fn list_with_sizes(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: ListSizesArgs,
) -> Result<CallToolResult, ToolError> {
    let (mut entries, truncated, _) = list(gw, ctx, &a.path, None)?;
    if a.sort_by.unwrap_or_default() == SortBy::Size {
        entries.sort_by(|x, y| {
            y.size
                .unwrap_or(0)
                .cmp(&x.size.unwrap_or(0))
                .then_with(|| x.name.cmp(&y.name))
        });
    }
    let is_dir = |e: &Entry| e.kind == FileKind::Directory;
    let mut lines: Vec<String> = entries
        .iter()
        .map(|e| {
            let size = if is_dir(e) {
                String::new()
            } else {
                format!("{:>10}", format_size(e.size.unwrap_or(0)))
            };
            // The trailing blanks of a [DIR] line stay, as on the reference server.
            format!("{} {} {size}", tag(e), pad_end(&e.name, 30))
        })
        .collect();
    let files: Vec<&Entry> = entries.iter().filter(|e| !is_dir(e)).collect();
    let total: u64 = files.iter().map(|e| e.size.unwrap_or(0)).sum();
    lines.push(String::new());
    lines.push(format!(
        "Total: {} files, {} directories",
        files.len(),
        entries.len() - files.len()
    ));
    lines.push(format!("Combined size: {}", format_size(total)));
    if truncated {
        lines.push(TRUNCATED_LINE.into());
    }
    Ok(text(lines.join("\n")))
}

/// Exclusion globs as the reference server reads them (see
/// [`fsgate_gateway::tree_exclusions`]), or the argument error naming the bad one.
fn exclusions(tool: &'static str, patterns: Option<&[String]>) -> Result<GlobSet, ToolError> {
    fsgate_gateway::tree_exclusions(patterns.unwrap_or_default()).map_err(|e| match e.glob() {
        Some(p) => args_error(
            tool,
            &format!("invalid exclude pattern {p:?}: {}", e.kind()),
        ),
        None => args_error(tool, &format!("invalid exclude patterns: {}", e.kind())),
    })
}

/// `search_files`' exclusions: each glob as given, matched against the relative path
/// only (the reference's minimatch; no implicit any-depth form as directory_tree has).
fn search_exclusions(patterns: &[String]) -> Result<GlobSet, ToolError> {
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        let glob = globset::GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                args_error(
                    "search_files",
                    &format!("invalid exclude pattern {p:?}: {}", e.kind()),
                )
            })?;
        set.add(glob);
    }
    set.build()
        .map_err(|e| args_error("search_files", &format!("invalid exclude patterns: {e}")))
}

/// True if `rel` or any of its ancestors is excluded (so excluding a directory excludes
/// everything beneath it).
fn excluded(set: &GlobSet, rel: &str) -> bool {
    if set.is_empty() {
        return false;
    }
    rel.match_indices('/').any(|(i, _)| set.is_match(&rel[..i])) || set.is_match(rel)
}

/// `directory_tree`: one gateway walk of names and kinds, rendered as the reference
/// server's indented JSON (held escaped, as the answer carries it).
pub(in crate::mcp) fn tree(gw: &Gateway, ctx: &Ops<'_>, a: TreeArgs) -> Result<Answer, ToolError> {
    let exclude = a.exclude_patterns.unwrap_or_default();
    exclusions("directory_tree", Some(&exclude))?;
    let depth = (MAX_TREE_DEPTH, None);
    let (entries, truncated, _) = names(gw, ctx, &a.path, depth, exclude, MAX_TREE_ENTRIES)?;
    let limit = |reason: String, rule: &'static str| ToolError::Limit {
        reason,
        rule,
        path: a.path.clone(),
    };
    // Levels are counted on the paths of directories only here: the writer counts each
    // entry's as it writes it (its path then read beside its name, not in a pass of
    // its own over every path).
    let base = entries.first().map_or(0, |e| level_of(e) - 1);
    if let Some(deep) = entries
        .iter()
        .filter(|e| e.kind == FileKind::Directory)
        .find(|e| level_of(e) - base >= MAX_TREE_DEPTH)
    {
        tracing::debug!(path = %deep.path, "directory_tree depth limit");
        return Err(limit(
            format!("the tree is more than {MAX_TREE_DEPTH} levels deep"),
            "mcp.directory_tree.max_depth",
        ));
    }
    if truncated && entries.len() >= MAX_TREE_ENTRIES {
        return Err(limit(
            format!(
                "the tree holds more than {MAX_TREE_ENTRIES} entries; ask for a subdirectory or add excludePatterns"
            ),
            "mcp.directory_tree.max_entries",
        ));
    }
    if truncated {
        return Err(limit(
            format!(
                "{} has more entries than fit in one answer; ask for a subdirectory",
                a.path
            ),
            "limits.max_message_bytes",
        ));
    }
    Ok(Answer::Escaped(tree_json(&entries, base)?))
}

/// Components in an entry's path.
fn level_of(e: &Entry) -> usize {
    e.path.as_str().bytes().filter(|b| *b == b'/').count() + 1
}

/// The entries of a depth-first walk as `serde_json::to_string_pretty` renders the
/// reference server's tree (`[{children, name, type}]`, keys sorted), written directly
/// in the form the answer carries it: JSON-escaped once more, ready to stand between the
/// quotes of the text block (no `Value` per entry, and no second pass to escape it).
/// `base`: the level ([`level_of`]) of the directory the entries are beneath.
fn tree_json(entries: &[Entry], base: usize) -> Result<String, ToolError> {
    // Keys, quotes and line breaks: about 64 bytes an entry; its four or five lines
    // indented two levels a level, of two blanks each: a few levels' worth (the
    // writer grows past it; the levels are not counted ahead).
    let size: usize = entries.iter().map(|e| e.name.len() + 64 + 20 * 3).sum();
    let mut w = TreeWriter {
        out: Vec::with_capacity(size + 2),
        name: Vec::new(),
        last: None,
    };
    let mut next = 0;
    w.array(entries, &mut next, base + 1, 0);
    String::from_utf8(w.out).map_err(|e| ToolError::Failed(format!("internal error: {e}")))
}

/// Writes the escaped tree; `name` is room to escape a name twice in; `last`: the
/// entry whose level was last counted, and its level (an entry's level is asked for
/// again by each array it ends, so it is kept, not counted again).
struct TreeWriter {
    out: Vec<u8>,
    name: Vec<u8>,
    last: Option<(usize, usize)>,
}

impl TreeWriter {
    /// The level of `entries[i]`, if there is one.
    fn level(&mut self, entries: &[Entry], i: usize) -> Option<usize> {
        if let Some((at, level)) = self.last
            && at == i
        {
            return Some(level);
        }
        let level = level_of(entries.get(i)?);
        self.last = Some((i, level));
        Some(level)
    }

    /// A line break (`\n` in the escaped text) and `n` levels of indentation.
    fn line(&mut self, n: usize) {
        self.out.extend_from_slice(b"\\n");
        self.out.resize(self.out.len() + 2 * n, b' ');
    }

    /// `name` as a JSON string, escaped once more: `\"name\"`.
    fn name(&mut self, name: &str) {
        if !name.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
            self.out.extend_from_slice(b"\\\"");
            self.out.extend_from_slice(name.as_bytes());
            self.out.extend_from_slice(b"\\\"");
            return;
        }
        self.name.clear();
        // The same escaping as the pretty printer's, then the text block's.
        escape_json_into(&mut self.name, name);
        escape_json_bytes_into(&mut self.out, &self.name);
    }

    /// Writes the array of the entries at `level` from `entries[*next]` on (each
    /// followed by its children), indented `indent` levels.
    fn array(&mut self, entries: &[Entry], next: &mut usize, level: usize, indent: usize) {
        self.out.push(b'[');
        let mut first = true;
        while let Some(e) = entries
            .get(*next)
            .filter(|_| self.level(entries, *next) == Some(level))
        {
            *next += 1;
            if !first {
                self.out.push(b',');
            }
            first = false;
            self.line(indent + 1);
            self.out.push(b'{');
            self.line(indent + 2);
            let dir = e.kind == FileKind::Directory;
            if dir {
                self.out.extend_from_slice(b"\\\"children\\\": ");
                self.array(entries, next, level + 1, indent + 2);
                self.out.push(b',');
                self.line(indent + 2);
            }
            self.out.extend_from_slice(b"\\\"name\\\": ");
            self.name(&e.name);
            self.out.push(b',');
            self.line(indent + 2);
            self.out.extend_from_slice(if dir {
                b"\\\"type\\\": \\\"directory\\\""
            } else {
                b"\\\"type\\\": \\\"file\\\""
            });
            self.line(indent + 1);
            self.out.push(b'}');
        }
        if !first {
            self.line(indent);
        }
        self.out.push(b']');
    }
}

/// `search_files` as on the reference server: `pattern` and `excludePatterns` are globs
/// matched against the path relative to `path` (`*.py` only directly in it, `**/*.py` at
/// any depth); an excluded directory hides everything beneath it. Matching is the
/// gateway's glob, so refused paths are never listed.
pub(in crate::mcp) fn search_files(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: SearchFilesArgs,
) -> Result<CallToolResult, ToolError> {
    let excl = search_exclusions(a.exclude_patterns.as_deref().unwrap_or_default())?;
    if a.pattern.is_empty() {
        return Err(args_error("search_files", "pattern must not be empty"));
    }
    // Several workspaces: `<name>/...`, and the pattern made absolute to find its own.
    let base = gw.members().named_path(&a.path).ok_or(());
    // An absolute pattern (an fsgate extension) names its own place in the workspace.
    let pattern = match &base {
        _ if a.pattern.starts_with('/') => a.pattern.clone(),
        Ok(_) if gw.is_several() => format!("{}/{}", a.path.trim_end_matches('/'), a.pattern),
        Ok(rel) if rel.is_root() => a.pattern.clone(),
        Ok(rel) => format!("{}/{}", globset::escape(rel.as_str()), a.pattern),
        // Not expressible inside the root: the gateway refuses it and names the rule.
        Err(_) => format!("{}/{}", a.path.trim_end_matches('/'), a.pattern),
    };
    let (paths, truncated) = match handle(gw, ctx, Op::Glob(ops::Glob { pattern }))? {
        Output::Paths { paths, truncated } => (paths, truncated),
        _ => return Err(unexpected("search_files")),
    };
    let base = base.unwrap_or_default();
    let mut lines: Vec<String> = paths
        .iter()
        .filter(|p| {
            p.strip_prefix(&base)
                .is_none_or(|r| !excluded(&excl, r.as_str()))
        })
        .map(|p| gw.show_path(PathStyle::AbsoluteOrRelative, p))
        .collect();
    if lines.is_empty() && !truncated {
        return Ok(text("No matches found"));
    }
    if truncated {
        lines.push(TRUNCATED_LINE.into());
    }
    Ok(text(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_permissions_like_the_reference_server() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(4096), "4.00 KB");
        assert_eq!(format_size(1536 * 1024), "1.50 MB");
        // As "\u{1F600}é".padEnd(5) in JavaScript: the emoji is two UTF-16 units.
        assert_eq!(pad_end("\u{1F600}\u{e9}", 5), "\u{1F600}\u{e9}  ");
        assert_eq!(pad_end("abc", 2), "abc");
    }

    fn entry(path: &str, dir: bool) -> Entry {
        let path = fsgate_base::path::RelPath::parse_rooted(path).unwrap();
        Entry {
            name: path.file_name().unwrap_or_default().into(),
            path,
            kind: if dir {
                FileKind::Directory
            } else {
                FileKind::File
            },
            size: None,
            modified: None,
            mode: None,
            id: None,
            ino: None,
        }
    }

    /// The tree as it was built before: a `Value` per entry, pretty-printed.
    fn tree_value(entries: &[Entry], dir: &str) -> Vec<serde_json::Value> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        entries
            .iter()
            .filter(|e| {
                e.path
                    .as_str()
                    .strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
            })
            .map(|e| match e.kind {
                FileKind::Directory => serde_json::json!({"name": e.name, "type": "directory",
                    "children": tree_value(entries, e.path.as_str())}),
                _ => serde_json::json!({"name": e.name, "type": "file"}),
            })
            .collect()
    }

    fn json_of(entries: &[Entry], base: usize) -> String {
        tree_json(entries, base).unwrap()
    }

    /// What the tree's JSON is in the answer: the pretty printer's text, escaped.
    fn escaped_pretty(tree: &[serde_json::Value]) -> String {
        let pretty = serde_json::to_string_pretty(tree).unwrap();
        let quoted = serde_json::to_string(&pretty).unwrap();
        quoted[1..quoted.len() - 1].to_string()
    }

    #[test]
    fn the_tree_is_written_as_serde_json_pretty_prints_it_escaped() {
        let walk = [
            ("top/a", true),
            ("top/a/b", true),
            ("top/a/b/y \"q\" \\ \u{1} é", false),
            ("top/a/empty", true),
            ("top/a/x\ttab", false),
            ("top/e", true),
            ("top/z.rs", false),
        ];
        let entries: Vec<Entry> = walk.iter().map(|(p, d)| entry(p, *d)).collect();
        let want = escaped_pretty(&tree_value(&entries, "top"));
        assert_eq!(json_of(&entries, 1), want);
        // From the root, and an empty tree.
        let root: Vec<Entry> = [("a", true), ("a/f", false), ("g", false)]
            .iter()
            .map(|(p, d)| entry(p, *d))
            .collect();
        let want = escaped_pretty(&tree_value(&root, ""));
        assert_eq!(json_of(&root, 0), want);
        assert_eq!(json_of(&[], 0), "[]");
    }

    /// A depth-first walk in name order from arbitrary names, each a directory or not,
    /// `shape` giving each entry's kind and whether the next goes inside it.
    fn walk_of(names: &[String], shape: &[(bool, bool)]) -> Vec<Entry> {
        let mut dirs: Vec<String> = vec!["top".into()];
        let mut out: Vec<Entry> = Vec::new();
        for (name, &(dir, into)) in names.iter().zip(shape) {
            let parent = dirs.last().cloned().unwrap_or_default();
            let path = format!("{parent}/{name}");
            if out.iter().any(|e| e.path.as_str() == path) {
                continue;
            }
            out.push(entry(&path, dir));
            if dir && into && dirs.len() < 6 {
                dirs.push(path);
            } else if !into && dirs.len() > 1 {
                dirs.pop();
            }
        }
        out
    }

    proptest::proptest! {
        /// Any names (quotes, backslashes, controls, any character), at any depth: the
        /// tree written escaped is serde_json's pretty printing, escaped by serde_json.
        #[test]
        fn any_tree_is_written_as_serde_json_escapes_it(
            names in proptest::collection::vec("[^/\u{0}]{1,12}", 0..40),
            shape in proptest::collection::vec((proptest::bool::ANY, proptest::bool::ANY), 40),
        ) {
            let names: Vec<String> = names
                .into_iter()
                .filter(|n| n != "." && n != "..")
                .collect();
            let entries = walk_of(&names, &shape);
            let want = escaped_pretty(&tree_value(&entries, "top"));
            proptest::prop_assert_eq!(json_of(&entries, 1), want);
        }
    }

    #[test]
    fn search_exclusions_match_the_relative_path_only() {
        let set = search_exclusions(&["node_modules".into(), "**/*.log".into()]).unwrap();
        assert!(excluded(&set, "node_modules/x.js"));
        assert!(
            !excluded(&set, "a/node_modules/x.js"),
            "no implicit any-depth form"
        );
        assert!(excluded(&set, "a/b/x.log"));
        assert!(search_exclusions(&["a[".into()]).is_err());
    }

    #[test]
    fn exclusions_match_names_at_any_depth_and_prune() {
        let set = exclusions("t", Some(&["node_modules".into(), "*.log".into()])).unwrap();
        assert!(excluded(&set, "node_modules"));
        assert!(excluded(&set, "a/node_modules/x/y.js"));
        assert!(excluded(&set, "x.log"));
        assert!(!excluded(&set, "a/x.log"), "`*` stays within one component");
        assert!(!excluded(&set, "src/main.rs"));
        assert!(exclusions("t", Some(&["a[".into()])).is_err());
    }
}
