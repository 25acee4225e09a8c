//! What both making and checking a proof know: its header lines, why one fails, and
//! where a record line keeps its `seq`.

/// First line of an inclusion proof.
pub(crate) const INCLUSION_HEADER: &str = "c2sp.org/tlog-proof@v1";
/// First line of a consistency proof.
pub(crate) const CONSISTENCY_HEADER: &str = "fsgate.audit/consistency-proof@v1";

/// Why a proof could not be made or checked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProofError {
    /// A file could not be read (exit 2).
    #[error("{0}")]
    Unreadable(String),
    /// The proof cannot be made from this log (exit 2).
    #[error("{0}")]
    Unprovable(String),
    /// The proof is malformed or does not hold (exit 1).
    #[error("{0}")]
    Invalid(String),
}

/// A record line's `seq` (its first member).
pub(super) fn record_seq(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}
