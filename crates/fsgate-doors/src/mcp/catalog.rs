//! The tool catalogue: every tool's name, description (written for a model), input
//! schema, output schema and annotations; the contract's tools first, then the reference
//! filesystem server's under their own names.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::json;

use super::args::{
    EditArgs, GlobArgs, GrepArgs, ListArgs, ListSizesArgs, MkdirArgs, MoveArgs, MultiReadArgs,
    NoArgs, PathArgs, ReadTextArgs, RenameArgs, RmArgs, SearchFilesArgs, TreeArgs, WriteArgs,
    input_schema,
};
use super::describe::describe;
use super::tool_id::ToolId;
use fsgate_policy::Policy;

/// Input schemas, generated once at start-up.
pub(super) struct Catalog {
    schemas: Vec<(ToolId, Arc<JsonObject>)>,
    out_ls: Arc<JsonObject>,
    out_stat: Arc<JsonObject>,
    out_paths: Arc<JsonObject>,
    out_grep: Arc<JsonObject>,
    out_text: Arc<JsonObject>,
    out_media: Arc<JsonObject>,
}

/// The input schema of a tool: that of its arguments.
fn input_schema_of(t: ToolId) -> Arc<JsonObject> {
    match t {
        ToolId::ReadTextFile | ToolId::ReadFile => input_schema::<ReadTextArgs>(),
        ToolId::WriteTextFile | ToolId::WriteFile => input_schema::<WriteArgs>(),
        ToolId::EditFile => input_schema::<EditArgs>(),
        ToolId::Ls | ToolId::ListDirectory => input_schema::<ListArgs>(),
        ToolId::Stat | ToolId::ReadMediaFile | ToolId::CreateDirectory | ToolId::GetFileInfo => {
            input_schema::<PathArgs>()
        }
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
    }
}

/// `ls`'s structured output: its entries (`kind` is the entry types' schema).
fn ls_output(kind: &serde_json::Value) -> serde_json::Value {
    json!({
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
    })
}

/// `stat`'s structured output (`time` is the modification time's schema).
fn stat_output(kind: &serde_json::Value, time: &serde_json::Value) -> serde_json::Value {
    json!({
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
    })
}

/// `grep`'s structured output: its matches with their lines.
fn grep_output() -> serde_json::Value {
    json!({
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
    })
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
            .map(|t| (t, input_schema_of(t)))
            .collect();
        // `anyOf`, not a type array: some clients map schemas onto a one-`type` dialect.
        let time = json!({"anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "modification time, RFC 3339 UTC"});
        let kind = json!({"type": "string", "enum": ["file", "directory", "symlink", "other"]});
        Catalog {
            schemas,
            out_ls: object(ls_output(&kind)),
            out_stat: object(stat_output(&kind, &time)),
            out_paths: object(json!({
                "type": "object",
                "properties": {"matches": {"type": "array", "items": {"type": "string"},
                    "description": "absolute paths"}},
                "required": ["matches"],
            })),
            out_grep: object(grep_output()),
            out_text: object(reference_text_output()),
            out_media: object(reference_media_output()),
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

    /// Every tool's output schema: every tool returns structured content.
    fn output_schema(&self, t: ToolId) -> Option<Arc<JsonObject>> {
        let out = match t.output() {
            OutputKind::Ls => &self.out_ls,
            OutputKind::Stat => &self.out_stat,
            OutputKind::Paths => &self.out_paths,
            OutputKind::Matches => &self.out_grep,
            OutputKind::Text => &self.out_text,
            OutputKind::Media => &self.out_media,
        };
        Some(Arc::clone(out))
    }
}

/// What a tool's structured content holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OutputKind {
    /// `ls`'s entries, built by the tool.
    Ls,
    /// `stat`'s metadata, built by the tool.
    Stat,
    /// `glob`'s matching paths, built by the tool.
    Paths,
    /// `grep`'s matching lines, built by the tool.
    Matches,
    /// `{content: <the text>}`, as the reference server's text tools answer.
    Text,
    /// `{content: [<the content blocks>]}`, as the reference's read_media_file answers.
    Media,
}

impl ToolId {
    /// The shape of the tool's structured content.
    pub(super) fn output(self) -> OutputKind {
        match self {
            ToolId::Ls => OutputKind::Ls,
            ToolId::Stat => OutputKind::Stat,
            ToolId::Glob => OutputKind::Paths,
            ToolId::Grep => OutputKind::Matches,
            ToolId::ReadMediaFile => OutputKind::Media,
            ToolId::ReadTextFile
            | ToolId::WriteTextFile
            | ToolId::EditFile
            | ToolId::Mkdir
            | ToolId::Rm
            | ToolId::Rename
            | ToolId::ReadFile
            | ToolId::ReadMultipleFiles
            | ToolId::WriteFile
            | ToolId::CreateDirectory
            | ToolId::ListDirectory
            | ToolId::ListDirectoryWithSizes
            | ToolId::DirectoryTree
            | ToolId::MoveFile
            | ToolId::SearchFiles
            | ToolId::GetFileInfo
            | ToolId::ListAllowedDirectories => OutputKind::Text,
        }
    }
}

/// The reference server's output schema of its text tools, as it publishes it (zod's
/// draft-07 rendering).
fn reference_text_output() -> serde_json::Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
        "additionalProperties": false,
    })
}

/// The reference server's output schema of read_media_file, as it publishes it.
fn reference_media_output() -> serde_json::Value {
    let media = json!({
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["image", "audio"]},
            "data": {"type": "string"},
            "mimeType": {"type": "string"},
        },
        "required": ["type", "data", "mimeType"],
        "additionalProperties": false,
    });
    let resource = json!({
        "type": "object",
        "properties": {
            "type": {"type": "string", "const": "resource"},
            "resource": {
                "type": "object",
                "properties": {
                    "uri": {"type": "string"},
                    "mimeType": {"type": "string"},
                    "blob": {"type": "string"},
                },
                "required": ["uri", "blob"],
                "additionalProperties": false,
            },
        },
        "required": ["type", "resource"],
        "additionalProperties": false,
    });
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"content": {"type": "array", "items": {"anyOf": [media, resource]}}},
        "required": ["content"],
        "additionalProperties": false,
    })
}

fn annotations(t: ToolId) -> ToolAnnotations {
    let a = ToolAnnotations::new().open_world(false);
    match t {
        ToolId::WriteTextFile | ToolId::WriteFile => {
            a.read_only(false).destructive(true).idempotent(true)
        }
        ToolId::EditFile | ToolId::Rm | ToolId::Rename | ToolId::MoveFile => {
            a.read_only(false).destructive(true).idempotent(false)
        }
        ToolId::Mkdir | ToolId::CreateDirectory => {
            a.read_only(false).destructive(false).idempotent(true)
        }
        ToolId::ReadTextFile
        | ToolId::Ls
        | ToolId::Glob
        | ToolId::Grep
        | ToolId::Stat
        | ToolId::ReadFile
        | ToolId::ReadMediaFile
        | ToolId::ReadMultipleFiles
        | ToolId::ListDirectory
        | ToolId::ListDirectoryWithSizes
        | ToolId::DirectoryTree
        | ToolId::SearchFiles
        | ToolId::GetFileInfo
        | ToolId::ListAllowedDirectories => a.read_only(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool_id::tool_of;
    use fsgate_gateway::ops::OpId;

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
    fn every_operation_this_door_offers_has_a_listed_tool_that_maps_back_to_it() {
        let mut seen = Vec::new();
        for &op in OpId::ALL {
            let Some(tool) = tool_of(op) else { continue };
            assert!(
                ToolId::ALL.contains(&tool),
                "{op:?}'s tool {tool:?} is not listed"
            );
            assert_eq!(
                tool.op(),
                Some(op),
                "{tool:?} maps back to another operation"
            );
            assert!(!seen.contains(&tool), "{tool:?} offers two operations");
            seen.push(tool);
        }
        // Every operation has its tool but the filesystem view's `open`, `chmod`,
        // `symlink` and `utimes`; the composed tools are no operation's.
        assert_eq!(seen.len(), OpId::ALL.len() - 4);
        assert_eq!(tool_of(OpId::Open), None);
        assert_eq!(tool_of(OpId::Chmod), None);
        assert_eq!(tool_of(OpId::Symlink), None);
        assert_eq!(tool_of(OpId::Utimes), None);
        for tool in [
            "read_file",
            "write_file",
            "move_file",
            "list_allowed_directories",
        ] {
            let tool = ToolId::from_name(tool).unwrap();
            assert_eq!(tool.op(), None, "{tool:?}");
        }
    }

    #[test]
    fn read_media_file_is_not_offered_when_binary_reads_are_denied() {
        let listed = |binary: &str| {
            let src = format!(
                "version = 1\n[limits]\nbinary = \"{binary}\"\n[[rule]]\nid = \"r\"\n\
                 effect = \"allow\"\nops = [\"read\"]\npaths = [\"**\"]\n"
            );
            let pol = Policy::from_toml(&src, "t").unwrap();
            Catalog::new()
                .tools(&pol, "/ws")
                .iter()
                .any(|t| t.name == "read_media_file")
        };
        assert!(!listed("deny"));
        assert!(listed("media"));
        assert!(listed("base64"));
    }

    #[test]
    fn every_tool_is_listed_under_the_default_policy() {
        let pol = Policy::builtin_default().unwrap();
        let tools = Catalog::new().tools(&pol, "/ws");
        assert_eq!(tools.len(), ToolId::ALL.len());
        for t in &tools {
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.len() > 60, "{}: {d}", t.name);
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
        }
    }
}
