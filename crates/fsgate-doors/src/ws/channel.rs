//! The name of the one channel this door speaks, in every message of both sides.

/// The one channel this server speaks.
pub(crate) const CHANNEL: &str = "files";
