//! The tool catalogue: every tool's name, description (written for a model), input
//! schema, output schema and annotations; the contract's tools first, then the reference
//! filesystem server's under their own names.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::json;

use super::args::{
    EditArgs, GlobArgs, GrepArgs, ListSizesArgs, MkdirArgs, MoveArgs, MultiReadArgs, NoArgs, PathArgs,
    ReadTextArgs, RenameArgs, RmArgs, SearchFilesArgs, TreeArgs, WriteArgs, input_schema,
};
use crate::policy::{BinaryMode, OpClass, Policy};

/// Paths a single `read_multiple_files` call may name.
pub(super) const MAX_MULTI_PATHS: usize = 64;
/// Entries a `directory_tree` result may hold.
pub(super) const MAX_TREE_ENTRIES: usize = 10_000;

/// Every tool this server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ToolId {
    // The contract's tools.
    ReadTextFile,
    WriteTextFile,
    EditFile,
    Ls,
    Glob,
    Grep,
    Stat,
    Mkdir,
    Rm,
    Rename,
    // The reference server's (read_text_file and edit_file are shared above).
    ReadFile,
    ReadMediaFile,
    ReadMultipleFiles,
    WriteFile,
    CreateDirectory,
    ListDirectory,
    ListDirectoryWithSizes,
    DirectoryTree,
    MoveFile,
    SearchFiles,
    GetFileInfo,
    ListAllowedDirectories,
}

impl ToolId {
    /// All tools, in the order `tools/list` shows them.
    pub(super) const ALL: [ToolId; 22] = [
        ToolId::ReadTextFile,
        ToolId::WriteTextFile,
        ToolId::EditFile,
        ToolId::Ls,
        ToolId::Glob,
        ToolId::Grep,
        ToolId::Stat,
        ToolId::Mkdir,
        ToolId::Rm,
        ToolId::Rename,
        ToolId::ReadFile,
        ToolId::ReadMediaFile,
        ToolId::ReadMultipleFiles,
        ToolId::WriteFile,
        ToolId::CreateDirectory,
        ToolId::ListDirectory,
        ToolId::ListDirectoryWithSizes,
        ToolId::DirectoryTree,
        ToolId::MoveFile,
        ToolId::SearchFiles,
        ToolId::GetFileInfo,
        ToolId::ListAllowedDirectories,
    ];

    /// The wire name.
    pub(super) fn name(self) -> &'static str {
        match self {
            ToolId::ReadTextFile => "read_text_file",
            ToolId::WriteTextFile => "write_text_file",
            ToolId::EditFile => "edit_file",
            ToolId::Ls => "ls",
            ToolId::Glob => "glob",
            ToolId::Grep => "grep",
            ToolId::Stat => "stat",
            ToolId::Mkdir => "mkdir",
            ToolId::Rm => "rm",
            ToolId::Rename => "rename",
            ToolId::ReadFile => "read_file",
            ToolId::ReadMediaFile => "read_media_file",
            ToolId::ReadMultipleFiles => "read_multiple_files",
            ToolId::WriteFile => "write_file",
            ToolId::CreateDirectory => "create_directory",
            ToolId::ListDirectory => "list_directory",
            ToolId::ListDirectoryWithSizes => "list_directory_with_sizes",
            ToolId::DirectoryTree => "directory_tree",
            ToolId::MoveFile => "move_file",
            ToolId::SearchFiles => "search_files",
            ToolId::GetFileInfo => "get_file_info",
            ToolId::ListAllowedDirectories => "list_allowed_directories",
        }
    }

    /// The tool called `name`, if any.
    pub(super) fn from_name(name: &str) -> Option<ToolId> {
        ToolId::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The operation classes the tool needs; it is listed only if the policy could
    /// ever allow all of them (calls still reach the gateway, which names the rule).
    fn classes(self) -> &'static [OpClass] {
        match self {
            ToolId::ReadTextFile
            | ToolId::ReadFile
            | ToolId::ReadMediaFile
            | ToolId::ReadMultipleFiles
            | ToolId::Grep => &[OpClass::Read],
            ToolId::Ls
            | ToolId::Glob
            | ToolId::Stat
            | ToolId::ListDirectory
            | ToolId::ListDirectoryWithSizes
            | ToolId::DirectoryTree
            | ToolId::SearchFiles
            | ToolId::GetFileInfo => &[OpClass::List],
            ToolId::WriteTextFile
            | ToolId::WriteFile
            | ToolId::EditFile
            | ToolId::Mkdir
            | ToolId::CreateDirectory => &[OpClass::Write],
            ToolId::Rm => &[OpClass::Delete],
            ToolId::Rename | ToolId::MoveFile => &[OpClass::Write, OpClass::Delete],
            ToolId::ListAllowedDirectories => &[],
        }
    }

    /// Whether the policy could ever allow this tool.
    pub(super) fn offered(self, pol: &Policy) -> bool {
        self.classes().iter().all(|c| pol.can_ever(*c))
    }
}

/// Input schemas, generated once at start-up.
pub(super) struct Catalog {
    schemas: Vec<(ToolId, Arc<JsonObject>)>,
    out_ls: Arc<JsonObject>,
    out_stat: Arc<JsonObject>,
    out_paths: Arc<JsonObject>,
    out_grep: Arc<JsonObject>,
}

fn object(v: serde_json::Value) -> Arc<JsonObject> {
    match v {
        serde_json::Value::Object(o) => Arc::new(o),
        _ => Arc::new(JsonObject::new()),
    }
}

impl Catalog {
    /// Builds every schema.
    pub(super) fn new() -> Catalog {
        let schemas = ToolId::ALL
            .into_iter()
            .map(|t| {
                let s = match t {
                    ToolId::ReadTextFile | ToolId::ReadFile => input_schema::<ReadTextArgs>(),
                    ToolId::WriteTextFile | ToolId::WriteFile => input_schema::<WriteArgs>(),
                    ToolId::EditFile => input_schema::<EditArgs>(),
                    ToolId::Ls
                    | ToolId::Stat
                    | ToolId::ReadMediaFile
                    | ToolId::CreateDirectory
                    | ToolId::ListDirectory
                    | ToolId::GetFileInfo => input_schema::<PathArgs>(),
                    ToolId::Glob => input_schema::<GlobArgs>(),
                    ToolId::Grep => input_schema::<GrepArgs>(),
                    ToolId::Mkdir => input_schema::<MkdirArgs>(),
                    ToolId::Rm => input_schema::<RmArgs>(),
                    ToolId::Rename => input_schema::<RenameArgs>(),
                    ToolId::MoveFile => input_schema::<MoveArgs>(),
                    ToolId::ReadMultipleFiles => input_schema::<MultiReadArgs>(),
                    ToolId::ListDirectoryWithSizes => input_schema::<ListSizesArgs>(),
                    ToolId::DirectoryTree => input_schema::<TreeArgs>(),
                    ToolId::SearchFiles => input_schema::<SearchFilesArgs>(),
                    ToolId::ListAllowedDirectories => input_schema::<NoArgs>(),
                };
                (t, s)
            })
            .collect();
        let time = json!({"type": ["string", "null"], "description": "modification time, RFC 3339 UTC"});
        let kind = json!({"type": "string", "enum": ["file", "directory", "symlink", "other"]});
        Catalog {
            schemas,
            out_ls: object(json!({
                "type": "object",
                "properties": {"entries": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "path": {"type": "string", "description": "absolute path"},
                        "type": kind,
                        "size": {"type": "integer", "description": "bytes"},
                        "modified": {"type": "string", "description": "modification time, RFC 3339 UTC"},
                    },
                    "required": ["name", "path", "type"],
                }}},
                "required": ["entries"],
            })),
            out_stat: object(json!({
                "type": "object",
                "properties": {"stat": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "absolute path"},
                        "type": kind,
                        "size": {"type": "integer", "description": "bytes"},
                        "modified": time,
                        "permissions": {"type": "string", "description": "e.g. rw-r--r--"},
                    },
                    "required": ["path", "type", "size", "permissions"],
                }},
                "required": ["stat"],
            })),
            out_paths: object(json!({
                "type": "object",
                "properties": {"matches": {"type": "array", "items": {"type": "string"},
                    "description": "absolute paths"}},
                "required": ["matches"],
            })),
            out_grep: object(json!({
                "type": "object",
                "properties": {"matches": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "absolute path"},
                        "lineNumber": {"type": "integer", "description": "1-based"},
                        "line": {"type": "string"},
                    },
                    "required": ["path", "lineNumber", "line"],
                }}},
                "required": ["matches"],
            })),
        }
    }

    /// The tools the policy could ever allow, described for a model.
    pub(super) fn tools(&self, pol: &Policy, root: &str) -> Vec<Tool> {
        self.schemas
            .iter()
            .filter(|(t, _)| t.offered(pol))
            .map(|(t, schema)| {
                let tool = Tool::new(t.name(), describe(*t, pol, root), Arc::clone(schema))
                    .with_annotations(annotations(*t));
                match self.output_schema(*t) {
                    Some(out) => tool.with_raw_output_schema(out),
                    None => tool,
                }
            })
            .collect()
    }

    /// The output schema of the tools that return structured content.
    fn output_schema(&self, t: ToolId) -> Option<Arc<JsonObject>> {
        match t {
            ToolId::Ls => Some(Arc::clone(&self.out_ls)),
            ToolId::Stat => Some(Arc::clone(&self.out_stat)),
            ToolId::Glob => Some(Arc::clone(&self.out_paths)),
            ToolId::Grep => Some(Arc::clone(&self.out_grep)),
            _ => None,
        }
    }
}

fn annotations(t: ToolId) -> ToolAnnotations {
    let a = ToolAnnotations::new().open_world(false);
    match t {
        ToolId::WriteTextFile | ToolId::WriteFile => a.read_only(false).destructive(true).idempotent(true),
        ToolId::EditFile | ToolId::Rm | ToolId::Rename | ToolId::MoveFile => {
            a.read_only(false).destructive(true).idempotent(false)
        }
        ToolId::Mkdir | ToolId::CreateDirectory => a.read_only(false).destructive(false).idempotent(true),
        _ => a.read_only(true),
    }
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The description a model reads: what the tool does, its limits, how paths work.
fn describe(t: ToolId, pol: &Policy, root: &str) -> String {
    let paths = format!(
        "Paths are absolute inside the workspace root {root}, or relative to it; results name absolute paths."
    );
    let hidden = "Secrets (.env files, keys, credentials), .git and whatever else the workspace policy \
                  denies are refused or left out; a refusal names the policy rule, so do not retry it.";
    let lim = pol.limits();
    let read_max = mib(lim.max_read_bytes);
    let write_max = mib(lim.max_write_bytes);
    let binary = match lim.binary {
        BinaryMode::Deny => "The current policy refuses binary files.",
        BinaryMode::Base64 => "The current policy allows binary files (returned base64-encoded).",
    };
    let d = match t {
        ToolId::ReadTextFile => format!(
            "Read a UTF-8 text file and return its text exactly as stored. Read part of it with `line` \
             (1-based first line) and `limit` (number of lines), or with `head` / `tail` (first / last N \
             lines); use one of these forms at a time. Files over {read_max} and binary files are refused. \
             {paths} {hidden}"
        ),
        ToolId::ReadFile => format!(
            "Same as read_text_file (kept for clients of the reference filesystem server): read a UTF-8 \
             text file, whole or with `head` / `tail` / `line`+`limit`. Files over {read_max} are refused. \
             {paths}"
        ),
        ToolId::WriteTextFile | ToolId::WriteFile => format!(
            "Create a file or replace its whole content with `content` (UTF-8 text). The write is atomic \
             (readers never see half a file) and a replaced version is kept as a backup outside the \
             workspace. Missing parent directories are created. At most {write_max}. To change part of a \
             file, prefer edit_file. {paths} {hidden}"
        ),
        ToolId::EditFile => format!(
            "Edit a text file in place. Two forms: (1) `oldText` + `newText`: replace the single occurrence \
             of oldText, which must occur exactly once (include surrounding lines to make it unique). \
             (2) `edits`: a list of {{oldText, newText}} applied in order, each to the first occurrence of \
             its oldText; if there is no exact match, lines are matched ignoring leading and trailing \
             whitespace and the file's indentation is kept. Form (2) returns a unified diff of the change; \
             with `dryRun: true` either form only returns the diff and writes nothing. The previous \
             version is kept as a backup. {paths} {hidden}"
        ),
        ToolId::Ls => format!(
            "List a directory. Returns JSON {{\"entries\": [{{name, path, type, size, modified}}]}} sorted by \
             name; type is file, directory, symlink or other (symlinks are not followed). {paths} {hidden}"
        ),
        ToolId::Glob => format!(
            "Find files and directories whose path matches a glob, e.g. `src/**/*.rs` or `**/test_*.py`. The \
             pattern is relative to the workspace root (or absolute under it); `*` and `?` stay within one \
             path component, `**` crosses directories. Returns JSON {{\"matches\": [absolute paths]}}. {hidden}"
        ),
        ToolId::Grep => format!(
            "Search file contents for a regular expression (Rust regex syntax, like ripgrep) under `path` \
             (a file or directory; default: the whole workspace). Options: `ignoreCase`, `includeGlob` (only \
             files matching it, e.g. `**/*.py`), `maxResults` (default 1000). Returns JSON {{\"matches\": \
             [{{path, lineNumber, line}}]}}. Binary files and files over {read_max} are skipped. {paths} {hidden}"
        ),
        ToolId::Stat => format!(
            "Metadata of a file or directory: JSON {{\"stat\": {{path, type, size, modified, permissions}}}}. \
             {paths} {hidden}"
        ),
        ToolId::Mkdir => format!(
            "Create a directory. With `recursive: true`, also create missing parents and succeed if it \
             already exists. {paths} {hidden}"
        ),
        ToolId::Rm => format!(
            "Delete a file or an empty directory; with `recursive: true`, a directory and everything in it. \
             Deleted files are kept as backups outside the workspace. The workspace root cannot be \
             deleted. {paths} {hidden}"
        ),
        ToolId::Rename => format!(
            "Move or rename a file or directory from `oldPath` to `newPath`. The parent of newPath must \
             exist; an existing file at newPath is replaced (and kept as a backup). {paths} {hidden}"
        ),
        ToolId::ReadMediaFile => format!(
            "Read an image or audio file and return it as base64 image/audio content with its MIME type, \
             chosen by extension (png, jpg/jpeg, gif, webp, bmp, svg; mp3, wav, ogg, flac; anything else as \
             an application/octet-stream blob). At most {read_max}. {binary} {paths} {hidden}"
        ),
        ToolId::ReadMultipleFiles => format!(
            "Read up to {MAX_MULTI_PATHS} text files at once. Each file appears as `<absolute path>:` \
             followed by its content, separated by `---`; a file that cannot be read shows its error \
             instead without failing the others. Together the files may hold at most {read_max}. \
             {paths} {hidden}"
        ),
        ToolId::CreateDirectory => format!(
            "Create a directory and any missing parents (like mkdir -p); succeeds if it already exists. \
             {paths} {hidden}"
        ),
        ToolId::ListDirectory => format!(
            "List a directory, one entry per line: `[DIR] name` or `[FILE] name`, sorted by name. \
             {paths} {hidden}"
        ),
        ToolId::ListDirectoryWithSizes => format!(
            "List a directory with file sizes: `[DIR] name` / `[FILE] name  size` lines, sorted by \
             `sortBy` (name, default, or size), then totals. {paths} {hidden}"
        ),
        ToolId::DirectoryTree => format!(
            "The directory's subtree as indented JSON: [{{name, type: file|directory, children}}], children \
             only on directories; symlinks are shown as files and not followed. `excludePatterns` leaves \
             matching entries out (a pattern without `*` matches that name at any depth, e.g. \
             node_modules). At most {MAX_TREE_ENTRIES} entries: for bigger trees, ask for a subdirectory or \
             exclude more. {paths} {hidden}"
        ),
        ToolId::MoveFile => format!(
            "Move or rename a file or directory from `source` to `destination`. Fails if destination \
             exists; its parent directory must exist. {paths} {hidden}"
        ),
        ToolId::SearchFiles => format!(
            "Find files and directories by name under `path`, recursively: `pattern` is a glob matched \
             against names at any depth (e.g. `*.rs`, `test_*`); a pattern containing `/` is matched \
             against the path relative to `path` (e.g. `src/**/*.rs`). Matches names only; use grep to \
             search contents. Returns one absolute path per line, or `No matches found`. {paths} {hidden}"
        ),
        ToolId::GetFileInfo => format!(
            "Metadata of a file or directory as `key: value` lines: path, type, size, modified, \
             isDirectory, isFile, permissions (octal). {paths} {hidden}"
        ),
        ToolId::ListAllowedDirectories => format!(
            "The directories this server can reach: only the workspace root {root}. Every path must lie \
             inside it."
        ),
    };
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for t in ToolId::ALL {
            assert_eq!(ToolId::from_name(t.name()), Some(t));
            assert!(seen.insert(t.name()));
        }
        assert_eq!(ToolId::from_name("nope"), None);
    }

    #[test]
    fn every_tool_is_listed_under_the_default_policy() {
        let pol = Policy::builtin_default().unwrap();
        let tools = Catalog::new().tools(&pol, "/ws");
        assert_eq!(tools.len(), ToolId::ALL.len());
        for t in &tools {
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.len() > 60, "{}: {d}", t.name);
            assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{}", t.name);
        }
    }
}
