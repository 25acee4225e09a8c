//! Tests of secret content rules: gitleaks semantics, loading, examples, and no findings
//! on ordinary source code.

use std::path::Path;

use super::ContentScanner;
use crate::{OpClass, Policy};
use fsgate_base::path::RelPath;

fn p(s: &str) -> RelPath {
    RelPath::parse_rooted(s).unwrap()
}

fn policy(content: &str) -> Policy {
    let text = format!("version = 1\n{content}");
    Policy::from_toml(&text, "t.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(content: &str) -> String {
    let text = format!("version = 1\n{content}");
    match Policy::from_toml(&text, "t.toml") {
        Ok(_) => panic!("should not load:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn hits(pol: &Policy, path: &str, text: &str) -> Vec<(String, usize)> {
    pol.content_scanner()
        .expect("scanner")
        .scan_all(&p(path), text.as_bytes())
        .into_iter()
        .map(|h| (h.rule_id, h.line))
        .collect()
}

// A key assembled at run time, so this file holds no complete token.
fn aws_key() -> String {
    ["AKIA", "UJZDEGXDNCF32EPF"].concat()
}

fn pem() -> String {
    let body = "g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD";
    format!(
        "-----BEGIN RSA PRIVATE {}-----\n{body}\n{body}\n-----END RSA PRIVATE KEY-----\n",
        "KEY"
    )
}

#[test]
fn no_content_section_no_scanner() {
    assert!(policy("").content_scanner().is_none());
}

#[test]
fn builtin_rules_find_keys_with_line_numbers() {
    let pol = policy("[content]\n");
    let sc = pol.content_scanner().unwrap();
    assert!(sc.applies_to(OpClass::Read) && sc.applies_to(OpClass::Write));
    assert!(!sc.applies_to(OpClass::List));
    let text = format!("notes\n\nmy key:\n{}", pem());
    assert_eq!(
        hits(&pol, "notes.txt", &text),
        vec![("content:private-key".into(), 4)]
    );
    let text = format!("[default]\naws_access_key_id = {}\n", aws_key());
    let hit = sc.scan(&p("cfg.ini"), text.as_bytes()).unwrap();
    assert_eq!(
        (hit.rule_id.as_str(), hit.line, hit.column),
        ("content:aws-access-key-id", 2, 21)
    );
    // The documented example key is allowlisted.
    assert!(hits(&pol, "README.md", "key AKIAIOSFODNN7EXAMPLE here").is_empty());
}

/// The built-in rules compile on first use (not with the policy); they must still
/// compile and detect (or not) every example they carry (checked here, not at run time:
/// they are part of the binary).
#[test]
fn builtin_rules_compile_and_pass_their_examples() {
    assert_eq!(super::rule::warm_builtin(), Ok(()));
    assert_eq!(super::examples::check_builtin_examples(), Ok(()));
    let default = Policy::builtin_default().unwrap();
    assert!(default.content_scanner().unwrap().uses_builtin());
    let own = policy(
        "[content]\nbuiltin = false\n[[content.rules]]\nid = \"t\"\nregex = '''tok_[0-9]{6}'''\n",
    );
    assert!(!own.content_scanner().unwrap().uses_builtin());
}

/// Whether each allowlist of the built-in rules' has its regexes compiled.
fn builtin_allowlists_compiled(pol: &Policy) -> Vec<bool> {
    let sc = pol.content_scanner().expect("scanner");
    sc.rules
        .iter()
        .filter(|r| matches!(r.regex, Some(super::Pattern::Builtin(_))))
        .flat_map(|r| &r.allowlists)
        .filter(|a| !a.regexes.is_empty())
        .map(|a| a.regexes.is_compiled())
        .collect()
}

/// Loading a policy leaves the built-in rules' allowlists uncompiled (start-up does not
/// pay for them); the first scan compiles them, and they allow what they allowed;
/// `policy check` compiles them at once, and copies of a policy share them.
#[test]
fn builtin_allowlists_compile_on_first_use() {
    let pol = Policy::builtin_default().unwrap();
    assert_eq!(builtin_allowlists_compiled(&pol), vec![false]);
    let copy = pol.clone();
    let allowed = format!(
        "aws_access_key_id = {}",
        ["AKIA", "IOSFODNN7EXAMPLE"].concat()
    );
    assert!(
        hits(&pol, "/a.txt", &allowed).is_empty(),
        "the placeholder is allowed"
    );
    assert_eq!(builtin_allowlists_compiled(&pol), vec![true]);
    assert_eq!(builtin_allowlists_compiled(&copy), vec![true], "shared");
    let found = hits(&pol, "/a.txt", &format!("key = {}", aws_key()));
    assert_eq!(found, vec![("content:aws-access-key-id".to_string(), 1)]);

    let checked = Policy::builtin_default().unwrap();
    checked.compile_deferred().unwrap();
    assert_eq!(builtin_allowlists_compiled(&checked), vec![true]);
    // A policy's own allowlist regexes are compiled when it loads.
    let own = policy("[content]\n[[content.allowlists]]\nregexes = ['x']\n");
    let sc = own.content_scanner().unwrap();
    assert!(sc.global.iter().all(|a| a.regexes.is_compiled()));
}

/// A deferred allowlist regex that cannot be compiled allows nothing (the finding
/// stands), and says why.
#[test]
fn a_broken_deferred_allowlist_allows_nothing() {
    let broken = super::allow::AllowRegexes::deferred(vec!["(".into()]);
    assert!(!broken.any_match(b"anything"));
    let e = broken.get().unwrap_err();
    assert!(e.starts_with("invalid allowlist regex \"(\""), "{e}");
    let fine = super::allow::AllowRegexes::deferred(vec!["EXAMPLE$".into()]);
    assert!(fine.any_match(b"AKIAEXAMPLE") && !fine.any_match(b"AKIAX"));
}

#[test]
fn ops_and_disabled_rules() {
    let pol = policy("[content]\nops = [\"write\"]\ndisabled_rules = [\"private-key\"]\n");
    let sc = pol.content_scanner().unwrap();
    assert!(!sc.applies_to(OpClass::Read) && sc.applies_to(OpClass::Write));
    assert!(hits(&pol, "a", &pem()).is_empty());
    assert!(!sc.rule_ids().any(|r| r == "content:private-key"));
    assert!(
        err("[content]\ndisabled_rules = [\"no-such\"]\n")
            .contains("no content rule has the id `no-such`")
    );
    assert!(err("[content]\nops = [\"list\"]\n").contains("content.ops"));
}

const INLINE: &str = r#"
[content]
builtin = false

[[content.rules]]
id = "acme-token"
description = "ACME API token"
regex = '''acme_(?:live|test)_([a-z0-9]{16})'''
keywords = ["acme_"]
entropy = 2.5
tps = ["token = acme_live_q8w7e6r5t4y3u2i1"]
fps = ["acme_live_aaaaaaaaaaaaaaaa"]

  [[content.rules.allowlists]]
  description = "test keys in fixtures"
  condition = "AND"
  paths = ['''^fixtures/''']
  regexTarget = "match"
  regexes = ['''acme_test_''']
"#;

#[test]
fn inline_rule_entropy_secret_group_and_and_allowlist() {
    let pol = policy(INLINE);
    let live = "x = acme_live_q8w7e6r5t4y3u2i1";
    let test = "x = acme_test_q8w7e6r5t4y3u2i1";
    assert_eq!(
        hits(&pol, "src/a.py", live),
        vec![("content:acme-token".into(), 1)]
    );
    // AND: a test key is allowed only under fixtures/; a live key never.
    assert!(hits(&pol, "fixtures/a.py", test).is_empty());
    assert_eq!(hits(&pol, "src/a.py", test).len(), 1);
    assert_eq!(hits(&pol, "fixtures/a.py", live).len(), 1);
    // Entropy is measured on the secret group: 16 x `a` is 0 bits.
    assert!(hits(&pol, "a", "acme_live_aaaaaaaaaaaaaaaa").is_empty());
    // No keyword, no regex run: uppercase-only variant still passes the ASCII
    // case-insensitive prefilter but not the case-sensitive regex.
    assert!(hits(&pol, "a", "ACME_LIVE_Q8W7E6R5T4Y3U2I1").is_empty());
}

#[test]
fn or_allowlist_with_stopwords_and_paths() {
    let pol = policy(
        r#"
[content]
builtin = false
[[content.rules]]
id = "pw"
regex = '''password=(\S{8,})'''
keywords = ["password="]
[[content.rules.allowlists]]
paths = ['''\.md$''']
stopwords = ["changeme"]
"#,
    );
    assert_eq!(hits(&pol, "a.env.txt", "password=s3cr3tpass").len(), 1);
    assert!(hits(&pol, "doc.md", "password=s3cr3tpass").is_empty());
    assert!(hits(&pol, "a.txt", "password=CHANGEME-now").is_empty());
}

#[test]
fn global_allowlists_and_target_rules() {
    let base = r#"
[content]
builtin = false
[[content.rules]]
id = "a"
regex = '''tok_[0-9]{6}'''
[[content.rules]]
id = "b"
regex = '''key_[0-9]{6}'''
"#;
    let pol = policy(&format!(
        "{base}[[content.allowlists]]\nregexes = ['''123456''']\ntargetRules = [\"a\"]\n"
    ));
    assert!(hits(&pol, "x", "tok_123456").is_empty());
    assert_eq!(hits(&pol, "x", "key_123456").len(), 1);
    let pol = policy(&format!(
        "{base}[[content.allowlists]]\nregexes = ['''123456''']\n"
    ));
    assert!(hits(&pol, "x", "tok_123456 key_123456").is_empty());
    assert!(
        err(&format!(
            "{base}[[content.allowlists]]\nregexes = ['''x''']\ntargetRules = [\"zz\"]\n"
        ))
        .contains("target rule `zz` does not exist")
    );
}

#[test]
fn path_rules_and_path_only_rules() {
    let pol = policy(
        r#"
[content]
builtin = false
[[content.rules]]
id = "tf-state"
path = '''\.tfstate$'''
tps = ["infra/prod.tfstate"]
fps = ["infra/main.tf"]
[[content.rules]]
id = "py-key"
path = '''\.py$'''
regex = '''KEY = "[0-9a-f]{8}"'''
"#,
    );
    assert_eq!(
        hits(&pol, "infra/prod.tfstate", "{}"),
        vec![("content:tf-state".into(), 0)]
    );
    assert_eq!(hits(&pol, "a.py", "KEY = \"deadbeef\"").len(), 1);
    assert!(hits(&pol, "a.txt", "KEY = \"deadbeef\"").is_empty());
}

#[test]
fn required_rules_within_lines() {
    let pol = policy(
        r#"
[content]
builtin = false
[[content.rules]]
id = "client-id"
regex = '''client_id=[0-9]{4}'''
skipReport = true
[[content.rules]]
id = "client-secret"
regex = '''client_secret=[a-z]{6}'''
  [[content.rules.required]]
  id = "client-id"
  withinLines = 1
"#,
    );
    assert_eq!(
        hits(&pol, "x", "client_id=1234\nclient_secret=abcdef").len(),
        1
    );
    assert!(hits(&pol, "x", "client_id=1234\n\n\nclient_secret=abcdef").is_empty());
    assert!(
        hits(&pol, "x", "client_id=1234").is_empty(),
        "skipReport rules never report"
    );
}

#[test]
fn examples_are_checked_at_load() {
    let bad_tp = "[content]\nbuiltin = false\n[[content.rules]]\nid = \"r\"\nregex = 'abc[0-9]'\ntps = [\"abc\"]\n";
    let e = err(bad_tp);
    assert!(
        e.contains("content.rules[0].tps[0] (line 5)") && e.contains("does not detect"),
        "{e}"
    );
    let bad_fp = "[content]\nbuiltin = false\n[[content.rules]]\nid = \"r\"\nregex = 'abc[0-9]'\nfps = [\"abc1\"]\n";
    assert!(err(bad_fp).contains("detects its false-positive example"));
    // A true positive the keyword prefilter would skip is a broken rule too.
    let kw = "[content]\nbuiltin = false\n[[content.rules]]\nid = \"r\"\nregex = 'abc[0-9]'\nkeywords = [\"zzz\"]\ntps = [\"abc1\"]\n";
    assert!(err(kw).contains("does not detect"));
}

#[test]
fn invalid_rules_are_located() {
    let e = err("[content]\n[[content.rules]]\nid = \"r\"\nregex = '(unclosed'\n");
    assert!(
        e.contains("content.rules[0].regex (line 5)") && e.contains("invalid regex"),
        "{e}"
    );
    let e = err("[content]\n[[content.rules]]\nid = \"r\"\nregex = 'a(b)'\nsecretGroup = 2\n");
    assert!(e.contains("secretGroup 2"), "{e}");
    let e = err("[content]\n[[content.rules]]\nid = \"r\"\n");
    assert!(e.contains("needs `regex` or `path`"), "{e}");
    let e = err(
        "[content]\n[[content.rules]]\nid = \"r\"\nregex = 'a'\n[[content.rules.allowlists]]\ncondition = \"XOR\"\nregexes = ['b']\n",
    );
    assert!(e.contains("unknown allowlist condition"), "{e}");
    let e = err("[content]\n[[content.rules]]\nid = \"r\"\nregex = 'a'\nbogus = 1\n");
    assert!(e.contains("unknown field `bogus`"), "{e}");
    let e = err(
        "[content]\nbuiltin = false\n[[content.rules]]\nid = \"r\"\nregex = 'a'\n[[content.rules]]\nid = \"r\"\nregex = 'b'\n",
    );
    assert!(e.contains("duplicate content rule id `r`"), "{e}");
}

/// A policy's own allowlist regexes, inline or in a gitleaks config, are compiled when
/// it loads: a broken one is refused then, not deferred like the built-in rules' ones.
#[test]
fn a_broken_allowlist_regex_of_the_policys_own_is_refused_at_load() {
    let e = err("[content]\n[[content.allowlists]]\nregexes = ['(']\n");
    assert!(e.contains("invalid allowlist regex"), "{e}");
    let e = err(
        "[content]\n[[content.rules]]\nid = \"r\"\nregex = 'a'\n[[content.rules.allowlists]]\nregexes = ['(']\n",
    );
    assert!(e.contains("invalid allowlist regex"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("gitleaks.toml");
    std::fs::write(&cfg, "[[allowlists]]\nregexes = ['(']\n").unwrap();
    let text = format!(
        "version = 1\n[content]\ngitleaks_config = {:?}\n",
        cfg.display().to_string()
    );
    let e = Policy::from_toml(&text, "t.toml")
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("invalid allowlist regex") && e.contains("gitleaks.toml"),
        "{e}"
    );
}

#[test]
fn inline_rule_replaces_builtin_of_same_id() {
    let pol =
        policy("[content]\n[[content.rules]]\nid = \"private-key\"\nregex = 'NEVERMATCHES'\n");
    assert!(hits(&pol, "a", &pem()).is_empty());
}

#[test]
fn gitleaks_config_with_extend_and_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("base.toml"),
        r#"
title = "base"
[[rules]]
id = "acme"
regex = '''acme_[0-9]{4}'''
keywords = ["acme_"]
[[rules]]
id = "noisy"
regex = '''x'''
[allowlist]
paths = ['''^vendor/''']
"#,
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(
        dir.path().join("sub/gitleaks.toml"),
        r#"
[extend]
path = "../base.toml"
disabledRules = ["noisy"]
[[rules]]
id = "acme"
entropy = 1.0
[[rules.allowlists]]
stopwords = ["0000"]
"#,
    )
    .unwrap();
    let policy_path = dir.path().join("policy.toml");
    std::fs::write(
        &policy_path,
        "version = 1\n[content]\nbuiltin = false\ngitleaks_config = \"sub/gitleaks.toml\"\n",
    )
    .unwrap();
    let pol = Policy::load(&policy_path).unwrap();
    let sc = pol.content_scanner().unwrap();
    assert_eq!(sc.rule_ids().collect::<Vec<_>>(), vec!["content:acme"]);
    assert_eq!(sc.sources().len(), 2);
    assert_eq!(hits(&pol, "a.txt", "id acme_1234").len(), 1);
    assert!(
        hits(&pol, "a.txt", "id acme_0000").is_empty(),
        "stopword from the extending file"
    );
    assert!(
        hits(&pol, "vendor/a.txt", "id acme_1234").is_empty(),
        "global allowlist of the base"
    );

    std::fs::write(
        dir.path().join("bad.toml"),
        "[[rules]]\nid = \"x\"\nregex = '('\n",
    )
    .unwrap();
    std::fs::write(
        &policy_path,
        "version = 1\n[content]\ngitleaks_config = \"bad.toml\"\n",
    )
    .unwrap();
    let e = Policy::load(&policy_path).unwrap_err().to_string();
    assert!(
        e.contains("content.gitleaks_config (line 3)") && e.contains("bad.toml:2"),
        "{e}"
    );
    // A device would be read for ever.
    std::fs::write(
        &policy_path,
        "version = 1\n[content]\ngitleaks_config = \"/dev/zero\"\n",
    )
    .unwrap();
    let e = Policy::load(&policy_path).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    std::fs::write(
        dir.path().join("dflt.toml"),
        "[extend]\nuseDefault = true\n",
    )
    .unwrap();
    std::fs::write(
        &policy_path,
        "version = 1\n[content]\ngitleaks_config = \"dflt.toml\"\n",
    )
    .unwrap();
    assert!(
        Policy::load(&policy_path)
            .unwrap_err()
            .to_string()
            .contains("useDefault")
    );
}

#[test]
fn explain_says_why() {
    let pol = policy(INLINE);
    let sc = pol.content_scanner().unwrap();
    let t = sc.explain(&p("a"), b"nothing here");
    assert!(t[0].note.contains("none of the keywords"), "{t:?}");
    let t = sc.explain(&p("a"), b"acme_live_aaaaaaaaaaaaaaaa");
    assert!(!t[0].hit && t[0].note.contains("entropy"), "{t:?}");
    let t = sc.explain(&p("a"), b"\nacme_live_q8w7e6r5t4y3u2i1");
    assert!(t[0].hit && t[0].note.contains("line 2"), "{t:?}");
}

#[test]
fn gitleaks_allow_comment_is_not_honoured() {
    let pol = policy("[content]\n");
    let text = format!("{} # gitleaks:allow", aws_key());
    assert_eq!(hits(&pol, "a", &text).len(), 1);
}

#[test]
fn entropy_matches_gitleaks() {
    assert_eq!(super::shannon_entropy(b""), 0.0);
    assert_eq!(super::shannon_entropy(b"aaaa"), 0.0);
    assert!((super::shannon_entropy(b"abcd") - 2.0).abs() < 1e-9);
}

/// Every text file under `dir` (recursively), skipping `target` and `.git`.
fn text_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        let name = e.file_name();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() && name != "target" && name != ".git" {
            text_files(&path, out);
        } else if ft.is_file() {
            out.push(path);
        }
    }
}

/// The default policy's content rules must never refuse ordinary source code: fsgate's own
/// tree (including this scanner's rules and tests), and the sources of well-known crates
/// in the local cargo registry when present.
#[test]
fn default_policy_passes_ordinary_source_code() {
    let pol = Policy::builtin_default().unwrap();
    let sc = pol
        .content_scanner()
        .expect("the default policy scans content");
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut files = Vec::new();
    for d in ["src", "tests", "policies"] {
        text_files(&root.join(d), &mut files);
    }
    files.push(root.join("Cargo.toml"));
    files.push(root.join("Cargo.lock"));
    if let Some(home) = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        && let Ok(regs) = std::fs::read_dir(home.join("registry/src"))
    {
        for reg in regs.flatten() {
            let Ok(crates) = std::fs::read_dir(reg.path()) else {
                continue;
            };
            for c in crates.flatten() {
                let name = c.file_name().to_string_lossy().into_owned();
                if [
                    "serde-1",
                    "regex-1",
                    "clap_builder-",
                    "tokio-1",
                    "globset-",
                    "toml-",
                ]
                .iter()
                .any(|prefix| name.starts_with(prefix))
                {
                    text_files(&c.path().join("src"), &mut files);
                }
            }
        }
    }
    let started = std::time::Instant::now();
    let mut bytes = 0usize;
    let mut found = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read(f) else { continue };
        bytes += text.len();
        if let Some(hit) = sc.scan(&p("x.rs"), &text) {
            found.push(format!("{}:{} {}", f.display(), hit.line, hit.rule_id));
        }
    }
    eprintln!(
        "scanned {} files, {} KiB in {:?}",
        files.len(),
        bytes / 1024,
        started.elapsed()
    );
    assert!(
        files.len() > 50,
        "too few files to mean anything: {}",
        files.len()
    );
    assert!(
        found.is_empty(),
        "content rules fire on ordinary source:\n{}",
        found.join("\n")
    );
}

proptest::proptest! {
    /// Arbitrary bytes (including invalid UTF-8 and stray newlines) never panic the
    /// scanner, and `scan` is the first of `scan_all`.
    #[test]
    fn scanning_arbitrary_bytes_is_total(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        seed in proptest::sample::select(vec!["", "api_key = \"", "-----BEGIN RSA PRIVATE KEY-----\n", "AKIA", "\n\n"]),
    ) {
        let pol = policy("[content]\n");
        let sc = pol.content_scanner().unwrap();
        let mut text = seed.as_bytes().to_vec();
        text.extend_from_slice(&bytes);
        let all = sc.scan_all(&p("a.txt"), &text);
        proptest::prop_assert_eq!(sc.scan(&p("a.txt"), &text), all.first().cloned());
        for h in &all {
            proptest::prop_assert!(h.line >= 1 && h.column >= 1);
        }
    }
}

/// The rules the keyword prefilter lets through, computed naively: a rule runs if it has
/// no keywords or one of them occurs in the text, ASCII case-insensitively.
fn naive_candidates(s: &ContentScanner, text: &[u8]) -> Vec<bool> {
    let lower = text.to_ascii_lowercase();
    let occurs = |k: &str| {
        let k = k.to_ascii_lowercase();
        lower.windows(k.len().max(1)).any(|w| w == k.as_bytes())
    };
    s.rules
        .iter()
        .map(|r| r.keywords.is_empty() || r.keywords.iter().any(|k| occurs(k)))
        .collect()
}

#[test]
fn the_prefilter_lets_through_exactly_the_rules_whose_keywords_occur() {
    // Keywords inside one another and overlapping ("apikey" holds "key", "keyring"
    // starts where "apikey"'s "key" does): an overlapping search must miss none.
    let custom = policy(
        r#"
[content]
builtin = false
[[content.rules]]
id = "a"
regex = 'a[0-9]{4}'
keywords = ["apikey"]
[[content.rules]]
id = "b"
regex = 'b[0-9]{4}'
keywords = ["key"]
[[content.rules]]
id = "c"
regex = 'c[0-9]{4}'
keywords = ["keyring", "zz"]
[[content.rules]]
id = "d"
regex = 'd[0-9]{4}'
"#,
    );
    let builtin = Policy::builtin_default().unwrap();
    let texts = [
        "",
        "fn main() {}\n",
        "APIKEYRING",
        "x apikeyring y",
        "the Key, then a token and ghp_ and -----BEGIN",
        "zz",
        "no keyword here at all, only words like pass word and tok en",
        "AKIA at the end: xoxb-",
    ];
    for pol in [&custom, &builtin] {
        let s = pol.content_scanner().unwrap();
        for t in texts {
            assert_eq!(
                s.candidates(t.as_bytes()),
                naive_candidates(s, t.as_bytes()),
                "{t:?}"
            );
        }
    }
}

/// Keywords found by the packed search, with windows of every small size (so keywords
/// straddle window ends), against the automaton's overlapping search.
fn packed_agrees(s: &ContentScanner, text: &[u8]) {
    let Ok(Some(super::Keywords {
        ac,
        packed: Some(p),
    })) = s.prefilter.built()
    else {
        panic!("this CPU has no packed searcher for the built-in keywords");
    };
    let want = super::occurring_overlapping(ac, text, s.keyword_rules.len());
    for window in (1..12).chain([4096, super::PACKED_WINDOW]) {
        assert_eq!(
            p.occurring(text, window, ac),
            want,
            "window {window}: {text:?}"
        );
    }
}

#[test]
fn the_packed_keyword_search_finds_what_the_overlapping_search_finds() {
    let builtin = Policy::builtin_default().unwrap();
    let s = builtin.content_scanner().unwrap();
    let texts = [
        "",
        "a",
        "AKIAasiaAbIaacCa a3T",
        "ghp_gho_GHU_ghs_ghr_github_pat_glpat-xoxa-xoxb-XOXP-xoxo-xoxs-xoxr-sk_live_rk_live_",
        "-----BEGIN-----begin",
        "akiakiakia asisia abiabia",
        "é AKIA é\n-----BEGIN RSA PRIVATE KEY-----\n",
    ];
    for t in texts {
        packed_agrees(s, t.as_bytes());
        let mut long = "fn main() { let x = 1; }\n".repeat(1000).into_bytes();
        let mid = long.len() / 2;
        long.splice(mid..mid, t.bytes());
        packed_agrees(s, &long);
    }
}

proptest::proptest! {
    #[test]
    fn packed_search_agrees_on_keyword_soup(
        parts in proptest::collection::vec(proptest::sample::select(vec![
            "a", "A", "k", "I", "s", "3", "t", "gh", "p_", "xox", "b-", "-----", "BEGIN",
            "sk_", "live_", "github_", "pat_", "glpat", "-", " ", "\n", "é",
        ]), 0..60),
    ) {
        let builtin = Policy::builtin_default().unwrap();
        let s = builtin.content_scanner().unwrap();
        packed_agrees(s, parts.concat().as_bytes());
    }
}

/// Text dense with keyword starts (each one a new packed search and a compare of every
/// keyword) goes to the automaton after a bounded number of them, with the same answer;
/// ordinary text stays on the packed search.
#[test]
fn text_dense_with_keywords_goes_to_the_automaton() {
    let builtin = Policy::builtin_default().unwrap();
    let s = builtin.content_scanner().unwrap();
    let Ok(Some(super::Keywords {
        ac,
        packed: Some(p),
    })) = s.prefilter.built()
    else {
        panic!("this CPU has no packed searcher for the built-in keywords");
    };
    let n = s.keyword_rules.len();
    let bound = super::PACKED_WINDOW / super::PACKED_DENSITY;
    for unit in ["a3t", "AKIA", "pwd ", "ghp_gho_", "-----begin"] {
        let mut text = unit.repeat((1 << 20) / unit.len()).into_bytes();
        text.extend_from_slice(b" glpat- xoxb-");
        let (seen, stops) = p.occurring_counted(&text, super::PACKED_WINDOW, ac);
        assert_eq!(seen, super::occurring_overlapping(ac, &text, n), "{unit}");
        assert!(stops <= bound, "{unit}: {stops} packed stops");
        // Dense from a window past the first: the windows before it stay packed.
        let mut late = "x".repeat(3 * super::PACKED_WINDOW + 7).into_bytes();
        late.extend_from_slice(&text);
        let (seen, stops) = p.occurring_counted(&late, super::PACKED_WINDOW, ac);
        assert_eq!(seen, super::occurring_overlapping(ac, &late, n), "{unit}");
        assert!(stops <= 2 * bound, "{unit}: {stops} packed stops");
    }
    // Source code with a keyword now and then: every one found by the packed search.
    let code = "let id = \"AKIA\";\n".repeat(100) + &"fn main() {}\n".repeat(5000);
    let (seen, stops) = p.occurring_counted(code.as_bytes(), super::PACKED_WINDOW, ac);
    assert_eq!(seen, super::occurring_overlapping(ac, code.as_bytes(), n));
    assert_eq!(stops, 100);
}

#[test]
fn only_rules_or_allowlists_with_paths_depend_on_the_path() {
    let scanner = |content: &str| policy(content).content_scanner().cloned().expect("scanner");
    assert!(!scanner("[content]\n").depends_on_path());
    let rule =
        "[content]\nbuiltin = false\n[[content.rules]]\nid = \"a\"\nregex = '''tok_[0-9]{6}'''\n";
    assert!(!scanner(rule).depends_on_path());
    assert!(scanner(&format!("{rule}path = '''^config/'''\n")).depends_on_path());
    let own = format!("{rule}[[content.rules.allowlists]]\npaths = ['''\\.md$''']\n");
    assert!(scanner(&own).depends_on_path());
    let global = format!("{rule}[[content.allowlists]]\npaths = ['''^tests/''']\n");
    assert!(scanner(&global).depends_on_path());
    let targeted = format!("{global}targetRules = [\"a\"]\n");
    assert!(scanner(&targeted).depends_on_path());
    let regexes = format!("{rule}[[content.allowlists]]\nregexes = ['''123456''']\n");
    assert!(!scanner(&regexes).depends_on_path());
}

/// A key kept in a JSON string (a cloud service account's file) has its line breaks
/// written `\n`: found as the same key with real line breaks is.
#[test]
fn a_private_key_inside_a_json_string_is_found() {
    let pol = policy("[content]\n");
    let escaped = pem().trim_end().replace('\n', "\\n");
    let json =
        format!("{{\n  \"type\": \"service_account\",\n  \"private_key\": \"{escaped}\\n\"\n}}\n");
    assert_eq!(
        hits(&pol, "sa.json", &json),
        vec![("content:private-key".into(), 3)]
    );
    let crlf = pem().trim_end().replace('\n', "\\r\\n");
    assert_eq!(hits(&pol, "k.json", &format!("\"{crlf}\"")).len(), 1);
}
