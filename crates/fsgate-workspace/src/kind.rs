//! [`FileKind`]: what a directory entry is, the one type every layer uses for it.

use std::fmt;

/// The type of a directory entry, not following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Directory,
    /// Symbolic link (not followed).
    Symlink,
    /// FIFO, socket, device.
    Other,
}

impl FileKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Directory => "directory",
            FileKind::Symlink => "symlink",
            FileKind::Other => "other",
        }
    }

    /// From a file type's predicates (std's and cap-std's file types differ). A symlink
    /// is a symlink whatever it points to: nothing here follows it.
    pub(crate) fn from_predicates(is_file: bool, is_dir: bool, is_symlink: bool) -> FileKind {
        match (is_symlink, is_dir, is_file) {
            (true, _, _) => FileKind::Symlink,
            (_, true, _) => FileKind::Directory,
            (_, _, true) => FileKind::File,
            _ => FileKind::Other,
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::FileKind;

    #[test]
    fn wire_names_and_serialisation_agree() {
        for k in [
            FileKind::File,
            FileKind::Directory,
            FileKind::Symlink,
            FileKind::Other,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
            assert_eq!(k.to_string(), k.as_str());
        }
    }
}
