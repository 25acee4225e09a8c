//! `[sandbox]` policy section: how strictly the kernel wall is required.

use std::path::PathBuf;

use crate::error::SandboxError;
use crate::status::{Enforcement, SandboxStatus};

/// The `[sandbox]` section of a policy file.
#[derive(Debug, Clone, Default, serde::Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxSettings {
    /// Refuse to start unless Landlock fully enforces the gateway's ruleset (fail
    /// closed). Default false: best effort, with a warning when not fully enforced.
    /// "Fully" needs Landlock ABI 6 (Linux 6.12) or later, where truncate, cross-directory
    /// rename, device ioctl, TCP and signal/abstract-socket scoping are all restricted.
    pub require_landlock: bool,
    /// The older spelling of `[agent] system_paths`, still accepted (setting both is an
    /// error); left out of the schema so editors suggest the new key.
    #[schemars(skip)]
    pub agent_system_paths: Option<Vec<PathBuf>>,
}

impl SandboxSettings {
    /// Applies `require_landlock` to what [`super::restrict_self`] returned: an error if
    /// it is required and not fully enforced, else Ok (with a warning in the log when
    /// the sandbox is weaker than planned).
    pub fn check(&self, status: &SandboxStatus) -> Result<(), SandboxError> {
        if status.enforcement == Enforcement::Fully {
            tracing::info!(%status, "kernel sandbox");
            return Ok(());
        }
        if self.require_landlock {
            return Err(SandboxError::NotFullyEnforced {
                status: Box::new(status.clone()),
            });
        }
        tracing::warn!(
            %status,
            "kernel sandbox is weaker than planned; set [sandbox] require_landlock = true to refuse to start"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(enforcement: Enforcement) -> SandboxStatus {
        SandboxStatus {
            enforcement,
            abi: Some(3),
            no_new_privs: true,
            workspace_write: true,
            missing: vec!["TCP bind/connect are not restricted (needs ABI 4)".into()],
            detail: String::new(),
        }
    }

    #[test]
    fn require_landlock_fails_closed() {
        let strict = SandboxSettings {
            require_landlock: true,
            ..Default::default()
        };
        assert!(strict.check(&status(Enforcement::Fully)).is_ok());
        for weak in [Enforcement::Partially, Enforcement::Not] {
            let err = strict.check(&status(weak)).expect_err("must refuse");
            let msg = err.to_string();
            assert!(
                msg.contains("require_landlock") && msg.contains("enforced"),
                "{msg}"
            );
        }
        let lax = SandboxSettings::default();
        assert!(lax.check(&status(Enforcement::Not)).is_ok());
    }

    #[test]
    fn toml_section_is_strict() {
        let s: SandboxSettings =
            toml::from_str("require_landlock = true\nagent_system_paths = [\"/usr\"]\n")
                .expect("parse");
        assert!(s.require_landlock);
        assert_eq!(s.agent_system_paths, Some(vec![PathBuf::from("/usr")]));
        let typo = toml::from_str::<SandboxSettings>("require_landlok = true\n");
        assert!(
            typo.err()
                .is_some_and(|e| e.to_string().contains("unknown field"))
        );
        assert_eq!(
            toml::from_str::<SandboxSettings>("").ok(),
            Some(SandboxSettings::default())
        );
    }
}
