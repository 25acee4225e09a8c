//! [`SandboxStatus`]: what the kernel actually enforced, reported, never hidden.

use std::fmt;

/// How much of the planned ruleset the kernel enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Every restriction the plan asks for is enforced.
    Fully,
    /// A ruleset is enforced, but some planned restrictions are not (see `missing`).
    Partially,
    /// Nothing is enforced (no Landlock in this kernel or on this OS).
    Not,
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Enforcement::Fully => "fully",
            Enforcement::Partially => "partially",
            Enforcement::Not => "not",
        })
    }
}

/// The outcome of [`super::restrict_self`] (or of preparing an agent's ruleset).
///
/// Serialised (camelCase) into the `initialize` result's `_meta.fsgate.sandbox`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// Fully, partially or not enforced.
    pub enforcement: Enforcement,
    /// The Landlock ABI used, None without Landlock.
    pub abi: Option<u8>,
    /// Whether `PR_SET_NO_NEW_PRIVS` is set (no set-uid escalation through exec).
    pub no_new_privs: bool,
    /// Whether the kernel lets the process change the workspace (false for a
    /// read-only policy: the kernel itself refuses writes).
    pub workspace_write: bool,
    /// Planned restrictions the kernel does not enforce, one line each.
    pub missing: Vec<String>,
    /// What was granted, in words, for logs and `serve --check-sandbox`.
    pub detail: String,
}

impl SandboxStatus {
    /// The status on a system without Landlock.
    pub fn not_enforced(reason: &str, workspace_write: bool) -> Self {
        SandboxStatus {
            enforcement: Enforcement::Not,
            abi: None,
            no_new_privs: false,
            workspace_write,
            missing: vec![format!("no kernel sandbox: {reason}")],
            detail: reason.to_owned(),
        }
    }
}

impl fmt::Display for SandboxStatus {
    /// `landlock: fully enforced (ABI 7)`, `landlock: partially enforced (ABI 3): ...`,
    /// `landlock: not enforced (...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "landlock: {} enforced", self.enforcement)?;
        match (self.abi, self.enforcement) {
            (Some(abi), Enforcement::Partially) => {
                write!(f, " (ABI {abi}): {}", self.missing.join("; "))
            }
            (Some(abi), _) => write!(f, " (ABI {abi})"),
            // The reason comes first in the detail; the rest (an agent's grants) is long.
            (None, _) => write!(f, " ({})", self.detail.split("; ").next().unwrap_or("")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_json_shapes() {
        let full = SandboxStatus {
            enforcement: Enforcement::Fully,
            abi: Some(7),
            no_new_privs: true,
            workspace_write: false,
            missing: vec![],
            detail: "workspace read-only".into(),
        };
        assert_eq!(full.to_string(), "landlock: fully enforced (ABI 7)");
        let json = serde_json::to_value(&full).expect("json");
        assert_eq!(json["enforcement"], "fully");
        assert_eq!(json["abi"], 7);
        assert_eq!(json["noNewPrivs"], true);
        assert_eq!(json["workspaceWrite"], false);

        let partial = SandboxStatus {
            enforcement: Enforcement::Partially,
            missing: vec!["a".into(), "b".into()],
            abi: Some(3),
            ..full.clone()
        };
        assert_eq!(
            partial.to_string(),
            "landlock: partially enforced (ABI 3): a; b"
        );
        let none = SandboxStatus::not_enforced("unsupported on this OS", true);
        assert_eq!(
            none.to_string(),
            "landlock: not enforced (unsupported on this OS)"
        );
        assert_eq!(
            serde_json::to_value(&none).expect("json")["abi"],
            serde_json::Value::Null
        );
    }
}
