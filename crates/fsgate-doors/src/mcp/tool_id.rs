//! Every tool this server offers, by name, and the operation classes each needs: what
//! the catalogue, its descriptions and the calls share.

use fsgate_decide::{BinaryMode, OpClass};
use fsgate_gateway::ops::OpId;
use fsgate_policy::Policy;

/// Paths a single `read_multiple_files` call may name.
pub(super) const MAX_MULTI_PATHS: usize = 64;
/// Entries (files and directories) a `directory_tree` result may hold. A cap on the
/// walk's work and memory; the message limit bounds the answer's bytes on its own.
pub(super) const MAX_TREE_ENTRIES: usize = 100_000;

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

    /// The operation this tool offers as itself, if it is one operation's tool: the
    /// inverse of [`tool_of`], which is where each operation is mapped.
    pub(super) fn op(self) -> Option<OpId> {
        OpId::ALL
            .iter()
            .copied()
            .find(|&op| tool_of(op) == Some(self))
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

    /// Whether the tool changes the workspace.
    pub(super) fn changes(self) -> bool {
        self.classes()
            .iter()
            .any(|c| matches!(c, OpClass::Write | OpClass::Delete))
    }

    /// Whether the policy could ever allow this tool. read_media_file is for images and
    /// audio, which `[limits] binary = "deny"` always refuses: it is not offered then.
    pub(super) fn offered(self, pol: &Policy) -> bool {
        if self == ToolId::ReadMediaFile && pol.limits().binary == BinaryMode::Deny {
            return false;
        }
        self.classes().iter().all(|c| pol.can_ever(*c))
    }
}

/// The tool that offers `op`, if this door offers it: each is decoded from the operation
/// by `tools::plan_op`. Both are `match`es without a catch-all, so the compiler lists
/// them for a new operation. The reference server's other tools compose operations.
pub(super) fn tool_of(op: OpId) -> Option<ToolId> {
    Some(match op {
        OpId::ReadText => ToolId::ReadTextFile,
        OpId::ReadFile => ToolId::ReadMediaFile,
        OpId::Write => ToolId::WriteTextFile,
        OpId::Edit => ToolId::EditFile,
        OpId::Ls => ToolId::Ls,
        OpId::Tree => ToolId::DirectoryTree,
        OpId::Stat => ToolId::Stat,
        OpId::Glob => ToolId::Glob,
        OpId::Grep => ToolId::Grep,
        OpId::Mkdir => ToolId::Mkdir,
        OpId::Rm => ToolId::Rm,
        OpId::Rename => ToolId::Rename,
        // The filesystem view's: no tool opens a file or changes its mode.
        _ => return None,
    })
}
