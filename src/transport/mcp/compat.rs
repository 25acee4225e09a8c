//! The reference filesystem server's tools (and the shapes it shares with the contract's
//! read_text_file and edit_file), each composed of gateway operations: nothing here
//! touches the filesystem, so policy, audit and backups apply to every step.

use base64::Engine;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};

use super::args::{
    EditArgs, EditPair, ListSizesArgs, MoveArgs, MultiReadArgs, PathArgs, ReadTextArgs, SearchFilesArgs,
    SortBy, TreeArgs,
};
use super::catalog::{MAX_MULTI_PATHS, MAX_TREE_ENTRIES};
use super::edits::{self, Matching};
use super::render::{ToolError, shown, text};
use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::ops::{Encoding, Op, Output, PathStyle, RequestCtx};
use crate::path::RelPath;
use crate::workspace::{Entry, EntryType};

/// Deepest directory nesting `directory_tree` descends into.
const MAX_TREE_DEPTH: usize = 128;

fn handle(gw: &Gateway, ctx: &RequestCtx, op: Op) -> Result<Output, ToolError> {
    gw.handle(ctx, op).map_err(ToolError::from)
}

fn unexpected(tool: &str) -> ToolError {
    ToolError::Failed(format!("internal error: unexpected gateway output for {tool}"))
}

fn args_error(tool: &'static str, reason: &str) -> ToolError {
    ToolError::Args { tool, reason: reason.to_string() }
}

fn read_whole(gw: &Gateway, ctx: &RequestCtx, path: &str) -> Result<String, ToolError> {
    match handle(gw, ctx, Op::ReadText { path: path.to_string(), line: None, limit: None })? {
        Output::Text(t) => Ok(t),
        _ => Err(unexpected("read_text_file")),
    }
}

fn list(gw: &Gateway, ctx: &RequestCtx, path: &str) -> Result<Vec<Entry>, ToolError> {
    match handle(gw, ctx, Op::Ls { path: path.to_string() })? {
        Output::Entries(e) => Ok(e),
        _ => Err(unexpected("ls")),
    }
}

/// The last `n` lines of `s`, line endings kept.
fn last_lines(s: &str, n: u64) -> &str {
    if n == 0 {
        return "";
    }
    let body = s.strip_suffix('\n').unwrap_or(s);
    let mut seen = 0;
    for (i, b) in body.bytes().enumerate().rev() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return &s[i + 1..];
            }
        }
    }
    s
}

/// `read_text_file` / `read_file`: a line window (contract) or head/tail (reference).
pub(super) fn read_text(
    gw: &Gateway,
    ctx: &RequestCtx,
    tool: &'static str,
    a: ReadTextArgs,
) -> Result<CallToolResult, ToolError> {
    let window = a.line.is_some() || a.limit.is_some();
    let op = |line, limit| Op::ReadText { path: a.path.clone(), line, limit };
    let out = match (a.head, a.tail) {
        (Some(_), Some(_)) => return Err(args_error(tool, "give head or tail, not both")),
        (Some(_), None) | (None, Some(_)) if window => {
            return Err(args_error(tool, "head/tail cannot be combined with line/limit"));
        }
        (Some(h), None) => handle(gw, ctx, op(None, Some(h)))?,
        (None, Some(t)) => match handle(gw, ctx, op(None, None))? {
            Output::Text(s) => Output::Text(last_lines(&s, t).to_string()),
            _ => return Err(unexpected(tool)),
        },
        (None, None) => handle(gw, ctx, op(a.line, a.limit))?,
    };
    match out {
        Output::Text(s) => Ok(text(s)),
        _ => Err(unexpected(tool)),
    }
}

/// `edit_file`: the contract's exactly-once replacement, or the reference server's
/// edit list with a diff.
pub(super) fn edit(gw: &Gateway, ctx: &RequestCtx, a: EditArgs) -> Result<CallToolResult, ToolError> {
    let dry = a.dry_run.unwrap_or(false);
    match (a.edits, a.old_text, a.new_text) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            Err(args_error("edit_file", "give either edits or oldText/newText, not both"))
        }
        (Some(list), None, None) => {
            if list.is_empty() {
                return Err(args_error("edit_file", "edits must hold at least one edit"));
            }
            edit_with_diff(gw, ctx, &a.path, &list, Matching::FirstOrLines, dry)
        }
        (None, Some(old_text), Some(new_text)) if dry => {
            let one = [EditPair { old_text, new_text }];
            edit_with_diff(gw, ctx, &a.path, &one, Matching::ExactlyOnce, true)
        }
        (None, Some(old_text), Some(new_text)) => {
            handle(gw, ctx, Op::Edit { path: a.path.clone(), old_text, new_text })?;
            Ok(text(format!("Successfully edited {}: replaced 1 occurrence", shown(gw, &a.path))))
        }
        (None, _, _) => Err(args_error("edit_file", "give oldText and newText, or edits")),
    }
}

/// Reads the file, applies the edits, and (unless a dry run) writes the result back as
/// one gateway edit of the whole original text, so a change made by someone else in
/// between is detected instead of overwritten.
fn edit_with_diff(
    gw: &Gateway,
    ctx: &RequestCtx,
    path: &str,
    list: &[EditPair],
    how: Matching,
    dry: bool,
) -> Result<CallToolResult, ToolError> {
    let abs = shown(gw, path);
    let original = read_whole(gw, ctx, path)?;
    let edited = edits::apply(&original, list, how).map_err(|e| ToolError::Failed(format!("{e} in {abs}")))?;
    let diff = edits::fenced_diff(&abs, &edited.old_lf, &edited.new_lf);
    if !dry && edited.new_raw != original {
        let op = if original.is_empty() {
            Op::WriteText { path: path.to_string(), content: edited.new_raw }
        } else {
            Op::Edit { path: path.to_string(), old_text: original, new_text: edited.new_raw }
        };
        gw.handle(ctx, op).map_err(|e| match e {
            GatewayError::InvalidParams(_) => ToolError::Failed(format!(
                "{abs} changed while it was being edited; nothing was written (read it again and retry)"
            )),
            other => ToolError::Gateway(other),
        })?;
    }
    Ok(text(diff))
}

/// MIME type and content kind by extension, as the reference server maps them.
fn media_type(path: &str) -> (&'static str, &'static str) {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "png" => ("image", "image/png"),
        "jpg" | "jpeg" => ("image", "image/jpeg"),
        "gif" => ("image", "image/gif"),
        "webp" => ("image", "image/webp"),
        "bmp" => ("image", "image/bmp"),
        "svg" => ("image", "image/svg+xml"),
        "mp3" => ("audio", "audio/mpeg"),
        "wav" => ("audio", "audio/wav"),
        "ogg" => ("audio", "audio/ogg"),
        "flac" => ("audio", "audio/flac"),
        _ => ("blob", "application/octet-stream"),
    }
}

/// A `file://` URI for an absolute path, percent-encoding what a URI cannot hold.
fn file_uri(abs: &str) -> String {
    let mut uri = String::from("file://");
    for b in abs.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// `read_media_file`: the file's bytes as base64 image, audio or blob content.
pub(super) fn read_media(gw: &Gateway, ctx: &RequestCtx, a: PathArgs) -> Result<CallToolResult, ToolError> {
    let data = match handle(gw, ctx, Op::ReadFile { path: a.path.clone() })? {
        Output::File { content, encoding: Encoding::Base64 } => content,
        Output::File { content, encoding: Encoding::Utf8 } | Output::Text(content) => {
            base64::engine::general_purpose::STANDARD.encode(content.as_bytes())
        }
        _ => return Err(unexpected("read_media_file")),
    };
    let abs = shown(gw, &a.path);
    let block = match media_type(&a.path) {
        ("image", mime) => ContentBlock::image(data, mime),
        ("audio", mime) => ContentBlock::audio(data, mime),
        (_, mime) => ContentBlock::resource(ResourceContents::BlobResourceContents {
            uri: file_uri(&abs),
            mime_type: Some(mime.to_string()),
            blob: data,
            meta: None,
        }),
    };
    Ok(CallToolResult::success(vec![block]))
}

/// `read_multiple_files`: each file or its error, `---` between them; at most the
/// policy's read limit of content in total.
pub(super) fn read_multiple(gw: &Gateway, ctx: &RequestCtx, a: MultiReadArgs) -> Result<CallToolResult, ToolError> {
    const TOOL: &str = "read_multiple_files";
    if a.paths.is_empty() {
        return Err(args_error(TOOL, "paths must name at least one file"));
    }
    if a.paths.len() > MAX_MULTI_PATHS {
        return Err(args_error(TOOL, &format!("at most {MAX_MULTI_PATHS} paths per call, got {}", a.paths.len())));
    }
    let budget = gw.policy().limits().max_read_bytes;
    let mut used: u64 = 0;
    let mut failed = 0;
    let mut parts = Vec::with_capacity(a.paths.len());
    for p in &a.paths {
        let abs = shown(gw, p);
        match read_whole(gw, ctx, p) {
            Ok(t) if used + t.len() as u64 <= budget => {
                used += t.len() as u64;
                parts.push(format!("{abs}:\n{t}\n"));
            }
            Ok(_) => {
                failed += 1;
                parts.push(format!(
                    "{abs}: Error - limit exceeded: skipped, the files together would exceed {budget} bytes \
                     (rule limits.max_read_bytes)"
                ));
            }
            Err(e) => {
                failed += 1;
                parts.push(format!("{abs}: Error - {e}"));
            }
        }
    }
    let body = parts.join("\n---\n");
    if failed == a.paths.len() {
        return Ok(CallToolResult::error(vec![ContentBlock::text(body)]));
    }
    Ok(text(body))
}

fn tag(e: &Entry) -> &'static str {
    if e.kind == EntryType::Directory { "[DIR]" } else { "[FILE]" }
}

/// `list_directory`: `[DIR] name` / `[FILE] name` lines.
pub(super) fn list_directory(gw: &Gateway, ctx: &RequestCtx, a: PathArgs) -> Result<CallToolResult, ToolError> {
    let lines: Vec<String> = list(gw, ctx, &a.path)?
        .iter()
        .map(|e| format!("{} {}", tag(e), e.name))
        .collect();
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
    if unit == 0 { format!("{bytes} B") } else { format!("{scaled:.2} {}", UNITS[unit]) }
}

/// `list_directory_with_sizes`: entries with sizes, then totals.
pub(super) fn list_with_sizes(gw: &Gateway, ctx: &RequestCtx, a: ListSizesArgs) -> Result<CallToolResult, ToolError> {
    let mut entries = list(gw, ctx, &a.path)?;
    if a.sort_by.unwrap_or_default() == SortBy::Size {
        entries.sort_by(|x, y| y.size.unwrap_or(0).cmp(&x.size.unwrap_or(0)).then_with(|| x.name.cmp(&y.name)));
    }
    let is_dir = |e: &Entry| e.kind == EntryType::Directory;
    let mut lines: Vec<String> = entries
        .iter()
        .map(|e| {
            let size = if is_dir(e) { String::new() } else { format!("{:>10}", format_size(e.size.unwrap_or(0))) };
            format!("{} {:<30} {size}", tag(e), e.name).trim_end().to_string()
        })
        .collect();
    let files: Vec<&Entry> = entries.iter().filter(|e| !is_dir(e)).collect();
    let total: u64 = files.iter().map(|e| e.size.unwrap_or(0)).sum();
    lines.push(String::new());
    lines.push(format!("Total: {} files, {} directories", files.len(), entries.len() - files.len()));
    lines.push(format!("Combined size: {}", format_size(total)));
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
        let forms = if p.contains('*') { vec![p.to_string()] } else { vec![p.to_string(), format!("**/{p}")] };
        for f in forms {
            let g = GlobBuilder::new(&f)
                .literal_separator(true)
                .build()
                .map_err(|e| args_error(tool, &format!("invalid exclude pattern {p:?}: {}", e.kind())))?;
            set.add(g);
        }
    }
    set.build().map_err(|e| args_error(tool, &format!("invalid exclude patterns: {}", e.kind())))
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
pub(super) fn tree(gw: &Gateway, ctx: &RequestCtx, a: TreeArgs) -> Result<CallToolResult, ToolError> {
    let excl = exclusions("directory_tree", a.exclude_patterns.as_deref())?;
    let mut count = 0;
    let nodes = subtree(gw, ctx, &a.path, "", &excl, &mut count, 0, &a.path)?;
    let pretty = serde_json::to_string_pretty(&Value::Array(nodes))
        .map_err(|e| ToolError::Failed(format!("internal error: {e}")))?;
    Ok(text(pretty))
}

#[allow(clippy::too_many_arguments)]
fn subtree(
    gw: &Gateway,
    ctx: &RequestCtx,
    dir: &str,
    rel_prefix: &str,
    excl: &GlobSet,
    count: &mut usize,
    depth: usize,
    top: &str,
) -> Result<Vec<Value>, ToolError> {
    let mut out = Vec::new();
    for e in list(gw, ctx, dir)? {
        let rel = if rel_prefix.is_empty() { e.name.clone() } else { format!("{rel_prefix}/{}", e.name) };
        if excl.is_match(&rel) {
            continue;
        }
        *count += 1;
        if *count > MAX_TREE_ENTRIES {
            return Err(ToolError::Limit {
                reason: format!(
                    "the tree holds more than {MAX_TREE_ENTRIES} entries; ask for a subdirectory or add excludePatterns"
                ),
                rule: "mcp.directory_tree.max_entries",
                path: top.to_string(),
            });
        }
        if e.kind == EntryType::Directory {
            if depth + 1 >= MAX_TREE_DEPTH {
                return Err(ToolError::Limit {
                    reason: format!("the tree is more than {MAX_TREE_DEPTH} levels deep"),
                    rule: "mcp.directory_tree.max_depth",
                    path: top.to_string(),
                });
            }
            let child = gw.show_path(PathStyle::AbsoluteOrRelative, &e.path);
            let children = subtree(gw, ctx, &child, &rel, excl, count, depth + 1, top)?;
            out.push(json!({"name": e.name, "type": "directory", "children": children}));
        } else {
            out.push(json!({"name": e.name, "type": "file"}));
        }
    }
    Ok(out)
}

/// `move_file`: a rename that refuses to replace an existing destination.
pub(super) fn move_file(gw: &Gateway, ctx: &RequestCtx, a: MoveArgs) -> Result<CallToolResult, ToolError> {
    let dst = shown(gw, &a.destination);
    // Not atomic with the rename (the gateway has no no-replace rename yet), as in the
    // reference server; the rename itself is checked and recorded by the gateway.
    match gw.handle(ctx, Op::Stat { path: a.destination.clone() }) {
        Ok(_) => {
            return Err(ToolError::Failed(format!(
                "destination {dst} already exists; move_file never replaces (rename does)"
            )));
        }
        Err(GatewayError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    handle(gw, ctx, Op::Rename { from: a.source.clone(), to: a.destination })?;
    Ok(text(format!("Successfully moved {} to {dst}", shown(gw, &a.source))))
}

/// `search_files`: a gateway glob for names below `path`, minus the exclusions.
pub(super) fn search_files(gw: &Gateway, ctx: &RequestCtx, a: SearchFilesArgs) -> Result<CallToolResult, ToolError> {
    let excl = exclusions("search_files", a.exclude_patterns.as_deref())?;
    if a.pattern.is_empty() {
        return Err(args_error("search_files", "pattern must not be empty"));
    }
    let base = RelPath::parse_any(&a.path, gw.workspace().root_path());
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
    let paths = match handle(gw, ctx, Op::Glob { pattern })? {
        Output::Paths(p) => p,
        _ => return Err(unexpected("search_files")),
    };
    let base = base.unwrap_or_default();
    let lines: Vec<String> = paths
        .iter()
        .filter(|p| p.strip_prefix(&base).is_none_or(|r| !excluded(&excl, r.as_str())))
        .map(|p| gw.show_path(PathStyle::AbsoluteOrRelative, p))
        .collect();
    if lines.is_empty() {
        return Ok(text("No matches found"));
    }
    Ok(text(lines.join("\n")))
}

/// `rwxr-xr-x` as `755`.
fn octal(perms: &str) -> String {
    perms
        .as_bytes()
        .chunks(3)
        .map(|c| {
            let bit = |i: usize, v: u8| if c.get(i).is_some_and(|b| *b != b'-') { v } else { 0 };
            char::from(b'0' + bit(0, 4) + bit(1, 2) + bit(2, 1))
        })
        .collect()
}

/// `get_file_info`: `key: value` lines.
pub(super) fn file_info(gw: &Gateway, ctx: &RequestCtx, a: PathArgs) -> Result<CallToolResult, ToolError> {
    let Output::Stat { path, info } = handle(gw, ctx, Op::Stat { path: a.path })? else {
        return Err(unexpected("get_file_info"));
    };
    let lines = [
        format!("path: {}", gw.show_path(PathStyle::AbsoluteOrRelative, &path)),
        format!("type: {}", info.kind),
        format!("size: {}", info.size),
        format!("modified: {}", info.modified.as_deref().unwrap_or("unknown")),
        format!("isDirectory: {}", info.kind == "directory"),
        format!("isFile: {}", info.kind == "file"),
        format!("permissions: {}", octal(&info.permissions)),
    ];
    Ok(text(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(last_lines("a\nb\nc\n", 10), "a\nb\nc\n");
        assert_eq!(last_lines("a\nb\n", 0), "");
        assert_eq!(last_lines("", 3), "");
    }

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

    #[test]
    fn media_types_and_uris() {
        assert_eq!(media_type("/w/a.PNG"), ("image", "image/png"));
        assert_eq!(media_type("/w/a.flac"), ("audio", "audio/flac"));
        assert_eq!(media_type("/w/a.bin"), ("blob", "application/octet-stream"));
        assert_eq!(file_uri("/w/a b#.png"), "file:///w/a%20b%23.png");
    }
}
