//! The sections of the policy file that other layers read, typed and with their
//! defaults, made once when the policy is compiled. `serve`, `acp`, `undo`,
//! `backup restore` and `policy check` all read them from here, so what `check`
//! accepts is what the gateway runs with.

use std::path::Path;

use fsgate_audit::AuditSettings;
use fsgate_backup::BackupSettings;
use fsgate_sandbox::SandboxSettings;

use crate::http::HttpSettings;
use crate::raw::{AcpSettings, RawPolicy};
use crate::ws::WsSettings;

/// Every section another layer owns, as the gateway uses it. (`[agent]` is
/// [`crate::Policy::agent`]; `[ask]`, `[notify]` and `[vcs]` have their own accessors.)
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `[audit]`, with relative paths resolved against the policy file's directory.
    pub audit: AuditSettings,
    /// `[backup]`.
    pub backup: BackupSettings,
    /// `[sandbox]`.
    pub sandbox: SandboxSettings,
    /// `[acp]`.
    pub acp: AcpSettings,
    /// `[ws]`.
    pub ws: WsSettings,
    /// `[http]`.
    pub http: HttpSettings,
}

impl Settings {
    /// The sections of `raw` (already checked by the compiler), with defaults for those
    /// absent; relative `[audit]` paths resolved against `base` when it is given.
    pub(crate) fn of(raw: &RawPolicy, base: Option<&Path>) -> Settings {
        let mut audit = raw.audit.clone().unwrap_or_default();
        if let Some(base) = base {
            audit.resolve_relative_to(base);
        }
        Settings {
            audit,
            backup: raw.backup.clone().unwrap_or_default(),
            sandbox: raw.sandbox.clone().unwrap_or_default(),
            acp: raw.acp.clone().unwrap_or_default(),
            ws: raw.ws.clone().unwrap_or_default(),
            http: raw.http.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::Policy;

    #[test]
    fn absent_sections_are_their_defaults() {
        let p = Policy::from_toml("version = 1\n", "t").expect("loads");
        let s = p.settings();
        assert_eq!(s.audit, Default::default());
        assert_eq!(s.backup, Default::default());
        assert_eq!(s.sandbox, Default::default());
        assert!(!s.acp.allow_terminal);
    }

    #[test]
    fn relative_audit_paths_are_the_policy_files_and_the_rest_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("p.toml");
        let text = "version = 1\n[audit]\npath = \"logs/audit.jsonl\"\n\
                    signing_key = \"/abs/key\"\n[acp]\nallow_terminal = true\n\
                    [sandbox]\nrequire_landlock = true\n";
        std::fs::write(&file, text).expect("write");
        let p = Policy::load(&file).expect("loads");
        let s = p.settings();
        assert_eq!(s.audit.path, Some(dir.path().join("logs/audit.jsonl")));
        assert_eq!(s.audit.signing_key, Some(PathBuf::from("/abs/key")));
        assert!(s.acp.allow_terminal);
        assert!(s.sandbox.require_landlock);
        // The same settings for a workspace's view of the policy.
        let scoped = p.for_workspace("w");
        assert_eq!(scoped.settings().audit.path, s.audit.path);
    }

    #[test]
    fn a_section_the_gateway_would_refuse_is_refused_at_load() {
        for bad in ["[ws]\nmax_connections = 0\n", "[backup]\ndir = \"rel\"\n"] {
            let text = format!("version = 1\n{bad}");
            assert!(Policy::from_toml(&text, "t").is_err(), "{bad}");
        }
    }
}
