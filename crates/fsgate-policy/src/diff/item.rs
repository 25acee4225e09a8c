//! One difference between two policies ([`Item`]) and which way it moves access.

/// Which way a difference moves access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Direction {
    /// The new policy lets through something the old one refused (or weakens a
    /// safeguard).
    Loosens,
    /// The new policy refuses something the old one let through.
    Tightens,
    /// Different, without a clear direction.
    Changes,
}

impl Direction {
    /// The word shown in the report.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Direction::Loosens => "loosens",
            Direction::Tightens => "tightens",
            Direction::Changes => "changes",
        }
    }

    /// `Loosens` if `wider` (more is let through), else `Tightens`.
    pub(super) fn wider(wider: bool) -> Direction {
        if wider {
            Direction::Loosens
        } else {
            Direction::Tightens
        }
    }
}

/// One difference between the two policies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Item {
    /// Loosens, tightens or changes.
    pub direction: Direction,
    /// What part of the policy: `decision`, `limits`, `secrets`, `content`,
    /// `content-file`, `rule`, or a section name (`audit`, `agent`, ...).
    pub area: String,
    /// What changed: a key, a rule or pattern id, `op path`.
    pub subject: String,
    /// Under the old policy (`(unset)`, `(absent)` when it had none).
    pub old: String,
    /// Under the new policy.
    pub new: String,
}

impl Item {
    pub(super) fn new(
        direction: Direction,
        area: &str,
        subject: impl Into<String>,
        old: impl Into<String>,
        new: impl Into<String>,
    ) -> Item {
        Item {
            direction,
            area: area.to_string(),
            subject: subject.into(),
            old: old.into(),
            new: new.into(),
        }
    }
}
