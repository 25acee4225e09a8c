//! What the steps of composing share: one file of a chain, and the rules a base wrote.

use std::path::PathBuf;

use crate::raw::RawPolicy;

/// One file of a chain.
pub(crate) struct Layer {
    pub raw: RawPolicy,
    pub text: String,
    /// The file's name in errors.
    pub origin: String,
    /// The directory its relative paths are relative to.
    pub dir: Option<PathBuf>,
}

/// Rules a base file wrote: (rule id, file).
pub(crate) type Inherited = Vec<(String, String)>;
