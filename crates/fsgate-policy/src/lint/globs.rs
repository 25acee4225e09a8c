//! Glob text helpers for the checks: how a glob is read (leading `./` and `/`, a trailing
//! `/`), brace alternatives, concrete sample paths and a literal file extension.
//!
//! These only generate candidates and describe the text; whether a rule matches a path
//! is always asked of the real decision function.

/// Alternatives expanded from one glob, at most this many.
const MAX_ALTERNATIVES: usize = 16;

/// Ways a glob is written that the compiler normalises away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `./x`: relative to the workspace root anyway.
    Dot,
    /// `/x`: the workspace root, not the filesystem's.
    Leading,
    /// `x/`: the directory itself and everything beneath it.
    Trailing,
}

/// The glob as the compiler reads it (leading `./` and `/`, repeated `/`, interior `./`
/// components and a trailing `/` removed) and the forms that were removed.
pub(crate) fn normal_form(text: &str) -> (String, Vec<Form>) {
    let mut forms = Vec::new();
    let mut rest = text;
    loop {
        if let Some(r) = rest.strip_prefix("./") {
            push_once(&mut forms, Form::Dot);
            rest = r;
        } else if let Some(r) = rest.strip_prefix('/') {
            push_once(&mut forms, Form::Leading);
            rest = r;
        } else {
            break;
        }
    }
    if rest.ends_with('/') && !rest.ends_with("\\/") {
        push_once(&mut forms, Form::Trailing);
    }
    let comps: Vec<&str> = rest.split('/').collect();
    let last = comps.len().saturating_sub(1);
    let kept: Vec<&str> = comps
        .iter()
        .enumerate()
        .filter(|(i, c)| !c.is_empty() && (**c != "." || *i >= last))
        .map(|(_, c)| *c)
        .collect();
    (kept.join("/"), forms)
}

fn push_once(forms: &mut Vec<Form>, f: Form) {
    if !forms.contains(&f) {
        forms.push(f);
    }
}

/// Every `{a,b}` alternative spelled out (nested braces too), at most
/// [`MAX_ALTERNATIVES`]; a brace that does not close is left as written.
pub(crate) fn expand_braces(glob: &str) -> Vec<String> {
    let Some((open, close)) = first_brace(glob) else {
        return vec![glob.to_string()];
    };
    let (head, body, tail) = (&glob[..open], &glob[open + 1..close], &glob[close + 1..]);
    let mut out = Vec::new();
    for alt in split_top(body) {
        for e in expand_braces(&format!("{head}{alt}{tail}")) {
            if out.len() >= MAX_ALTERNATIVES {
                return out;
            }
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    out
}

/// Every `{a,b}` alternative spelled out (nested braces too), in order and without
/// repeats; None if there would be more than `max`. A brace that does not close is
/// left as written.
pub(crate) fn expand_all(glob: &str, max: usize) -> Option<Vec<String>> {
    let Some((open, close)) = first_brace(glob) else {
        return Some(vec![glob.to_string()]);
    };
    let (head, body, tail) = (&glob[..open], &glob[open + 1..close], &glob[close + 1..]);
    let mut out: Vec<String> = Vec::new();
    for alt in split_top(body) {
        for e in expand_all(&format!("{head}{alt}{tail}"), max)? {
            if !out.contains(&e) {
                out.push(e);
            }
            if out.len() > max {
                return None;
            }
        }
    }
    Some(out)
}

/// Byte offsets of the first unescaped `{` and its matching `}`.
fn first_brace(glob: &str) -> Option<(usize, usize)> {
    let mut open = None;
    let mut depth = 0usize;
    let mut escaped = false;
    for (i, c) in glob.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return open.map(|o| (o, i));
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits a brace body at its top-level commas.
fn split_top(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut escaped) = (0usize, 0usize, false);
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&body[start..]);
    out
}

/// A concrete path a brace-free glob matches: `*` and `**` replaced by `filler`, `?` by
/// `x`, a class by its first member, escapes resolved.
pub(crate) fn fill(glob: &str, filler: &str) -> String {
    let mut out = String::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
                out.push_str(filler);
            }
            '?' => out.push('x'),
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '[' => {
                let mut class = String::new();
                for n in chars.by_ref() {
                    if n == ']' && !class.is_empty() {
                        break;
                    }
                    class.push(n);
                }
                out.push(match class.chars().next() {
                    Some('!' | '^') | None => 'x',
                    Some(first) => first,
                });
            }
            c => out.push(c),
        }
    }
    out
}

/// True if the text has no glob metacharacter.
pub(crate) fn is_literal(s: &str) -> bool {
    !s.contains(['*', '?', '[', '{', '\\'])
}

/// The extensions a glob's last component names literally after a wildcard (`*.md`,
/// `report-?.{json,csv}`), lowercased; None if the last component has no wildcard
/// before a literal extension.
pub(crate) fn wildcard_extensions(glob: &str) -> Option<Vec<String>> {
    let last = glob.rsplit('/').next().unwrap_or(glob);
    if last == "**" {
        return None;
    }
    let (stem, ext) = match last.strip_suffix('}') {
        Some(inner) => {
            let (stem, alts) = inner.rsplit_once(".{")?;
            (stem, alts.split(',').collect::<Vec<_>>())
        }
        None => {
            let (stem, ext) = last.rsplit_once('.')?;
            (stem, vec![ext])
        }
    };
    let wild = stem.contains(['*', '?', '[']);
    let literal = ext.iter().all(|e| !e.is_empty() && is_literal(e));
    (wild && literal).then(|| ext.iter().map(|e| e.to_ascii_lowercase()).collect())
}

/// Representative paths a glob matches: each alternative made concrete with two
/// different names, a file beneath it (with each of `exts`, or `.txt`), the glob with an
/// extension appended, and for `**/x` also `x` at the top.
pub(crate) fn glob_samples(glob: &str, exts: Option<&[String]>) -> Vec<String> {
    let (normal, _) = normal_form(glob);
    let default = ["txt".to_string()];
    let exts = exts.filter(|e| !e.is_empty()).unwrap_or(&default);
    let mut alts = expand_braces(&normal);
    let tops: Vec<String> = alts
        .iter()
        .filter_map(|a| a.strip_prefix("**/").map(str::to_string))
        .collect();
    alts.extend(tops);
    let mut out: Vec<String> = Vec::new();
    for alt in &alts {
        for filler in ["x", "sample"] {
            let base = fill(alt, filler);
            let mut cands = vec![base.clone()];
            for e in exts.iter().take(4) {
                cands.push(format!("{base}/x.{e}"));
                if !base.rsplit('/').next().unwrap_or("").contains('.') {
                    cands.push(format!("{base}.{e}"));
                }
            }
            for c in cands {
                if !c.is_empty() && !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_forms() {
        assert_eq!(
            normal_form("./secrets"),
            ("secrets".into(), vec![Form::Dot])
        );
        assert_eq!(
            normal_form("/a//b/./c/"),
            ("a/b/c".into(), vec![Form::Leading, Form::Trailing])
        );
        assert_eq!(normal_form("a/."), ("a/.".into(), vec![]));
        assert_eq!(normal_form("src/**"), ("src/**".into(), vec![]));
    }

    #[test]
    fn braces_and_fill() {
        assert_eq!(expand_braces("{a,b{c,d}}/x"), vec!["a/x", "bc/x", "bd/x"]);
        assert_eq!(expand_braces("a\\{b,c}"), vec!["a\\{b,c}"]);
        assert_eq!(fill("src/**/*.rs", "x"), "src/x/x.rs");
        assert_eq!(fill("docs/[abc]?.md", "s"), "docs/ax.md");
        assert_eq!(fill("a\\*b", "x"), "a*b");
    }

    #[test]
    fn extensions_after_a_wildcard() {
        assert_eq!(wildcard_extensions("docs/*.md"), Some(vec!["md".into()]));
        assert_eq!(
            wildcard_extensions("r/x-?.{JSON,csv}"),
            Some(vec!["json".into(), "csv".into()])
        );
        assert_eq!(wildcard_extensions("conf.d"), None);
        assert_eq!(wildcard_extensions("docs/*.*"), None);
        assert_eq!(wildcard_extensions("docs/**"), None);
    }

    #[test]
    fn samples_cover_the_top_for_double_star() {
        let s = glob_samples("**/*.md", None);
        assert!(s.contains(&"x.md".to_string()), "{s:?}");
        assert!(s.contains(&"x/x.md".to_string()), "{s:?}");
        let s = glob_samples("{secrets,public}/**", Some(&["db".into()]));
        assert!(s.contains(&"public/x/x.db".to_string()), "{s:?}");
    }
}
