//! `[secrets]` compiled: the built-in secret-name patterns, the file's own, and the
//! built-in ones `disabled_patterns` waives.

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use crate::error::PolicyError;
use crate::position::{at, line_col};
use crate::raw::RawPolicy;
use fsgate_decide::{SecretPattern, Secrets, Waivers};

/// Built-in secret-name patterns: (id, regex), matched case-insensitively per component.
pub(crate) const BUILTIN_SECRETS: &[(&str, &str)] = &[
    // `.env`, `.envrc`, `.env.local`, `.env-prod`, `.env_test`, `prod.env` (not Flask's
    // `.flaskenv`, which Flask keeps for what is public and committed).
    ("dotenv", r"^\.env(rc)?([._-].*)?$|\.env$"),
    ("ssh-private-key", r"^id_(rsa|dsa|ecdsa|ed25519)(_sk)?$"),
    ("ssh-dir", r"^\.ssh$"),
    (
        "key-material",
        r"\.(pem|key|p12|pfx|jks|keystore|kdbx|ppk)$",
    ),
    ("credentials", r"^\.?(git-)?credentials"),
    ("secret", r"secret"),
    ("netrc", r"^[._]?netrc$"),
    ("package-tokens", r"^\.(npmrc|pypirc|pgpass|dockercfg)$"),
    ("cloud-credentials", r"^\.(aws|azure|gnupg|kube|docker)$"),
    ("vcs-internals", r"^\.(git|hg|svn)$"),
];

pub(super) fn compile_secrets(
    raw: &RawPolicy,
    src: &str,
) -> Result<(Secrets, Waivers), PolicyError> {
    let waived = waived_builtins(raw, src)?;
    let mut patterns: Vec<SecretPattern> = Vec::new();
    let mut waivers = Vec::new();
    if raw.secrets.builtin_on() {
        for (id, re) in BUILTIN_SECRETS {
            let p = SecretPattern {
                id: format!("secrets:{id}"),
                source: (*re).to_string(),
                builtin: true,
            };
            if waived.contains(id) {
                waivers.push(p);
            } else {
                patterns.push(p);
            }
        }
    }
    for (i, p) in raw.secrets.patterns.iter().enumerate() {
        let key = format!("secrets.patterns[{i}].regex");
        build_regex(p.regex.get_ref()).map_err(|e| PolicyError::Invalid {
            key: key.clone(),
            line: at(src, &p.regex),
            message: format!("invalid regex: {}", first_line(&e.to_string())),
        })?;
        // Matched composed (NFC), as every path is also decided (fsgate-decide).
        let composed = {
            use unicode_normalization::UnicodeNormalization;
            p.regex.get_ref().nfc().collect::<String>()
        };
        patterns.push(SecretPattern {
            id: format!("secrets:{}", p.id),
            source: composed,
            builtin: false,
        });
    }
    Ok((secrets_of(patterns), waivers_of(waivers)?))
}

/// The built-in pattern ids `[secrets] disabled_patterns` names (`secret` or
/// `secrets:secret`); an unknown id is an error at its position.
fn waived_builtins(raw: &RawPolicy, src: &str) -> Result<Vec<&'static str>, PolicyError> {
    let mut out = Vec::new();
    for (i, w) in raw.secrets.disabled_patterns.iter().enumerate() {
        let name = w.get_ref().trim();
        let name = name.strip_prefix("secrets:").unwrap_or(name);
        let (line, col) = line_col(src, w.span().start);
        let located = |message: String| PolicyError::Located {
            key: format!("secrets.disabled_patterns[{i}]"),
            line,
            col,
            message,
        };
        let Some((id, _)) = BUILTIN_SECRETS.iter().find(|(id, _)| *id == name) else {
            let known: Vec<&str> = BUILTIN_SECRETS.iter().map(|(id, _)| *id).collect();
            return Err(located(format!(
                "unknown built-in secret-name pattern `{name}`; the built-in ids are {}",
                known.join(", ")
            )));
        };
        if !raw.secrets.builtin_on() {
            return Err(located(
                "waives a built-in pattern, but `builtin = false` turns them all off".into(),
            ));
        }
        out.push(*id);
    }
    Ok(out)
}

/// The secret-name patterns in force; their set is compiled on first use (each pattern
/// of the file was compiled alone when it was read, so a mistake in one is reported at
/// load).
pub(crate) fn secrets_of(patterns: Vec<SecretPattern>) -> Secrets {
    Secrets::deferred(patterns)
}

/// The waived patterns, compiled (no set when nothing is waived: deciding skips it).
pub(crate) fn waivers_of(patterns: Vec<SecretPattern>) -> Result<Waivers, PolicyError> {
    let set = if patterns.is_empty() {
        None
    } else {
        Some(
            pattern_set(&patterns).map_err(|message| PolicyError::Invalid {
                key: "secrets.patterns".into(),
                line: 0,
                message,
            })?,
        )
    };
    Ok(Waivers { patterns, set })
}

/// The patterns as one case-insensitive set; Err: why it cannot be compiled.
fn pattern_set(patterns: &[SecretPattern]) -> Result<RegexSet, String> {
    RegexSetBuilder::new(patterns.iter().map(|p| p.source.as_str()))
        .case_insensitive(true)
        .build()
        .map_err(|e| first_line(&e.to_string()))
}

pub(crate) fn build_regex(src: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(src).case_insensitive(true).build()
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
