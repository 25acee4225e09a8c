//! A rule's globs: normalised (D1), brace alternatives spelled out, compiled (deny and ask
//! rules folding case), with their literal bases and the directories they cover whole.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::PolicyError;
use crate::position::at;
use crate::raw::RawRule;
use fsgate_base::path::RelPath;
use fsgate_decide::Effect;

/// How a rule's mistake is reported: its key, line and message as a [`PolicyError`].
pub(super) type Invalid<'a> = dyn Fn(&str, usize, String) -> PolicyError + 'a;

/// A rule's compiled globs (None: any path), their literal bases, the globs as written,
/// and the directories whose whole contents the globs match.
type CompiledPaths = (Option<GlobSet>, Vec<RelPath>, Vec<String>, Vec<RelPath>);

/// A rule's globs, normalised (D1) and compiled, each also covering what lies beneath
/// what it matches. Deny and ask rules match case-insensitively, allow rules exactly: a
/// case variant never slips past a deny or an ask, and an allow never grows by folding
/// case.
pub(super) fn compile_paths(
    r: &RawRule,
    src: &str,
    invalid: &Invalid<'_>,
) -> Result<CompiledPaths, PolicyError> {
    let fold = r.effect != Effect::Allow;
    let mut set = GlobSetBuilder::new();
    let mut bases = Vec::new();
    let mut globs = Vec::new();
    let mut whole = Vec::new();
    for g in &r.paths {
        let text = normalise_glob(g.get_ref());
        let alternatives =
            glob_alternatives(g.get_ref()).map_err(|m| invalid("paths", at(src, g), m))?;
        for alt in alternatives {
            if alt.split('/').any(|c| c == "..") {
                return Err(invalid(
                    "paths",
                    at(src, g),
                    format!(
                        "glob `{text}` contains `..`: globs are relative to the workspace root"
                    ),
                ));
            }
            let glob = build_glob_case(&alt, fold)
                .map_err(|e| invalid("paths", at(src, g), format!("invalid glob: {}", e.kind())))?;
            set.add(glob);
            whole.extend(whole_dir(&alt));
            // A glob also covers everything beneath what it matches (`src` covers `src/a`).
            if !alt.ends_with("/**")
                && alt != "**"
                && let Ok(glob) = build_glob_case(&format!("{alt}/**"), fold)
            {
                set.add(glob);
            }
        }
        bases.push(RelPath::parse_rooted(&format!("/{}", literal_base(&text))).unwrap_or_default());
        globs.push(g.get_ref().clone());
    }
    let paths = set
        .build()
        .map_err(|e| invalid("paths", at(src, &r.id), format!("invalid glob set: {e}")))?;
    Ok(((!r.paths.is_empty()).then_some(paths), bases, globs, whole))
}

/// The directory everything beneath which a normalised glob (one alternative) matches,
/// if it is `**`, a literal path `L` (which also covers `L/**`) or `L/**`: what lets a
/// listing decide a directory's entries without matching each path. Anything with
/// another wildcard or escape is left to the glob set.
fn whole_dir(alt: &str) -> Option<RelPath> {
    if alt == "**" {
        return Some(RelPath::root());
    }
    let lit = alt.strip_suffix("/**").unwrap_or(alt);
    if lit.is_empty() || lit.contains(['*', '?', '[', ']', '{', '}', '\\', ',', '!']) {
        return None;
    }
    RelPath::parse_rooted(&format!("/{lit}")).ok()
}

/// D1: `./secrets`, `/secrets`, `secrets/`, `secrets//` and `secrets` are one glob. A
/// leading `/` or `./`, repeated `/`, interior `.` components and a trailing `/` go;
/// what is left of nothing (`/`, `.`) is the whole workspace.
pub(crate) fn normalise_glob(text: &str) -> String {
    let kept: Vec<&str> = text
        .trim()
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if kept.is_empty() {
        "**".to_string()
    } else {
        kept.join("/")
    }
}

/// At most this many `{a,b}` alternatives are spelled out of one glob to normalise each.
const MAX_GLOB_ALTERNATIVES: usize = 256;

/// The globs a written glob compiles to, each normalised (D1). A brace alternative is
/// normalised on its own (`{./a,b/}` is `{a,b}`), else `./a` inside braces would match
/// no path; a glob whose alternatives need nothing of the kind compiles as written.
fn glob_alternatives(written: &str) -> Result<Vec<String>, String> {
    let text = normalise_glob(written);
    if !text.contains('{') {
        return Ok(vec![text]);
    }
    let Some(alts) = crate::lint::globs::expand_all(&text, MAX_GLOB_ALTERNATIVES) else {
        return Err(format!(
            "glob `{written}` spells out more than {MAX_GLOB_ALTERNATIVES} brace alternatives"
        ));
    };
    if alts.iter().any(|a| a.split('/').any(|c| c == "..")) {
        return Err(format!(
            "glob `{text}` contains `..`: globs are relative to the workspace root"
        ));
    }
    if alts.iter().all(|a| normalise_glob(a) == *a) {
        return Ok(vec![text]);
    }
    // `src/{,x}` would read as `src/` (all of `src`), wider than globs matched before:
    // an empty alternative that normalising would widen is refused, not guessed at.
    if text.contains("{,") || text.contains(",}") || text.contains(",,") {
        return Err(format!(
            "glob `{written}` has an empty brace alternative next to a `/`: write the alternatives out"
        ));
    }
    let mut out = Vec::with_capacity(alts.len());
    for a in alts {
        let kept: Vec<&str> = a
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if kept.is_empty() {
            // Only `/` or `.` on its own means the whole workspace; never by accident.
            return Err(format!(
                "a brace alternative of glob `{written}` leaves nothing (`{a}`): write `**` for the whole workspace"
            ));
        }
        let n = kept.join("/");
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Compiles one policy glob: `*` stays within a component, a backslash escapes.
pub(crate) fn build_glob(text: &str) -> Result<globset::Glob, globset::Error> {
    build_glob_case(text, false)
}

/// [`build_glob`], matching case-insensitively when `fold`. A glob is matched in its
/// composed (NFC) spelling, as the decision also looks at a path's (see fsgate-decide);
/// folded, also lowercase (globset folds ASCII only; the decision also looks at a
/// non-ASCII path lowercase, for deny and ask rules).
fn build_glob_case(text: &str, fold: bool) -> Result<globset::Glob, globset::Error> {
    use unicode_normalization::UnicodeNormalization;
    let composed: String = text.nfc().collect();
    let composed = match fold && !composed.is_ascii() {
        true => composed.to_lowercase(),
        false => composed,
    };
    GlobBuilder::new(&composed)
        .literal_separator(true)
        .backslash_escape(true)
        .case_insensitive(fold)
        .build()
}

/// The directory part of a glob before its first wildcard: `src/**/*.rs` -> `src`.
fn literal_base(glob: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for comp in glob.split('/') {
        if comp.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        out.push(comp);
    }
    out.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases() {
        assert_eq!(literal_base("src/**/*.rs"), "src");
        assert_eq!(literal_base("**"), "");
        assert_eq!(literal_base("docs/api/index.md"), "docs/api/index.md");
    }

    use crate::{EntryKind, OpClass, Policy};

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    /// Everything readable and listable, except what `deny` names.
    fn with_deny(deny: &str) -> Policy {
        let text = format!(
            "version = 1\n[secrets]\nbuiltin = false\n\
[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n\
[[rule]]\nid = \"no\"\neffect = \"deny\"\nops = [\"*\"]\npaths = [{deny:?}]\n"
        );
        Policy::from_toml(&text, "t").unwrap()
    }

    #[test]
    fn globs_are_normalised() {
        assert_eq!(normalise_glob("./secrets"), "secrets");
        assert_eq!(normalise_glob("/secrets"), "secrets");
        assert_eq!(normalise_glob("secrets/"), "secrets");
        assert_eq!(normalise_glob("a//b"), "a/b");
        assert_eq!(normalise_glob("././a/./b//"), "a/b");
        assert_eq!(normalise_glob("/"), "**");
        assert_eq!(normalise_glob("src/*.rs"), "src/*.rs");
    }

    #[test]
    fn every_spelling_of_a_directory_denies_it_and_its_contents() {
        for form in [
            "./secrets",
            "secrets/",
            "/secrets",
            "secrets",
            ".//secrets//",
        ] {
            let pol = with_deny(form);
            let d = pol.decide(OpClass::Read, &rel("secrets/db.yaml"), EntryKind::File);
            assert_eq!(d.rule, "no", "{form}: read secrets/db.yaml");
            let d = pol.decide(OpClass::List, &rel("secrets"), EntryKind::Dir);
            assert_eq!(d.rule, "no", "{form}: list secrets");
            let d = pol.decide(OpClass::Read, &rel("secretsx/a"), EntryKind::File);
            assert_eq!(d.rule, "all", "{form}: a sibling with a longer name");
        }
        let pol = with_deny("a//b");
        assert_eq!(
            pol.decide(OpClass::Write, &rel("a/b/c"), EntryKind::File)
                .rule,
            "no"
        );
        // The trace shows the glob as written.
        assert_eq!(pol.rules()[1].globs, vec!["a//b".to_string()]);
    }

    #[test]
    fn brace_alternatives_are_normalised_one_by_one() {
        let pol = with_deny("{./a,/b,c/,d//e}");
        for p in ["a", "a/f", "b", "c", "c/f", "d/e/f"] {
            let d = pol.decide(OpClass::Read, &rel(p), EntryKind::File);
            assert_eq!(d.rule, "no", "{p}");
        }
        let d = pol.decide(OpClass::Read, &rel("d/x"), EntryKind::File);
        assert_eq!(d.rule, "all");
        // An alternative left empty is not the whole workspace by accident.
        let text = "version = 1\n[[rule]]\nid = \"r\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"{/,src}\"]\n";
        assert!(Policy::from_toml(text, "t").is_err());
        let empty = text.replace("{/,src}", "src/{,x}");
        assert!(Policy::from_toml(&empty, "t").is_err(), "empty alternative");
        let text = text.replace("{/,src}", "{x,../y}");
        assert!(Policy::from_toml(&text, "t").is_err(), "`..` inside braces");
    }

    #[test]
    fn denies_fold_case_and_allows_do_not() {
        let text = "version = 1\n\
[[rule]]\nid = \"src\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"src/**\", \"infra/**\"]\n\
[[rule]]\nid = \"no-prod\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"infra/prod/**\"]\n";
        let pol = Policy::from_toml(text, "t").unwrap();
        for p in [
            "infra/PROD/main.tf",
            "INFRA/prod/main.tf",
            "infra/prod/main.tf",
        ] {
            let d = pol.decide(OpClass::Write, &rel(p), EntryKind::File);
            assert_eq!(d.rule, "no-prod", "{p}");
        }
        let d = pol.decide(OpClass::Write, &rel("infra/dev/main.tf"), EntryKind::File);
        assert_eq!(d.rule, "src");
        let d = pol.decide(OpClass::Read, &rel("SRC/x"), EntryKind::File);
        assert_eq!(d.rule, crate::DEFAULT_DENY, "an allow does not fold case");
        assert!(
            pol.decide(OpClass::Read, &rel("src/x"), EntryKind::File)
                .allowed()
        );
    }
}
