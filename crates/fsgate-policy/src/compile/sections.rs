//! The sections other modules own (`[audit]`, `[ws]`, `[http]`, `[backup]`), checked
//! when the policy compiles, each error on its key's line.

use crate::error::PolicyError;
use crate::position::{key_line, section_line};
use crate::raw::RawPolicy;

/// The sections other modules own (`[ws]`, `[http]`, `[audit]`, `[backup]`) are checked
/// here too, so that `fsgate policy check` refuses what `fsgate serve` would refuse.
pub(super) fn check_sections(raw: &RawPolicy, src: &str) -> Result<(), PolicyError> {
    if let Some(audit) = &raw.audit
        && let Err(message) = fsgate_audit::ship::check_all(&audit.ship)
    {
        let line = match key_line(src, "audit", "ship") {
            0 => section_line(src, "audit"),
            n => n,
        };
        return Err(PolicyError::Invalid {
            key: "audit.ship".into(),
            line,
            message,
        });
    }
    if let Some(a) = &raw.audit
        && let Err((key, message)) = a.validate()
    {
        let line = key_line(src, "audit", key);
        return Err(PolicyError::Invalid {
            key: format!("audit.{key}"),
            line: if line == 0 {
                section_line(src, "audit")
            } else {
                line
            },
            message,
        });
    }
    let doors = [
        ("ws", raw.ws.as_ref().map(|s| s.validate())),
        ("http", raw.http.as_ref().map(|s| s.validate())),
    ];
    for (section, checked) in doors {
        if let Some(Err(m)) = checked {
            let (key, message) = match m.split_once(": ") {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (section.to_string(), m),
            };
            return Err(PolicyError::Invalid {
                key,
                line: section_line(src, section),
                message,
            });
        }
    }
    if let Some(b) = &raw.backup
        && let Err(e) = b.retention()
    {
        // Messages start "[backup] <key> ...": point at that key's line.
        let message = e.to_string();
        let key = message
            .strip_prefix("[backup] ")
            .and_then(|rest| rest.split([' ', ':']).next())
            .unwrap_or_default();
        let line = key_line(src, "backup", key);
        return Err(PolicyError::Invalid {
            key: if key.is_empty() {
                "backup".into()
            } else {
                format!("backup.{key}")
            },
            line: if line == 0 {
                section_line(src, "backup")
            } else {
                line
            },
            message,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::error::PolicyError;

    #[test]
    fn sections_other_modules_own_are_checked_with_the_policy() {
        for (extra, key, line) in [
            ("[ws]\nmax_connections = 0\n", "ws.max_connections", 2),
            (
                "[ws]\nallowed_origins = [\"not an origin\"]\n",
                "ws.allowed_origins",
                2,
            ),
            ("[backup]\nkeep_versions = 0\n", "backup.keep_versions", 3),
            ("[backup]\nmax_age = \"forever\"\n", "backup.max_age", 3),
            (
                "[backup]\nkeep_versions = 3\n\nmax_file_bytes = 0\n",
                "backup.max_file_bytes",
                5,
            ),
            (
                "[backup]\nmax_total_bytes = 0\n",
                "backup.max_total_bytes",
                3,
            ),
            (
                "[backup]\nmax_sparse_bytes = 0\n",
                "backup.max_sparse_bytes",
                3,
            ),
        ] {
            let text = format!("version = 1\n{extra}");
            match crate::Policy::from_toml(&text, "t") {
                Err(PolicyError::Invalid {
                    key: k, line: l, ..
                }) => {
                    assert_eq!((k.as_str(), l), (key, line), "{extra}");
                }
                other => panic!("{extra}: {:?}", other.err()),
            }
        }
    }
}
