//! What a report is made of: the verdict of verification, what the records say, and
//! the paths it was asked for.

use std::path::PathBuf;

use crate::digest::Digest;
use crate::report::VerifyReport;

/// What a report is made of.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// The verdict of verification, per log.
    pub verify: VerifyReport,
    /// What the records say.
    pub digest: Digest,
    /// The paths the report was asked for.
    pub inputs: Vec<PathBuf>,
}
