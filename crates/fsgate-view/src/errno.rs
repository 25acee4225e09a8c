//! A refusal or failure of the gateway as the errno a process sees at once.

use fsgate_base::error::GatewayError;
use fuser::Errno;

/// Whether a refusal hides the name: a lookup of a name the policy does not let be
/// seen answers that it does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A name the process may not see: ENOENT.
    Hidden,
    /// An operation it may not do: EACCES.
    Denied,
}

/// The errno for `e`.
pub(crate) fn errno(e: &GatewayError, refusal: Refusal) -> Errno {
    match e {
        GatewayError::NotFound { .. } | GatewayError::MissingParent { .. } => Errno::ENOENT,
        GatewayError::Refused { rule, .. } if rule == fsgate_gateway::RULE_NO_REPLACE => {
            Errno::EEXIST
        }
        // A set-ID or sticky bit is not the process's to set, as for an unprivileged
        // process on a filesystem mounted nosuid.
        GatewayError::Refused { rule, .. } if rule == fsgate_gateway::ops::RULE_SET_ID => {
            Errno::EPERM
        }
        // A link that would lead out of the workspace, as a filesystem that does not
        // make such links says.
        GatewayError::Refused { rule, .. } if rule == fsgate_gateway::ops::RULE_LINK_TARGET => {
            Errno::EPERM
        }
        GatewayError::Refused { .. } if refusal == Refusal::Hidden => Errno::ENOENT,
        GatewayError::Refused { .. } => Errno::EACCES,
        GatewayError::Limit { rule, .. } if rule.ends_with("_bytes") => Errno::EFBIG,
        GatewayError::Limit { .. } => Errno::EACCES,
        GatewayError::InvalidParams(msg) => invalid(msg),
        GatewayError::Storage { errno, .. } => Errno::from_i32(*errno),
        GatewayError::Internal(_) => Errno::EIO,
    }
}

/// The workspace's own errors reach the view as their message (the gateway maps them
/// to invalid params for the other doors): each is told by the words it ends with.
fn invalid(msg: &str) -> Errno {
    const KNOWN: &[(&str, Errno)] = &[
        (
            "directory is not empty (pass recursive to remove it)",
            Errno::ENOTEMPTY,
        ),
        ("already exists", Errno::EEXIST),
        ("is not a directory", Errno::ENOTDIR),
        ("is a directory", Errno::EISDIR),
        ("is too long for the filesystem", Errno::ENAMETOOLONG),
        ("not valid UTF-8", Errno::EILSEQ),
        (
            "a rename cannot cross filesystems; copy and remove instead",
            Errno::EXDEV,
        ),
    ];
    KNOWN
        .iter()
        .find(|(tail, _)| msg.ends_with(tail))
        .map_or(Errno::EINVAL, |(_, e)| *e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_name_does_not_exist_and_a_denied_change_is_eacces() {
        let refused = GatewayError::Refused {
            reason: "r".into(),
            rule: "secrets".into(),
            path: "/.env".into(),
        };
        assert_eq!(errno(&refused, Refusal::Hidden), Errno::ENOENT);
        assert_eq!(errno(&refused, Refusal::Denied), Errno::EACCES);
        let full = GatewayError::InvalidParams(
            "/d: directory is not empty (pass recursive to remove it)".into(),
        );
        assert_eq!(errno(&full, Refusal::Denied), Errno::ENOTEMPTY);
        let taken = GatewayError::Refused {
            reason: "the destination exists".into(),
            rule: fsgate_gateway::RULE_NO_REPLACE.into(),
            path: "/b".into(),
        };
        assert_eq!(errno(&taken, Refusal::Denied), Errno::EEXIST);
    }
}
