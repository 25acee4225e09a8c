//! One content rule from any source ([`Spec`]) compiled, and the built-in rules compiled
//! once per process on first use ([`builtin_regex`]): below both the scanner and the
//! loading of `[content]`.

use std::collections::HashMap;
use std::path::PathBuf;

use regex::bytes::Regex as BytesRegex;
use toml::Spanned;

use super::allow::AllowRegexes;
use super::builtin::BUILTIN_CONTENT_RULES;
use super::format::{GitleaksAllowlist, GitleaksRequired};
use super::regexes::{bytes_regex, text_regex};
use super::{Allow, CRule, Pattern, Required, Target};
use crate::error::PolicyError;
use crate::position::line_col;

/// Where a rule or allowlist was written, for error messages.
#[derive(Debug, Clone)]
pub(super) enum At {
    Builtin,
    Inline { key: String, line: usize },
    File { file: PathBuf, line: usize },
}

/// A rule from any source, before compiling.
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub(super) id: String,
    pub(super) regex: Option<(String, usize)>,
    pub(super) path: Option<String>,
    pub(super) secret_group: Option<usize>,
    pub(super) entropy: Option<f64>,
    pub(super) keywords: Vec<String>,
    pub(super) allowlists: Vec<(GitleaksAllowlist, At)>,
    pub(super) required: Vec<GitleaksRequired>,
    pub(super) skip_report: bool,
    pub(super) tps: Vec<String>,
    pub(super) fps: Vec<String>,
    pub(super) at: At,
}

/// Turns problems into `PolicyError::Invalid`, located in the policy file.
pub(super) struct Errs<'a> {
    pub(super) src: &'a str,
    /// Line of `gitleaks_config` in the policy, for errors inside that file.
    pub(super) config_line: usize,
}

impl Errs<'_> {
    pub(super) fn at(&self, at: &At, what: &str, message: String) -> PolicyError {
        match at {
            At::Builtin => PolicyError::Invalid {
                key: format!("content.builtin{what}"),
                line: 0,
                message,
            },
            At::Inline { key, line } => PolicyError::Invalid {
                key: format!("{key}{what}"),
                line: *line,
                message,
            },
            At::File { file, line } => PolicyError::Invalid {
                key: "content.gitleaks_config".into(),
                line: self.config_line,
                message: format!("{}:{line}: {message}", file.display()),
            },
        }
    }

    pub(super) fn line<T>(&self, s: &Spanned<T>) -> usize {
        line_col(self.src, s.span().start).0
    }
}

pub(super) fn builtin_specs() -> Vec<Spec> {
    BUILTIN_CONTENT_RULES
        .iter()
        .map(|b| {
            let mut allowlists = Vec::new();
            if !b.allow_regexes.is_empty() || !b.allow_stopwords.is_empty() {
                allowlists.push((
                    GitleaksAllowlist {
                        description: Some("built-in placeholders".into()),
                        condition: None,
                        commits: Vec::new(),
                        paths: Vec::new(),
                        regex_target: None,
                        regexes: b
                            .allow_regexes
                            .iter()
                            .map(|r| Spanned::new(0..0, r.to_string()))
                            .collect(),
                        stopwords: b.allow_stopwords.iter().map(|s| s.to_string()).collect(),
                        target_rules: Vec::new(),
                    },
                    At::Builtin,
                ));
            }
            Spec {
                id: b.id.into(),
                regex: Some((b.regex.into(), 0)),
                path: None,
                secret_group: b.secret_group,
                entropy: b.entropy,
                keywords: b.keywords.iter().map(|k| k.to_string()).collect(),
                allowlists,
                required: Vec::new(),
                skip_report: false,
                tps: b.tps.iter().map(|s| s.to_string()).collect(),
                fps: b.fps.iter().map(|s| s.to_string()).collect(),
                at: At::Builtin,
            }
        })
        .collect()
}

pub(super) fn compile_allow(
    a: &GitleaksAllowlist,
    at: &At,
    errs: &Errs<'_>,
) -> Result<Allow, PolicyError> {
    let bad = |m: String| errs.at(at, "", m);
    let and = match a
        .condition
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("") | Some("OR") | Some("||") => false,
        Some("AND") | Some("&&") => true,
        Some(other) => {
            return Err(bad(format!(
                "unknown allowlist condition `{other}` (expected OR or AND)"
            )));
        }
    };
    let target = match a.regex_target.as_deref() {
        None | Some("") | Some("secret") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(other) => {
            return Err(bad(format!(
                "unknown allowlist regexTarget `{other}` (expected secret, match or line)"
            )));
        }
    };
    if a.commits.is_empty() && a.paths.is_empty() && a.regexes.is_empty() && a.stopwords.is_empty()
    {
        return Err(bad(
            "an allowlist needs at least one of paths, regexes, stopwords or commits".into(),
        ));
    }
    let paths = a
        .paths
        .iter()
        .map(|p| {
            text_regex(p.get_ref()).map_err(|e| bad(format!("invalid allowlist path regex: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let sources: Vec<String> = a.regexes.iter().map(|r| r.get_ref().clone()).collect();
    let regexes = match at {
        At::Builtin => AllowRegexes::deferred(sources),
        _ => {
            let compiled = sources
                .iter()
                .map(|p| bytes_regex(p).map_err(|e| bad(format!("invalid allowlist regex: {e}"))))
                .collect::<Result<_, _>>()?;
            AllowRegexes::compiled(sources, compiled)
        }
    };
    Ok(Allow {
        description: a.description.clone(),
        and,
        has_commits: !a.commits.is_empty(),
        paths,
        target,
        regexes,
        stopwords: a.stopwords.iter().map(|s| s.to_lowercase()).collect(),
    })
}

/// The built-in rules, compiled once per process, on first use: they are the same for
/// every policy, so loading a policy does not wait for them, and a gateway that never
/// scans never holds them. Their examples are checked by the unit tests
/// ([`check_builtin_examples`](super::examples::check_builtin_examples)): they are part of
/// the binary. Indexed as [`BUILTIN_CONTENT_RULES`].
pub(super) fn builtin_set() -> Result<&'static [CRule], String> {
    static COMPILED: std::sync::OnceLock<Result<Vec<CRule>, String>> = std::sync::OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let index = HashMap::new();
            builtin_specs()
                .iter()
                .map(|s| compile_rule(s, &index, &BUILTIN_ERRS, None))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| format!("built-in content rules are broken: {e}"))
}

pub(super) const BUILTIN_ERRS: Errs<'static> = Errs {
    src: "",
    config_line: 0,
};

/// The regex of built-in rule `n`, compiling the built-in set if this is its first use
/// (concurrent callers wait for that one compilation).
pub(super) fn builtin_regex(n: usize) -> Result<&'static BytesRegex, String> {
    match builtin_set()?.get(n).and_then(|r| r.regex.as_ref()) {
        Some(Pattern::Own(re)) => Ok(re),
        _ => Err(format!("no compiled built-in content rule #{n}")),
    }
}

/// Compiles the built-in content rules now (else the first scan that needs them does).
#[cfg(test)]
pub(crate) fn warm_builtin() -> Result<(), String> {
    builtin_set().map(|_| ())
}

/// Compiles one rule; `builtin` (its index among the built-in rules) leaves its regex
/// to [`builtin_regex`].
pub(super) fn compile_rule(
    s: &Spec,
    index: &HashMap<String, usize>,
    errs: &Errs<'_>,
    builtin: Option<usize>,
) -> Result<CRule, PolicyError> {
    if s.id.is_empty() {
        return Err(s.bad(errs, ".id", "a content rule needs a non-empty id".into()));
    }
    if s.regex.is_none() && s.path.is_none() {
        return Err(s.bad(errs, "", "a content rule needs `regex` or `path`".into()));
    }
    let regex = s.compile_regex(errs, builtin)?;
    let path = match &s.path {
        Some(p) => Some(
            text_regex(p).map_err(|e| s.bad(errs, ".path", format!("invalid path regex: {e}")))?,
        ),
        None => None,
    };
    if let Some(e) = s.entropy
        && !(e.is_finite() && e >= 0.0)
    {
        let message = format!("entropy must be a number >= 0, not {e}");
        return Err(s.bad(errs, ".entropy", message));
    }
    Ok(CRule {
        id: format!("content:{}", s.id),
        regex,
        path,
        secret_group: s.secret_group,
        entropy: s.entropy,
        keywords: s.compile_keywords(errs)?,
        allowlists: s.compile_allowlists(errs)?,
        required: s.compile_required(index, errs)?,
        skip_report: s.skip_report,
    })
}

impl Spec {
    /// A problem with this rule, at `what` (a key suffix such as `.regex`).
    fn bad(&self, errs: &Errs<'_>, what: &str, m: String) -> PolicyError {
        errs.at(&self.at, what, format!("rule `{}`: {m}", self.id))
    }

    /// The rule's content regex: the built-in set's `builtin`th when it is a built-in
    /// rule, else its own, compiled; its `secretGroup` must name one of its groups.
    fn compile_regex(
        &self,
        errs: &Errs<'_>,
        builtin: Option<usize>,
    ) -> Result<Option<Pattern>, PolicyError> {
        let (src, line) = match (&self.regex, builtin) {
            (Some(_), Some(n)) => return Ok(Some(Pattern::Builtin(n))),
            (Some((src, line)), None) => (src, *line),
            (None, _) => return Ok(None),
        };
        let re = bytes_regex(src).map_err(|e| {
            let at = match &self.at {
                At::Inline { key, .. } => At::Inline {
                    key: key.clone(),
                    line,
                },
                other => other.clone(),
            };
            errs.at(
                &at,
                ".regex",
                format!("rule `{}`: invalid regex: {e}", self.id),
            )
        })?;
        if let Some(g) = self.secret_group
            && g >= re.captures_len()
        {
            return Err(self.bad(
                errs,
                ".secretGroup",
                format!(
                    "secretGroup {g} but the regex has {} capture group(s)",
                    re.captures_len() - 1
                ),
            ));
        }
        Ok(Some(Pattern::Own(re)))
    }

    /// The rule's keywords, lowercased, each once; an empty one is refused.
    fn compile_keywords(&self, errs: &Errs<'_>) -> Result<Vec<String>, PolicyError> {
        let mut keywords = Vec::new();
        for k in &self.keywords {
            let k = k.to_lowercase();
            if k.is_empty() {
                return Err(self.bad(
                    errs,
                    ".keywords",
                    "empty keyword (it would match everything)".into(),
                ));
            }
            if !keywords.contains(&k) {
                keywords.push(k);
            }
        }
        Ok(keywords)
    }

    /// The rule's own allowlists, compiled (`targetRules` belongs to global ones).
    fn compile_allowlists(&self, errs: &Errs<'_>) -> Result<Vec<Allow>, PolicyError> {
        let mut allowlists = Vec::new();
        for (a, at) in &self.allowlists {
            if !a.target_rules.is_empty() {
                return Err(errs.at(
                    at,
                    "",
                    format!(
                        "rule `{}`: targetRules belongs in a global [[allowlists]]",
                        self.id
                    ),
                ));
            }
            allowlists.push(compile_allow(a, at, errs)?);
        }
        Ok(allowlists)
    }

    /// The rules this one requires, by their place in `index`; each must exist.
    fn compile_required(
        &self,
        index: &HashMap<String, usize>,
        errs: &Errs<'_>,
    ) -> Result<Vec<Required>, PolicyError> {
        let mut required = Vec::new();
        for r in &self.required {
            let Some(&i) = index.get(&r.id) else {
                return Err(self.bad(
                    errs,
                    ".required",
                    format!("required rule `{}` does not exist", r.id),
                ));
            };
            required.push(Required {
                rule: i,
                within_lines: r.within_lines,
                within_columns: r.within_columns,
            });
        }
        Ok(required)
    }
}
