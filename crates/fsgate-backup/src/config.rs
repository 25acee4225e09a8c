//! `[backup]` policy section: where backups go and how long they are kept.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::BackupError;

/// The `[backup]` section of a policy file.
///
/// Every field is optional; an absent field means "no limit" (retention) or "the
/// default location" (`dir`). Unknown keys are errors, so a typo cannot silently turn
/// retention off.
#[derive(Debug, Clone, Default, serde::Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BackupSettings {
    /// Directory of the backup store. Must be absolute and outside the workspace.
    /// `--backup-dir` overrides it; without both, fsgate uses a per-workspace directory
    /// under the user's state dir (`$XDG_STATE_HOME`, or `~/.local/state`, then
    /// `fsgate/<name>-<hash>/backups`).
    pub dir: Option<PathBuf>,
    /// Keep at most this many versions per file (the newest ones). At least 1.
    pub keep_versions: Option<u32>,
    /// Remove versions older than this, e.g. `"30d"`, `"12h"`, `"90m"`, `"2w"`, `"45s"`.
    pub max_age: Option<String>,
    /// Total size budget (quota) of the store in bytes, counting the data each version
    /// stores (a sparse file's holes take no room). The oldest versions go first, but the
    /// newest version of each file and each file's session original are never removed
    /// for the budget (so an agent cannot flush the backup of one file by writing large
    /// junk to another); when the budget cannot be met without them, the change that
    /// needs a new backup is refused instead. Default 1 GiB (1073741824).
    pub max_total_bytes: Option<u64>,
    /// Largest backup of one file, in bytes of data (what the copy stores: the allocated
    /// blocks, so a sparse file's holes do not count). A change that would need a larger
    /// backup is refused (see `on_limit`). Default 64 MiB (67108864): every file an agent
    /// can write under the default 10 MiB write limit fits, with room for bigger user files.
    pub max_file_bytes: Option<u64>,
    /// Largest apparent size (holes included) of a file to back up, in bytes. Holes are
    /// not copied but their zeros are hashed, so this bounds the time a backup takes.
    /// Default 1 GiB (1073741824).
    pub max_sparse_bytes: Option<u64>,
    /// What a change does when its backup would pass `max_file_bytes`,
    /// `max_sparse_bytes` or `max_total_bytes`: `"refuse"` (default) or
    /// `"change-without-backup"` (the change goes ahead and its audit record says it has
    /// no backup and which limit was passed).
    pub on_limit: Option<OnLimit>,
}

/// `[backup] on_limit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OnLimit {
    /// Refuse the change: no backup, no change.
    #[default]
    Refuse,
    /// Make the change without a backup, and say so in its audit record.
    ChangeWithoutBackup,
}

/// Default of `max_file_bytes`.
pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
/// Default of `max_sparse_bytes`.
pub(crate) const DEFAULT_MAX_SPARSE_BYTES: u64 = 1 << 30;
/// Default of `max_total_bytes`.
pub(crate) const DEFAULT_MAX_TOTAL_BYTES: u64 = 1 << 30;

/// The validated form of [`BackupSettings`]' retention fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Newest versions kept per file.
    pub keep_versions: Option<u32>,
    /// Maximum age of a version.
    pub max_age: Option<Duration>,
    /// Byte budget of the whole store.
    pub max_total_bytes: Option<u64>,
}

/// The validated size limits of one backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SizeLimits {
    /// Data bytes one backup may store.
    pub max_file_bytes: u64,
    /// Apparent size one backup may hash.
    pub max_sparse_bytes: u64,
    /// What to do past a limit.
    pub on_limit: OnLimit,
}

impl Default for SizeLimits {
    fn default() -> Self {
        SizeLimits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_sparse_bytes: DEFAULT_MAX_SPARSE_BYTES,
            on_limit: OnLimit::Refuse,
        }
    }
}

impl BackupSettings {
    /// Checks the settings and returns the retention rules they describe.
    pub fn retention(&self) -> Result<Retention, BackupError> {
        if self.keep_versions == Some(0) {
            return Err(BackupError::BadSettings(
                "[backup] keep_versions must be at least 1 (0 would keep no backups)".into(),
            ));
        }
        if let Some(dir) = &self.dir
            && !dir.is_absolute()
        {
            return Err(BackupError::BadSettings(format!(
                "[backup] dir must be an absolute path, got {:?}",
                dir.display().to_string()
            )));
        }
        for (key, value) in [
            ("max_total_bytes", self.max_total_bytes),
            ("max_file_bytes", self.max_file_bytes),
            ("max_sparse_bytes", self.max_sparse_bytes),
        ] {
            if value == Some(0) {
                return Err(BackupError::BadSettings(format!(
                    "[backup] {key} must be at least 1 (0 would refuse every backup)"
                )));
            }
        }
        let max_age = self.max_age.as_deref().map(parse_age).transpose()?;
        Ok(Retention {
            keep_versions: self.keep_versions,
            max_age,
            max_total_bytes: Some(self.max_total_bytes.unwrap_or(DEFAULT_MAX_TOTAL_BYTES)),
        })
    }

    /// The size limits of one backup (call [`retention`](Self::retention) to validate).
    pub(crate) fn size_limits(&self) -> SizeLimits {
        SizeLimits {
            max_file_bytes: self.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES),
            max_sparse_bytes: self.max_sparse_bytes.unwrap_or(DEFAULT_MAX_SPARSE_BYTES),
            on_limit: self.on_limit.unwrap_or_default(),
        }
    }
}

/// Parses an age such as `"30d"`: a positive integer and one unit of `s`, `m`, `h`, `d`, `w`.
pub fn parse_age(text: &str) -> Result<Duration, BackupError> {
    let bad = |why: &str| {
        BackupError::BadSettings(format!(
            "[backup] max_age {text:?}: {why} (expected e.g. \"30d\", \"12h\", \"90m\", \"2w\")"
        ))
    };
    let text_trim = text.trim();
    let split = text_trim
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| bad("missing unit"))?;
    let (digits, unit) = text_trim.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad("not a number"))?;
    if n == 0 {
        return Err(bad("must be greater than zero"));
    }
    let unit_secs: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad("unknown unit")),
    };
    let secs = n.checked_mul(unit_secs).ok_or_else(|| bad("too large"))?;
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse() {
        assert_eq!(
            parse_age("30d").ok(),
            Some(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(parse_age("12h").ok(), Some(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("90m").ok(), Some(Duration::from_secs(5400)));
        assert_eq!(parse_age("45s").ok(), Some(Duration::from_secs(45)));
        assert_eq!(parse_age("2w").ok(), Some(Duration::from_secs(14 * 86_400)));
        for bad in [
            "",
            "d",
            "30",
            "0d",
            "3x",
            "-1d",
            "1.5d",
            "99999999999999999999d",
        ] {
            assert!(parse_age(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn toml_section_is_strict() {
        let ok: BackupSettings = toml::from_str(
            "dir = \"/var/backups/fsgate\"\nkeep_versions = 5\nmax_age = \"30d\"\nmax_total_bytes = 1000\n",
        )
        .expect("valid section");
        assert_eq!(ok.keep_versions, Some(5));
        assert_eq!(
            ok.retention().ok(),
            Some(Retention {
                keep_versions: Some(5),
                max_age: Some(Duration::from_secs(30 * 86_400)),
                max_total_bytes: Some(1000),
            })
        );
        let typo = toml::from_str::<BackupSettings>("keep_version = 5\n");
        let msg = typo.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("unknown field"), "{msg}");
        assert_eq!(
            toml::from_str::<BackupSettings>("").ok(),
            Some(BackupSettings::default())
        );
    }

    #[test]
    fn invalid_values_are_refused() {
        let zero = BackupSettings {
            keep_versions: Some(0),
            ..Default::default()
        };
        assert!(zero.retention().is_err());
        let relative = BackupSettings {
            dir: Some("backups".into()),
            ..Default::default()
        };
        assert!(relative.retention().is_err());
        let age = BackupSettings {
            max_age: Some("soon".into()),
            ..Default::default()
        };
        assert!(age.retention().is_err());
    }
}
