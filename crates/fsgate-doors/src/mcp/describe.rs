//! What a model reads about each tool: what it does, its limits (taken from the policy in
//! force), and how paths work.

use super::tool_id::{MAX_MULTI_PATHS, MAX_TREE_ENTRIES, ToolId};
use fsgate_decide::BinaryMode;
use fsgate_policy::Policy;

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The description a model reads: what the tool does, its limits, how paths work.
pub(super) fn describe(t: ToolId, pol: &Policy, root: &str) -> String {
    let d = Texts::new(pol, root);
    // Exhaustive here; each group's own match names only its tools.
    let text = match t {
        ToolId::ReadTextFile
        | ToolId::ReadFile
        | ToolId::ReadMediaFile
        | ToolId::ReadMultipleFiles => d.reading(t),
        ToolId::WriteTextFile
        | ToolId::WriteFile
        | ToolId::EditFile
        | ToolId::Mkdir
        | ToolId::Rm
        | ToolId::Rename
        | ToolId::CreateDirectory
        | ToolId::MoveFile => d.changing(t),
        ToolId::Ls
        | ToolId::Stat
        | ToolId::ListDirectory
        | ToolId::ListDirectoryWithSizes
        | ToolId::DirectoryTree
        | ToolId::GetFileInfo => d.listing(t),
        ToolId::Glob | ToolId::Grep | ToolId::SearchFiles | ToolId::ListAllowedDirectories => {
            d.finding(t)
        }
    };
    text.unwrap_or_default()
}

/// What several descriptions share: the root, how paths work, what is hidden, the
/// policy's size limits and binary mode.
struct Texts<'a> {
    root: &'a str,
    paths: String,
    hidden: &'static str,
    read_max: String,
    write_max: String,
    binary: &'static str,
}

impl<'a> Texts<'a> {
    fn new(pol: &Policy, root: &'a str) -> Texts<'a> {
        let paths = format!(
            "Paths: absolute under the workspace root {root}, or relative to it; results give absolute paths."
        );
        let hidden = "Paths the policy denies (secrets such as .env, .git, ...) are refused with the rule's \
                      name or left out of listings; do not retry them.";
        let lim = pol.limits();
        let read_max = mib(lim.max_read_bytes);
        let write_max = mib(lim.max_write_bytes);
        let binary = match lim.binary {
            BinaryMode::Deny => "The current policy refuses binary files.",
            BinaryMode::Media => {
                "The current policy allows images and audio whose content matches their extension, \
                 and text files; other binary files are refused."
            }
            BinaryMode::Base64 => {
                "The current policy allows binary files (returned base64-encoded)."
            }
        };
        Texts {
            root,
            paths,
            hidden,
            read_max,
            write_max,
            binary,
        }
    }

    /// Tools that read files.
    fn reading(&self, t: ToolId) -> Option<String> {
        let Texts {
            paths,
            hidden,
            read_max,
            binary,
            ..
        } = self;
        let text = match t {
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
            _ => return None,
        };
        Some(text)
    }

    /// Tools that change the workspace.
    fn changing(&self, t: ToolId) -> Option<String> {
        let Texts {
            paths,
            hidden,
            write_max,
            ..
        } = self;
        let text = match t {
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
            ToolId::CreateDirectory => format!(
                "Create a directory and any missing parents (like mkdir -p); succeeds if it already exists. \
                 {paths} {hidden}"
            ),
            ToolId::MoveFile => format!(
                "Move or rename a file or directory from `source` to `destination`. Fails if destination \
                 exists; its parent directory must exist. {paths} {hidden}"
            ),
            _ => return None,
        };
        Some(text)
    }

    /// Tools that list a directory or show an entry.
    fn listing(&self, t: ToolId) -> Option<String> {
        let Texts { paths, hidden, .. } = self;
        let text = match t {
            ToolId::Ls => format!(
                "List a directory. Returns JSON {{\"entries\": [{{name, path, type, size, modified}}]}} sorted by \
                 name; type is file, directory, symlink or other (symlinks are not followed). At most 10,000 \
                 entries per call: when more follow, the answer also has \"nextCursor\"; pass it as `cursor` for \
                 the next page. {paths} {hidden}"
            ),
            ToolId::Stat => format!(
                "Metadata of a file or directory: JSON {{\"stat\": {{path, type, size, modified, permissions}}}}. \
                 {paths} {hidden}"
            ),
            ToolId::ListDirectory => format!(
                "List a directory, one entry per line: `[DIR] name` or `[FILE] name`, sorted by name. At \
                 most 10,000 entries per call: when more follow, the last line says which `cursor` to pass \
                 for the next page. {paths} {hidden}"
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
            ToolId::GetFileInfo => format!(
                "Metadata of a file or directory as `key: value` lines: size, created, modified, accessed \
                 (e.g. `Mon Nov 23 2026 00:24:24 GMT+0000 (Coordinated Universal Time)`; `unknown` where the \
                 file system keeps no creation time), isDirectory, isFile, permissions (octal, e.g. 644). \
                 {paths} {hidden}"
            ),
            _ => return None,
        };
        Some(text)
    }

    /// Tools that find paths or contents, and the one naming the root.
    fn finding(&self, t: ToolId) -> Option<String> {
        let Texts {
            root,
            paths,
            hidden,
            read_max,
            ..
        } = self;
        let text = match t {
            ToolId::Glob => format!(
                "Find files and directories whose path matches a glob, e.g. `src/**/*.rs` or `**/test_*.py`. The \
                 pattern is relative to the workspace root {root} (or absolute under it); `*` and `?` stay within one \
                 path component, `**` crosses directories. Returns JSON {{\"matches\": [absolute paths]}}. {hidden}"
            ),
            ToolId::Grep => format!(
                "Search file contents for a regular expression (Rust regex syntax, like ripgrep) under `path` \
                 (a file or directory; default: the whole workspace). Options: `ignoreCase`, `includeGlob` (only \
                 files matching it, e.g. `**/*.py`), `maxResults` (default 1000). Returns JSON {{\"matches\": \
                 [{{path, lineNumber, line}}]}}. Binary files and files over {read_max} are skipped. {paths} {hidden}"
            ),
            ToolId::SearchFiles => format!(
                "Find files and directories under `path`, recursively: `pattern` is a glob matched against \
                 each path relative to `path`, so `*.rs` finds files directly in `path` and `**/*.rs` finds \
                 them at any depth (`src/**/test_*` below src). `excludePatterns` are globs matched the same \
                 way; an excluded directory hides what is beneath it. Matches paths only; use grep to \
                 search contents. Returns one absolute path per line, or `No matches found`. {paths} {hidden}"
            ),
            ToolId::ListAllowedDirectories => format!(
                "The directories this server can reach: only the workspace root {root}. Every path must lie \
                 inside it."
            ),
            _ => return None,
        };
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_its_own_description() {
        let pol = Policy::builtin_default().expect("built-in policy");
        let texts: Vec<String> = ToolId::ALL
            .into_iter()
            .map(|t| describe(t, &pol, "/ws"))
            .collect();
        for (t, text) in ToolId::ALL.iter().zip(&texts) {
            assert!(!text.is_empty(), "{t:?} has no description");
        }
        // write_text_file and write_file share theirs; every other tool has its own.
        let mut distinct = texts.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), ToolId::ALL.len() - 1);
    }
}
