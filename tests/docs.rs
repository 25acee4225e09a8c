//! The documents stay short and true to the repository: README.md within its size
//! budget, every test SECURITY.md's table cites a compiled test, and every relative link
//! in the documents reaching a file (and a heading, when it names one).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

/// A newcomer reads README.md in ten minutes; the rest belongs in docs/.
const README_BUDGET_CHARS: usize = 8_000;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn readme_stays_under_its_size_budget() {
    let chars = read(&root().join("README.md")).chars().count();
    assert!(
        chars <= README_BUDGET_CHARS,
        "README.md has {chars} characters, over its budget of {README_BUDGET_CHARS}: \
         move the detail into a page under docs/ and link it from \"Where to read on\""
    );
}

/// The rows of SECURITY.md's guarantees table (every `|` line after the header).
fn guarantee_rows(security: &str) -> Vec<&str> {
    let table = security
        .split("## Guarantees by trust boundary")
        .nth(1)
        .expect("SECURITY.md has a \"Guarantees by trust boundary\" section");
    table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .collect()
}

/// True if `file` (a path under the repository) declares a `#[test]` function `name`.
fn declares_test(file: &str, name: &str) -> bool {
    let text = read(&root().join(file));
    let lines: Vec<&str> = text.lines().collect();
    let head = format!("fn {name}(");
    lines.iter().enumerate().any(|(i, l)| {
        l.trim_start().starts_with(&head)
            && lines[i.saturating_sub(4)..i]
                .iter()
                .any(|a| a.trim() == "#[test]")
    })
}

/// True if the module file `file` is compiled: its parent module declares it
/// (`tests/x.rs` in tests/all.rs, `dir/y.rs` in `dir.rs` or `dir/mod.rs`).
fn module_is_declared(file: &str) -> bool {
    let path = Path::new(file);
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("a file name");
    let dir = path.parent().expect("a directory");
    let parents: Vec<PathBuf> = match dir.to_str() {
        Some("tests") => vec![root().join("tests/all.rs")],
        // A crate's root module: `src/` of the fsgate crate or of a layer crate.
        Some(d) if d == "src" || d.ends_with("/src") => {
            vec![
                root().join(dir.join("lib.rs")),
                root().join(dir.join("main.rs")),
            ]
        }
        _ => vec![
            root().join(dir.with_extension("rs")),
            root().join(dir.join("mod.rs")),
        ],
    };
    let decl = Regex::new(&format!(r"(?m)^\s*(pub(\([a-z]+\))? )?mod {stem};")).expect("regex");
    parents
        .iter()
        .filter(|p| p.is_file())
        .any(|p| decl.is_match(&read(p)))
}

/// What is wrong with one cited test, `[`NAME`](FILE.rs)`, if anything.
fn cited_test_problem(name: &Regex, text: &str, file: &str) -> Option<String> {
    let Some(fn_name) = name.captures(text).and_then(|c| c.get(1)) else {
        return Some(format!(
            "{file}: cite a test as [`fn_name`]({file}), not [{text}]"
        ));
    };
    let fn_name = fn_name.as_str();
    if !root().join(file).is_file() {
        Some(format!("{file}: no such file (cited for {fn_name})"))
    } else if !declares_test(file, fn_name) {
        Some(format!("{file}: no #[test] fn {fn_name}"))
    } else if !module_is_declared(file) {
        Some(format!("{file}: not declared by its parent module"))
    } else {
        None
    }
}

#[test]
fn every_test_securitys_table_cites_exists() {
    let security = read(&root().join("SECURITY.md"));
    let link = Regex::new(r"\[([^\]]*)\]\(([^)]*\.rs)\)").expect("regex");
    let name = Regex::new(r"^`([a-z_][a-z0-9_]*)`$").expect("regex");
    let rows = guarantee_rows(&security);
    assert!(rows.len() >= 20, "the table has its rows: {}", rows.len());
    let mut wrong = Vec::new();
    for row in &rows {
        let cited: Vec<(&str, &str)> = link
            .captures_iter(row)
            .filter_map(|c| Some((c.get(1)?.as_str(), c.get(2)?.as_str())))
            .collect();
        if cited.is_empty() {
            wrong.push(format!("a guarantee without its test: {row}"));
        }
        for (text, file) in cited {
            wrong.extend(cited_test_problem(&name, text, file));
        }
    }
    assert!(wrong.is_empty(), "SECURITY.md:\n{}", wrong.join("\n"));
}

/// The documents a reader follows links through.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![
        root().join("README.md"),
        root().join("SECURITY.md"),
        root().join("policies/README.md"),
        root().join("audit/FORMAT.md"),
    ];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for p in std::fs::read_dir(&dir)
            .expect("docs dir")
            .filter_map(|e| e.ok())
            .map(|e| e.path())
        {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                docs.push(p);
            }
        }
    }
    docs
}

/// A document's text outside its code blocks, line by line with line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_block = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
        } else if !in_block {
            out.push((n + 1, line));
        }
    }
    out
}

/// The anchors a heading gets on the forge: lower case, punctuation dropped, blanks `-`.
fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .into_iter()
        .filter(|(_, l)| l.starts_with('#'))
        .map(|(_, l)| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect()
}

#[test]
fn every_relative_link_in_the_documents_reaches_its_target() {
    let link = Regex::new(r"\]\(([^)\s]+)\)").expect("regex");
    let mut broken = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        let dir = doc.parent().expect("a directory");
        for (n, line) in prose_lines(&text) {
            for target in link.captures_iter(line).filter_map(|c| c.get(1)) {
                let target = target.as_str();
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    dir.join(file)
                };
                let at = format!("{}:{n}: {target}", doc.display());
                if !path.exists() {
                    broken.push(format!("{at}: no such file"));
                } else if !anchor.is_empty()
                    && path.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&path)).contains(anchor)
                {
                    broken.push(format!("{at}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
