//! The tools' argument shapes: one serde struct per shape, whose JSON Schema (schemars)
//! is the tool's `inputSchema`, so what is advertised is exactly what is parsed.
//!
//! Field docs become the schema's descriptions, which a model reads: say what the field
//! does and its limits. Unknown fields are ignored, as the reference server does.

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Deserialize;
use serde_json::Value;

/// A single path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct PathArgs {
    /// Absolute path inside the workspace root, or a path relative to the root.
    pub path: String,
}

/// `ls` / `list_directory`: a directory, one page at a time.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListArgs {
    /// Directory to list: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// Where to continue a long listing: the cursor the previous page ended with (at
    /// most 10,000 entries a page). Omit for the first page.
    pub cursor: Option<String>,
}

/// `read_text_file` / `read_file`: the contract's line window or the reference server's
/// head/tail.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReadTextArgs {
    /// File to read: absolute inside the workspace root, or relative to the root.
    pub path: String,
    /// First line to return, 1-based (default 1). Combine with `limit` for a window.
    #[schemars(range(min = 1))]
    pub line: Option<u64>,
    /// Number of lines to return from `line` on (default: to the end of the file).
    pub limit: Option<u64>,
    /// Return only the first N lines, without the newline after the last one (0: the
    /// whole file). Do not combine with `tail`, `line` or `limit`.
    pub head: Option<u64>,
    /// Return only the last N lines (0: the whole file). Do not combine with `head`,
    /// `line` or `limit`.
    pub tail: Option<u64>,
}

/// `write_text_file` / `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WriteArgs {
    /// File to create or replace: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// The complete new content of the file (UTF-8 text).
    pub content: String,
}

/// One replacement of an `edit_file` edit list.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct EditPair {
    /// Text to find (must not be empty).
    pub old_text: String,
    /// Text to put in its place.
    pub new_text: String,
}

/// `edit_file`: either `oldText`/`newText` (contract) or `edits` (reference server).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct EditArgs {
    /// File to edit: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// Single-replacement form: text that must occur exactly once in the file.
    pub old_text: Option<String>,
    /// Single-replacement form: the text that replaces `oldText`.
    pub new_text: Option<String>,
    /// List form: replacements applied in order, each to the first occurrence of its
    /// `oldText` (matched exactly, else line by line ignoring leading and trailing
    /// whitespace). Use either this or `oldText`/`newText`.
    #[schemars(length(min = 1))]
    pub edits: Option<Vec<EditPair>>,
    /// Only show the unified diff of the change; write nothing (default false).
    pub dry_run: Option<bool>,
}

/// `mkdir`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MkdirArgs {
    /// Directory to create: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// Also create missing parent directories, and succeed if the directory already
    /// exists (default false).
    pub recursive: Option<bool>,
}

/// `rm`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RmArgs {
    /// File or directory to delete: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// Delete a non-empty directory with everything in it (default false: only files
    /// and empty directories).
    pub recursive: Option<bool>,
}

/// `rename`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RenameArgs {
    /// Existing file or directory: absolute inside the workspace root, or relative to it.
    pub old_path: String,
    /// New location; its parent directory must exist. An existing file there is replaced.
    pub new_path: String,
}

/// `move_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MoveArgs {
    /// Existing file or directory: absolute inside the workspace root, or relative to it.
    pub source: String,
    /// New location; must not exist yet, and its parent directory must.
    pub destination: String,
}

/// `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct GlobArgs {
    /// Glob relative to the workspace root (or absolute under it). `*` and `?` stay
    /// within one path component, `**` crosses directories, `{a,b}` alternates,
    /// `[abc]` is a character class. Example: `src/**/*.rs`.
    pub pattern: String,
}

/// `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct GrepArgs {
    /// Regular expression (Rust `regex` syntax, like ripgrep) matched against each line.
    pub pattern: String,
    /// File or directory to search (default: the whole workspace).
    pub path: Option<String>,
    /// Match case-insensitively (default false).
    pub ignore_case: Option<bool>,
    /// Only search files whose path matches this glob, e.g. `**/*.py` or `*.md`.
    pub include_glob: Option<String>,
    /// Stop after this many matching lines (default 1000, at most 100000).
    #[schemars(range(min = 1))]
    pub max_results: Option<u64>,
}

/// Sort order of `list_directory_with_sizes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum SortBy {
    // Variants without doc comments: schemars then writes a plain `enum`, which every
    // model API accepts, rather than `oneOf` with `const`s.
    #[default]
    Name,
    Size,
}

/// `list_directory_with_sizes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListSizesArgs {
    /// Directory to list: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// Sort entries by `name` (default) or by `size` (largest first).
    pub sort_by: Option<SortBy>,
}

/// `directory_tree` and `search_files` exclusions, plus the start.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct TreeArgs {
    /// Directory at the top of the tree: absolute inside the workspace root, or relative.
    pub path: String,
    /// Globs, relative to `path`, of entries to leave out (with everything beneath
    /// them). A pattern without `*` also matches that name at any depth, e.g. `node_modules`.
    pub exclude_patterns: Option<Vec<String>>,
}

/// `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SearchFilesArgs {
    /// Directory to search under: absolute inside the workspace root, or relative to it.
    pub path: String,
    /// Glob matched against each path relative to `path`: `*.rs` finds files directly
    /// in `path`, `**/*.rs` at any depth, `src/**/test_*` below `src`.
    pub pattern: String,
    /// Globs, matched the same way, of entries to leave out with everything beneath
    /// them (e.g. `node_modules` at the top, `**/node_modules` at any depth).
    pub exclude_patterns: Option<Vec<String>>,
}

/// `read_multiple_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MultiReadArgs {
    /// Files to read (1 to 64), each absolute inside the workspace root or relative to it.
    #[schemars(length(min = 1, max = 64))]
    pub paths: Vec<String>,
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct NoArgs {}

/// The `inputSchema` of `T`: JSON Schema 2020-12 with every subschema inlined,
/// optional fields simply not required (no `null` alternatives, which some model APIs
/// reject), and without the top-level `$schema`/`title`/`description` that the tool
/// itself already carries.
pub(super) fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or_default();
    tidy(&mut value);
    let mut obj = match value {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    for key in ["$schema", "title", "description"] {
        obj.remove(key);
    }
    obj.entry("type").or_insert_with(|| "object".into());
    obj.entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    Arc::new(obj)
}

/// Removes the `null` alternative schemars adds for `Option` fields (`"type": ["x",
/// "null"]` becomes `"type": "x"`, `anyOf: [S, {"type": "null"}]` becomes `S`, `null`
/// leaves `enum`s), drops schemars' integer formats, and joins description lines.
fn tidy(v: &mut Value) {
    let Value::Object(obj) = v else {
        if let Value::Array(items) = v {
            items.iter_mut().for_each(tidy);
        }
        return;
    };
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(alts)) = obj.get("anyOf") {
        let rest: Vec<Value> = alts
            .iter()
            .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
            .cloned()
            .collect();
        if rest.len() == 1 && alts.len() == 2 {
            obj.remove("anyOf");
            if let Some(Value::Object(inner)) = rest.into_iter().next() {
                for (k, val) in inner {
                    obj.entry(k).or_insert(val);
                }
            }
        }
    }
    // `uint64` and friends are schemars' own formats, meaningless to clients.
    if obj
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| f.starts_with("int") || f.starts_with("uint"))
    {
        obj.remove("format");
    }
    // Doc comments keep their line breaks; a model reads a description as one paragraph.
    if let Some(Value::String(d)) = obj.get_mut("description") {
        *d = d.split('\n').map(str::trim).collect::<Vec<_>>().join(" ");
    }
    obj.values_mut().for_each(tidy);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn optional_fields_are_not_required_and_not_nullable() {
        let s = input_schema::<ReadTextArgs>();
        assert_eq!(s["type"], json!("object"));
        assert_eq!(s["required"], json!(["path"]));
        assert_eq!(s["properties"]["line"]["type"], json!("integer"));
        assert_eq!(s["properties"]["line"]["minimum"], json!(1));
        let d = s["properties"]["limit"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(!d.is_empty() && !d.contains('\n'), "{d:?}");
        assert!(!s.contains_key("$schema") && !s.contains_key("title"));
    }

    #[test]
    fn empty_arguments_schema_is_an_object() {
        let s = input_schema::<NoArgs>();
        assert_eq!(s["type"], json!("object"));
        assert_eq!(s["properties"], json!({}));
    }

    #[test]
    fn nested_and_enum_fields_are_inlined_without_null() {
        let s = Value::Object((*input_schema::<EditArgs>()).clone());
        let edits = &s["properties"]["edits"];
        assert_eq!(edits["type"], json!("array"), "{s}");
        assert_eq!(
            edits["items"]["required"],
            json!(["oldText", "newText"]),
            "{s}"
        );
        let s = Value::Object((*input_schema::<ListSizesArgs>()).clone());
        assert!(!s.to_string().contains("null"), "{s}");
        assert!(
            s["properties"]["sortBy"].to_string().contains("size"),
            "{s}"
        );
    }
}
