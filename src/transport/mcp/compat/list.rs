//! Listings in the reference server's shapes: `[DIR]`/`[FILE]` lines, sizes and totals,
//! a JSON tree, name search by glob, `key: value` metadata.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::{TRUNCATED_LINE, args_error, handle, list, unexpected};
use crate::gateway::Gateway;
use crate::ops::{Op, Output, PathStyle, RequestCtx};
use crate::path::RelPath;
use crate::transport::mcp::args::{ListSizesArgs, PathArgs, SearchFilesArgs, SortBy, TreeArgs};
use crate::transport::mcp::catalog::MAX_TREE_ENTRIES;
use crate::transport::mcp::render::{ToolError, text};
use crate::workspace::{Entry, FileKind};

/// Deepest directory nesting `directory_tree` descends into.
const MAX_TREE_DEPTH: usize = 128;

fn tag(e: &Entry) -> &'static str {
    if e.kind == FileKind::Directory {
        "[DIR]"
    } else {
        "[FILE]"
    }
}

/// `list_directory`: `[DIR] name` / `[FILE] name` lines.
pub(in crate::transport::mcp) fn list_directory(
    gw: &Gateway,
    ctx: &RequestCtx,
    a: PathArgs,
) -> Result<CallToolResult, ToolError> {
    let (entries, truncated) = list(gw, ctx, &a.path)?;
    let mut lines: Vec<String> = entries
        .iter()
        .map(|e| format!("{} {}", tag(e), e.name))
        .collect();
    if truncated {
        lines.push(TRUNCATED_LINE.into());
    }
    Ok(text(lines.join("\n")))
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

/// `list_directory_with_sizes`: entries with sizes, then totals.
pub(in crate::transport::mcp) fn list_with_sizes(
    gw: &Gateway,
    ctx: &RequestCtx,
    a: ListSizesArgs,
) -> Result<CallToolResult, ToolError> {
    let (mut entries, truncated) = list(gw, ctx, &a.path)?;
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
            format!("{} {:<30} {size}", tag(e), e.name)
                .trim_end()
                .to_string()
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

/// Exclusion globs as the reference server reads them: relative to the start, and a
/// pattern without `*` also matches that name at any depth.
fn exclusions(tool: &'static str, patterns: Option<&[String]>) -> Result<GlobSet, ToolError> {
    let mut set = GlobSetBuilder::new();
    for p in patterns.unwrap_or_default() {
        let p = p.trim_start_matches("./").trim_end_matches('/');
        if p.is_empty() {
            continue;
        }
        let forms = if p.contains('*') {
            vec![p.to_string()]
        } else {
            vec![p.to_string(), format!("**/{p}")]
        };
        for f in forms {
            let g = GlobBuilder::new(&f)
                .literal_separator(true)
                .build()
                .map_err(|e| {
                    args_error(
                        tool,
                        &format!("invalid exclude pattern {p:?}: {}", e.kind()),
                    )
                })?;
            set.add(g);
        }
    }
    set.build()
        .map_err(|e| args_error(tool, &format!("invalid exclude patterns: {}", e.kind())))
}

/// True if `rel` or any of its ancestors is excluded (so excluding a directory excludes
/// everything beneath it).
fn excluded(set: &GlobSet, rel: &str) -> bool {
    if set.is_empty() {
        return false;
    }
    rel.match_indices('/').any(|(i, _)| set.is_match(&rel[..i])) || set.is_match(rel)
}

/// `directory_tree`: recursive listing through the gateway, one `ls` per directory.
pub(in crate::transport::mcp) fn tree(
    gw: &Gateway,
    ctx: &RequestCtx,
    a: TreeArgs,
) -> Result<CallToolResult, ToolError> {
    let mut walk = TreeWalk {
        gw,
        ctx,
        excl: exclusions("directory_tree", a.exclude_patterns.as_deref())?,
        count: 0,
        top: &a.path,
    };
    let nodes = walk.subtree(&a.path, "", 0)?;
    let pretty = serde_json::to_string_pretty(&Value::Array(nodes))
        .map_err(|e| ToolError::Failed(format!("internal error: {e}")))?;
    Ok(text(pretty))
}

/// One `directory_tree` walk: one gateway `ls` per directory, within the entry and
/// depth limits.
struct TreeWalk<'a> {
    gw: &'a Gateway,
    ctx: &'a RequestCtx,
    excl: GlobSet,
    /// Entries so far.
    count: usize,
    /// The requested path, for limit messages.
    top: &'a str,
}

impl TreeWalk<'_> {
    fn limit(&self, reason: String, rule: &'static str) -> ToolError {
        ToolError::Limit {
            reason,
            rule,
            path: self.top.to_string(),
        }
    }

    fn subtree(
        &mut self,
        dir: &str,
        rel_prefix: &str,
        depth: usize,
    ) -> Result<Vec<Value>, ToolError> {
        let mut out = Vec::new();
        let (entries, truncated) = list(self.gw, self.ctx, dir)?;
        if truncated {
            return Err(self.limit(
                format!("{dir} has more entries than fit in one answer; ask for a subdirectory"),
                "limits.max_message_bytes",
            ));
        }
        for e in entries {
            let rel = if rel_prefix.is_empty() {
                e.name.clone()
            } else {
                format!("{rel_prefix}/{}", e.name)
            };
            if self.excl.is_match(&rel) {
                continue;
            }
            self.count += 1;
            if self.count > MAX_TREE_ENTRIES {
                return Err(self.limit(
                    format!(
                        "the tree holds more than {MAX_TREE_ENTRIES} entries; ask for a subdirectory or add excludePatterns"
                    ),
                    "mcp.directory_tree.max_entries",
                ));
            }
            if e.kind != FileKind::Directory {
                out.push(json!({"name": e.name, "type": "file"}));
                continue;
            }
            if depth + 1 >= MAX_TREE_DEPTH {
                return Err(self.limit(
                    format!("the tree is more than {MAX_TREE_DEPTH} levels deep"),
                    "mcp.directory_tree.max_depth",
                ));
            }
            let child = self.gw.show_path(PathStyle::AbsoluteOrRelative, &e.path);
            let children = self.subtree(&child, &rel, depth + 1)?;
            out.push(json!({"name": e.name, "type": "directory", "children": children}));
        }
        Ok(out)
    }
}

/// `search_files`: a gateway glob for names below `path`, minus the exclusions.
pub(in crate::transport::mcp) fn search_files(
    gw: &Gateway,
    ctx: &RequestCtx,
    a: SearchFilesArgs,
) -> Result<CallToolResult, ToolError> {
    let excl = exclusions("search_files", a.exclude_patterns.as_deref())?;
    if a.pattern.is_empty() {
        return Err(args_error("search_files", "pattern must not be empty"));
    }
    let base = RelPath::parse_any(&gw.workspace().dealias(&a.path), gw.workspace().root_path());
    let pattern = if a.pattern.starts_with('/') {
        a.pattern.clone()
    } else {
        let tail = if a.pattern.contains('/') {
            a.pattern.trim_start_matches("./").to_string()
        } else {
            format!("**/{}", a.pattern)
        };
        match &base {
            Ok(rel) if rel.is_root() => tail,
            Ok(rel) => format!("{}/{tail}", globset::escape(rel.as_str())),
            // Not expressible inside the root: the gateway refuses it and names the rule.
            Err(_) => format!("{}/{tail}", a.path.trim_end_matches('/')),
        }
    };
    let (paths, truncated) = match handle(gw, ctx, Op::Glob { pattern })? {
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

/// `rwxr-xr-x` as `755`.
fn octal(perms: &str) -> String {
    perms
        .as_bytes()
        .chunks(3)
        .map(|c| {
            let bit = |i: usize, v: u8| {
                if c.get(i).is_some_and(|b| *b != b'-') {
                    v
                } else {
                    0
                }
            };
            char::from(b'0' + bit(0, 4) + bit(1, 2) + bit(2, 1))
        })
        .collect()
}

/// `get_file_info`: `key: value` lines.
pub(in crate::transport::mcp) fn file_info(
    gw: &Gateway,
    ctx: &RequestCtx,
    a: PathArgs,
) -> Result<CallToolResult, ToolError> {
    let Output::Stat { path, info } = handle(gw, ctx, Op::Stat { path: a.path })? else {
        return Err(unexpected("get_file_info"));
    };
    let lines = [
        format!(
            "path: {}",
            gw.show_path(PathStyle::AbsoluteOrRelative, &path)
        ),
        format!("type: {}", info.kind),
        format!("size: {}", info.size),
        format!(
            "modified: {}",
            info.modified.as_deref().unwrap_or("unknown")
        ),
        format!("isDirectory: {}", info.kind == FileKind::Directory),
        format!("isFile: {}", info.kind == FileKind::File),
        format!("permissions: {}", octal(&info.permissions)),
    ];
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
        assert_eq!(octal("rw-r--r--"), "644");
        assert_eq!(octal("rwxr-x--x"), "751");
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
