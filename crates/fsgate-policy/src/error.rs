//! [`PolicyError`]: why a policy cannot be loaded.

/// Why a policy cannot be loaded. The process refuses to start on any of these.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// TOML syntax, unknown key or wrong type (the parser's message names key and line).
    #[error("{origin}: {message}")]
    Parse {
        /// The file (or `<built-in default policy>`).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A value that parses but is not valid (bad glob, bad regex, unknown op...).
    #[error("{key} (line {line}): {message}")]
    Invalid {
        /// The key, e.g. `rules[2].paths[0]`.
        key: String,
        /// Its line in the file (0: unknown).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Like `Invalid`, for a value whose column is known (a set reference, a waiver id).
    #[error("{key} (line {line}, column {col}): {message}")]
    Located {
        /// The key.
        key: String,
        /// Its line.
        line: usize,
        /// Its column.
        col: usize,
        /// What is wrong.
        message: String,
    },
    /// An error in a policy this one `extends` (or in how it extends it).
    #[error("{file}: {source}")]
    InFile {
        /// The extended file.
        file: String,
        /// The error in it.
        source: Box<PolicyError>,
    },
}
