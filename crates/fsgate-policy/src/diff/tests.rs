//! Tests of `policy diff`: decisions, and each category of setting.

use super::*;
use crate::{Effect, EntryKind};
use fsgate_base::path::RelPath;

const OLD: &str = r#"version = 1
[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]

[[test]]
op = "read"
path = "src/a.rs"
expect = "allow"
"#;

const NEW: &str = r#"version = 1
[[rule]]
id = "read-src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**"]

[[rule]]
id = "write-docs"
effect = "allow"
ops = ["write"]
paths = ["docs/**"]

[[test]]
op = "write"
path = "docs/guide.md"
expect = "allow"
"#;

#[test]
fn changes_over_test_paths() {
    let old = Policy::from_toml(OLD, "old").unwrap();
    let new = Policy::from_toml(NEW, "new").unwrap();
    let paths = test_paths(&[&old, &new]);
    let names: Vec<&str> = paths.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, vec!["", "docs", "docs/guide.md", "src", "src/a.rs"]);
    let r = diff(&old, &new, &paths);
    let got: Vec<(bool, &str, &str)> = r
        .changes
        .iter()
        .map(|c| (c.widens(), c.op.as_str(), c.path.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (true, "write", "docs/guide.md"),
            (false, "read", ""),
            (false, "read", "docs"),
            (false, "list", "docs"),
            (false, "read", "docs/guide.md"),
            (false, "list", "docs/guide.md"),
            // `src/**` covers what lies beneath src, not src itself (listing it is
            // allowed as an ancestor, reading it as a file is not).
            (false, "read", "src"),
        ]
    );
    // `src/a.rs` is still readable, now by another rule.
    assert!(
        r.rule_changes
            .iter()
            .any(|c| c.path == "src/a.rs" && c.new.rule == "read-src")
    );
}

#[test]
fn workspace_walk_does_not_follow_symlinks_and_stops_at_max() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    std::fs::write(dir.path().join("a/b/f.txt"), "x").unwrap();
    std::os::unix::fs::symlink("/", dir.path().join("a/root")).unwrap();
    let (paths, truncated) = workspace_paths(dir.path(), 100).unwrap();
    let names: Vec<(&str, EntryKind)> = paths.iter().map(|(p, k)| (p.as_str(), *k)).collect();
    assert!(!truncated);
    assert_eq!(
        names,
        vec![
            ("", EntryKind::Dir),
            ("a", EntryKind::Dir),
            ("a/b", EntryKind::Dir),
            ("a/root", EntryKind::Unknown),
            ("a/b/f.txt", EntryKind::File),
        ]
    );
    let (paths, truncated) = workspace_paths(dir.path(), 2).unwrap();
    assert!(truncated && paths.len() == 2);
}

/// The setting items between two policy texts.
fn items(old: &str, new: &str) -> Vec<Item> {
    let a = Policy::from_toml(old, "old").unwrap();
    let b = Policy::from_toml(new, "new").unwrap();
    setting_items(&a, old, &b, new)
}

/// The items as `direction area subject`, for compact assertions.
fn lines(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| format!("{} {} {}", i.direction.as_str(), i.area, i.subject))
        .collect()
}

const DEFAULT: &str = crate::DEFAULT_POLICY_TOML;

fn edited(from: &str, to: &str) -> String {
    assert!(DEFAULT.contains(from), "{from}");
    DEFAULT.replace(from, to)
}

#[test]
fn identical_policies_have_no_items() {
    assert!(items(DEFAULT, DEFAULT).is_empty());
    // Writing a section's defaults out changes nothing.
    let explicit = format!(
        "{DEFAULT}\n[audit]\nfsync = \"always\"\n[acp]\nallow_terminal = false\n[ws]\nmax_connections = 64\n"
    );
    assert!(
        items(DEFAULT, &explicit).is_empty(),
        "{:?}",
        items(DEFAULT, &explicit)
    );
}

#[test]
fn limits_larger_loosen_and_binary_is_ordered() {
    let new = edited("max_write_bytes = 10485760", "max_write_bytes = 1048576000")
        .replace("binary = \"media\"", "binary = \"deny\"");
    let got = items(DEFAULT, &new);
    assert_eq!(
        lines(&got),
        vec!["loosens limits max_write_bytes", "tightens limits binary"]
    );
    assert_eq!(
        (got[0].old.as_str(), got[0].new.as_str()),
        ("10485760", "1048576000")
    );
    let base64 = edited("binary = \"media\"", "binary = \"base64\"");
    assert_eq!(
        lines(&items(DEFAULT, &base64)),
        vec!["loosens limits binary"]
    );
    let smaller = edited("max_read_bytes = 10485760", "max_read_bytes = 1024");
    assert_eq!(
        lines(&items(DEFAULT, &smaller)),
        vec!["tightens limits max_read_bytes"]
    );
    let processes = edited(
        "max_write_bytes = 10485760\n",
        "max_write_bytes = 10485760\nmax_process_file_bytes = 536870912\n",
    );
    assert_eq!(
        lines(&items(DEFAULT, &processes)),
        vec!["loosens limits max_process_file_bytes"]
    );
}

#[test]
fn secret_patterns_compare_by_compiled_id_and_source() {
    let off = edited("builtin = true\n# Extra", "builtin = false\n# Extra");
    assert_eq!(
        lines(&items(DEFAULT, &off)),
        vec!["loosens secrets built-in secret-name list"]
    );
    assert_eq!(
        lines(&items(&off, DEFAULT)),
        vec!["tightens secrets built-in secret-name list"]
    );
    let own = |re: &str| {
        edited(
            "patterns = []",
            &format!("patterns = [{{ id = \"vault\", regex = '{re}' }}]"),
        )
    };
    let with = own("^\\.vault-token$");
    assert_eq!(
        lines(&items(DEFAULT, &with)),
        vec!["tightens secrets secrets:vault"]
    );
    assert_eq!(
        lines(&items(&with, DEFAULT)),
        vec!["loosens secrets secrets:vault"]
    );
    // A regex replaced may miss what the old one caught: a gate must stop it.
    assert_eq!(
        lines(&items(&with, &own("^vault$"))),
        vec!["loosens secrets secrets:vault"]
    );
}

#[test]
fn content_rules_disabled_ops_and_allowlists() {
    let disabled = edited(
        "disabled_rules = [\"generic-api-key\"]",
        "disabled_rules = [\"generic-api-key\", \"private-key\", \"aws-access-key-id\"]",
    );
    let got = items(DEFAULT, &disabled);
    assert_eq!(
        lines(&got),
        vec![
            "loosens content content:private-key",
            "loosens content content:aws-access-key-id"
        ]
    );
    assert_eq!(got[0].new, "disabled");
    assert_eq!(
        lines(&items(&disabled, DEFAULT)),
        vec![
            "tightens content content:private-key",
            "tightens content content:aws-access-key-id"
        ]
    );
    let write_only = edited("ops = [\"read\", \"write\"]", "ops = [\"write\"]");
    assert_eq!(
        lines(&items(DEFAULT, &write_only)),
        vec!["loosens content ops: read"]
    );
    // Where nothing can be read, not scanning reads lets nothing through.
    let blind = write_only.replace("ops = [\"read\", \"list\"]", "ops = [\"list\"]");
    let got = lines(&items(DEFAULT, &blind));
    assert!(
        got.contains(&"changes content ops: read".to_string()),
        "{got:?}"
    );
    let no_builtin = edited(
        "generic-api-key.\nbuiltin = true",
        "generic-api-key.\nbuiltin = false",
    )
    .replace(
        "disabled_rules = [\"generic-api-key\"]",
        "disabled_rules = []",
    );
    let got = lines(&items(DEFAULT, &no_builtin));
    assert_eq!(got[0], "loosens content built-in content rules");
    assert!(
        got.contains(&"loosens content content:private-key".to_string()),
        "{got:?}"
    );
    let start = DEFAULT.find("\n[content]\n").unwrap();
    let end = DEFAULT[start..].find("\n[agent]\n").unwrap() + start;
    let without = format!("{}{}", &DEFAULT[..start], &DEFAULT[end..]);
    assert_eq!(
        lines(&items(DEFAULT, &without)),
        vec!["loosens content [content]"]
    );
    let allow = edited(
        "ops = [\"read\", \"write\"]",
        "ops = [\"read\", \"write\"]\n[[content.allowlists]]\npaths = ['^fixtures/']",
    );
    assert_eq!(
        lines(&items(DEFAULT, &allow)),
        vec!["loosens content global allowlists"]
    );
    assert_eq!(
        lines(&items(&allow, DEFAULT)),
        vec!["tightens content global allowlists"]
    );
    // An inline rule replacing a built-in one by id, with a regex that never matches.
    let weak = edited(
        "ops = [\"read\", \"write\"]",
        "ops = [\"read\", \"write\"]\n[[content.rules]]\nid = \"private-key\"\nregex = 'never_matches'",
    );
    assert_eq!(
        lines(&items(DEFAULT, &weak)),
        vec!["loosens content content:private-key definition"]
    );
}

#[test]
fn marking_a_rule_overridable_loosens() {
    let a: toml::Table = "max_size = 10".parse().unwrap();
    let b: toml::Table = "max_size = 10\noverridable = true".parse().unwrap();
    for effect in [Effect::Deny, Effect::Allow] {
        let mut out = Vec::new();
        rules::rule_extra_keys("r", effect, &a, &b, &mut out);
        assert_eq!(lines(&out), vec!["loosens rule r overridable"]);
        let mut out = Vec::new();
        rules::rule_extra_keys("r", effect, &b, &a, &mut out);
        assert_eq!(lines(&out), vec!["tightens rule r overridable"]);
    }
}

#[test]
fn sections_key_by_key() {
    let with = |extra: &str| format!("{DEFAULT}\n{extra}\n");
    let cases: [(&str, &[&str]); 9] = [
        ("[audit]\nfsync = \"never\"", &["loosens audit fsync"]),
        (
            "[audit]\ncheckpoint_every = 0",
            &["loosens audit checkpoint_every"],
        ),
        (
            "[audit]\nmax_file_bytes = 1024",
            &["changes audit max_file_bytes"],
        ),
        (
            "[acp]\nallow_terminal = true",
            &["loosens acp allow_terminal"],
        ),
        (
            "[sandbox]\nrequire_landlock = true",
            &["tightens sandbox require_landlock"],
        ),
        (
            "[backup]\non_limit = \"change-without-backup\"",
            &["loosens backup on_limit"],
        ),
        (
            "[backup]\nkeep_versions = 3",
            &["loosens backup keep_versions"],
        ),
        (
            "[ws]\nallowed_origins = [\"http://localhost:3000\"]",
            &["loosens ws allowed_origins"],
        ),
        (
            "[audit]\nship = [{ socket = \"/dev/log\" }]",
            &["tightens audit ship"],
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(
            lines(&items(DEFAULT, &with(extra))),
            want.to_vec(),
            "{extra}"
        );
    }
    // A collector removed is a safeguard gone.
    let shipped = with("[audit]\nship = [{ socket = \"/dev/log\" }]");
    assert_eq!(lines(&items(&shipped, DEFAULT)), ["loosens audit ship"]);
    let none = edited(
        "[agent]\n",
        "[agent]\nnetwork = \"none\"\nread = [\"/opt/a\"]\n",
    );
    let net = edited(
        "[agent]\n",
        "[agent]\nnetwork = [443]\nread = [\"/opt/a\", \"/opt/b\"]\n",
    );
    assert_eq!(
        lines(&items(&none, &net)),
        vec!["loosens agent network", "loosens agent read"]
    );
    assert_eq!(
        lines(&items(&net, &none)),
        vec!["tightens agent network", "tightens agent read"]
    );
    let env = edited("  \"XAI_API_KEY\",\n", "");
    let got = items(DEFAULT, &env);
    assert_eq!(lines(&got), vec!["tightens agent env"]);
    assert_eq!(got[0].old, "\"XAI_API_KEY\"");
}

#[test]
fn other_top_level_keys_show_as_changes() {
    let a = "version = 1\nextends = \"base.toml\"\n[sets]\ninfra = [\"infra/**\"]\n";
    let b = "version = 1\nextends = \"org.toml\"\n[sets]\ninfra = [\"infra/**\", \"ops/**\"]\n";
    let mut out = Vec::new();
    sections::sections((a, &[]), (b, &[]), &mut out);
    assert_eq!(
        lines(&out),
        vec!["changes extends extends", "changes sets infra"]
    );
    assert_eq!(out[1].new, "[\"infra/**\", \"ops/**\"]");
}

#[test]
fn legacy_agent_system_paths_compare_as_agent_system_paths() {
    let legacy = "version = 1\n[sandbox]\nagent_system_paths = [\"/usr\"]\n";
    let modern = "version = 1\n[agent]\nsystem_paths = [\"/usr\"]\n";
    assert!(
        items(legacy, modern).is_empty(),
        "{:?}",
        items(legacy, modern)
    );
    let more = "version = 1\n[agent]\nsystem_paths = [\"/usr\", \"/opt\"]\n";
    assert_eq!(
        lines(&items(legacy, more)),
        vec!["loosens agent system_paths"]
    );
}

const RULES: &str = r#"version = 1
[[rule]]
id = "read-src"
effect = "allow"
ops = ["read"]
paths = ["src/**"]

[[rule]]
id = "no-infra"
effect = "deny"
ops = ["write"]
paths = ["infra/**"]
"#;

#[test]
fn rules_added_removed_and_changed_by_id() {
    let r = |from: &str, to: &str| {
        assert!(RULES.contains(from), "{from}");
        RULES.replace(from, to)
    };
    // Removing a deny loosens; removing an allow tightens.
    let no_deny = RULES[..RULES.find("[[rule]]\nid = \"no-infra\"").unwrap()].to_string();
    assert_eq!(
        lines(&items(RULES, &no_deny)),
        vec!["loosens rule no-infra"]
    );
    assert_eq!(
        lines(&items(&no_deny, RULES)),
        vec!["tightens rule no-infra"]
    );
    let cases: [(&str, &str, &[&str]); 6] = [
        (
            "ops = [\"read\"]",
            "ops = [\"read\", \"write\"]",
            &["loosens rule read-src ops"],
        ),
        (
            "ops = [\"write\"]",
            "ops = [\"write\", \"delete\"]",
            &["tightens rule no-infra ops"],
        ),
        (
            "paths = [\"src/**\"]",
            "paths = [\"lib/**\"]",
            &[
                "loosens rule read-src paths",
                "tightens rule read-src paths",
            ],
        ),
        (
            "paths = [\"infra/**\"]",
            "paths = [\"infra/**\"]\nextensions = [\"tf\"]",
            &["loosens rule no-infra extensions"],
        ),
        (
            "effect = \"deny\"",
            "effect = \"allow\"",
            &["loosens rule no-infra"],
        ),
        (
            "paths = [\"src/**\"]",
            "paths = [\"src/**\"]\nreason = \"why\"",
            &[],
        ),
    ];
    for (from, to, want) in cases {
        assert_eq!(lines(&items(RULES, &r(from, to))), want.to_vec(), "{to}");
    }
}

#[test]
fn rules_the_other_side_already_covers_are_not_loosenings() {
    let narrower = format!(
        "{DEFAULT}\n[[rule]]\nid = \"read-md\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"docs/**\"]\nextensions = [\"md\"]\n"
    );
    assert_eq!(
        lines(&items(DEFAULT, &narrower)),
        vec!["changes rule read-md"]
    );
    // Not covered: no old allow rule granted read.
    let more = RULES.replace("ops = [\"read\"]", "ops = [\"list\"]");
    let add = format!(
        "{more}\n[[rule]]\nid = \"read-src-2\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"src/**\"]\n"
    );
    assert!(lines(&items(&more, &add)).contains(&"loosens rule read-src-2".to_string()));
    // A deny removed while another deny with `**` covers its ops stays covered.
    let two = format!(
        "{RULES}\n[[rule]]\nid = \"no-write\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"**\"]\n"
    );
    let one = two.replace("id = \"no-infra\"", "id = \"gone\"");
    let got = lines(&items(&two, &one));
    assert!(
        got.contains(&"changes rule no-infra".to_string()),
        "{got:?}"
    );
    assert!(got.contains(&"tightens rule gone".to_string()), "{got:?}");
}

#[test]
fn rule_keys_the_compiled_rule_does_not_keep_are_compared_as_written() {
    let a: toml::Table = "min_size = 100".parse().unwrap();
    let b: toml::Table = "min_size = 10\nfuture = 1".parse().unwrap();
    let mut out = Vec::new();
    rules::rule_extra_keys("big", Effect::Deny, &a, &b, &mut out);
    assert_eq!(
        lines(&out),
        vec!["changes rule big future", "tightens rule big min_size"]
    );
    let mut out = Vec::new();
    rules::rule_extra_keys("big", Effect::Allow, &a, &b, &mut out);
    assert_eq!(lines(&out)[1], "loosens rule big min_size");
}

#[test]
fn content_files_lists_files_one_policy_refuses_and_the_other_passes() {
    let dir = tempfile::tempdir().unwrap();
    let key = format!(
        "-----BEGIN OPENSSH PRIVATE {}-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
        "KEY", "g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD"
    );
    std::fs::create_dir(dir.path().join("ops")).unwrap();
    std::fs::write(dir.path().join("ops/deploy.txt"), &key).unwrap();
    std::fs::write(dir.path().join("plain.txt"), "hello").unwrap();
    std::fs::write(dir.path().join("big.txt"), "x".repeat(2048)).unwrap();
    let off = edited(
        "disabled_rules = [\"generic-api-key\"]",
        "disabled_rules = [\"generic-api-key\", \"private-key\"]",
    )
    .replace(
        "max_read_bytes = 10485760",
        "max_read_bytes = 1024\nmax_process_file_bytes = 1024",
    );
    let small = edited(
        "max_read_bytes = 10485760",
        "max_read_bytes = 1024\nmax_process_file_bytes = 1024",
    );
    let (a, b) = (
        Policy::from_toml(&small, "old").unwrap(),
        Policy::from_toml(&off, "new").unwrap(),
    );
    let (paths, _) = workspace_paths(dir.path(), 100).unwrap();
    let scan = content_files(&a, &b, dir.path(), &paths);
    assert_eq!(
        (scan.scanned, scan.skipped),
        (2, 1),
        "big.txt is over both read limits, and both process limits"
    );
    // A process may read what a model may not: with the read limit alone lowered,
    // big.txt is scanned too.
    let read_only = Policy::from_toml(
        &edited("max_read_bytes = 10485760", "max_read_bytes = 1024"),
        "read",
    )
    .unwrap();
    let wider = content_files(&read_only, &read_only, dir.path(), &paths);
    assert_eq!((wider.scanned, wider.skipped), (3, 0));
    assert_eq!(
        lines(&scan.items),
        vec!["loosens content-file ops/deploy.txt (read, write)"]
    );
    assert_eq!(scan.items[0].old, "deny (content:private-key)");
    assert_eq!(scan.items[0].new, "allow (workspace-read)");
    let back = content_files(&b, &a, dir.path(), &paths);
    assert_eq!(
        lines(&back.items),
        vec!["tightens content-file ops/deploy.txt (read, write)"]
    );
}

#[test]
fn what_a_policy_inherits_is_compared_as_its_own() {
    // The base sets `[acp]` and a set; the project inherits both: against the base, no
    // change; against a file without them, the project's inherited section counts.
    let base =
        "version = 1\n[acp]\nallow_terminal = true\n[sets]\nci = [\".github/**\"]\n".to_string();
    let project = "version = 1\nextends = \"base.toml\"\n[sets]\ngen = [\"gen/**\"]\n";
    let mut out = Vec::new();
    sections::sections(
        (&base, &[]),
        (project, std::slice::from_ref(&base)),
        &mut out,
    );
    assert_eq!(
        lines(&out),
        vec!["changes extends extends", "changes sets gen"],
        "{out:?}"
    );
    let mut out = Vec::new();
    sections::sections(("version = 1\n", &[]), (project, &[base]), &mut out);
    assert!(
        lines(&out).contains(&"loosens acp allow_terminal".to_string()),
        "{out:?}"
    );
}

const ASK_RULE: &str = r#"version = 1
[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = [".github/**"]

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]
"#;

#[test]
fn ask_rules_move_between_allow_and_deny() {
    // Gone: what it covered may now be allowed without a person.
    let without = ASK_RULE.replace("id = \"ask-ci\"\neffect = \"ask\"\nops = [\"write\"]\npaths = [\".github/**\"]\n\n[[rule]]\n", "");
    assert_eq!(lines(&items(ASK_RULE, &without)), ["loosens rule ask-ci"]);
    // Added: it asks where the allow granted, and may ask where nothing did.
    assert_eq!(lines(&items(&without, ASK_RULE)), ["changes rule ask-ci"]);
    // Covering less loosens; covering more has no clear direction.
    let narrower = ASK_RULE.replace("\".github/**\"", "\".github/workflows/**\"");
    assert_eq!(
        lines(&items(ASK_RULE, &narrower)),
        ["changes rule ask-ci paths", "loosens rule ask-ci paths"]
    );
    let more_ops = ASK_RULE.replace(
        "ops = [\"write\"]\npaths = [\".github",
        "ops = [\"write\", \"delete\"]\npaths = [\".github",
    );
    assert_eq!(
        lines(&items(ASK_RULE, &more_ops)),
        ["changes rule ask-ci ops"]
    );
    assert_eq!(
        lines(&items(&more_ops, ASK_RULE)),
        ["loosens rule ask-ci ops"]
    );
    // Effects: allow -> ask tightens, ask -> allow and deny -> ask loosen.
    let allow = ASK_RULE.replacen("effect = \"ask\"", "effect = \"allow\"", 1);
    let deny = ASK_RULE.replacen("effect = \"ask\"", "effect = \"deny\"", 1);
    assert_eq!(lines(&items(&allow, ASK_RULE)), ["tightens rule ask-ci"]);
    assert_eq!(lines(&items(ASK_RULE, &allow)), ["loosens rule ask-ci"]);
    assert_eq!(lines(&items(&deny, ASK_RULE)), ["loosens rule ask-ci"]);
    assert_eq!(lines(&items(ASK_RULE, &deny)), ["tightens rule ask-ci"]);
}

#[test]
fn ask_decisions_widen_and_narrow_by_deny_over_ask_over_allow() {
    let allow = ASK_RULE.replacen("effect = \"ask\"", "effect = \"allow\"", 1);
    let deny = ASK_RULE.replacen("effect = \"ask\"", "effect = \"deny\"", 1);
    let pol = |t: &str| Policy::from_toml(t, "p").unwrap();
    let paths = [(
        RelPath::parse_rooted(".github/ci.yml").unwrap(),
        EntryKind::File,
    )];
    let widens = |a: &str, b: &str| {
        let r = diff(&pol(a), &pol(b), &paths);
        assert_eq!(r.changes.len(), 1, "{a} -> {b}");
        r.changes[0].widens()
    };
    assert!(!widens(&allow, ASK_RULE), "allow -> ask narrows");
    assert!(widens(ASK_RULE, &allow), "ask -> allow widens");
    assert!(widens(&deny, ASK_RULE), "deny -> ask widens");
    assert!(!widens(ASK_RULE, &deny), "ask -> deny narrows");
}

#[test]
fn ask_notify_and_vcs_sections_are_plain_changes() {
    let base = "version = 1\n";
    assert!(items(base, "version = 1\n[ask]\ntimeout_secs = 120\n[notify]\nacp = true\nmcp = true\n[vcs]\nstage = false\n").is_empty(), "defaults written out");
    let set = "version = 1\n[ask]\ntimeout_secs = 3600\n[notify]\nacp = false\nmcp = false\n[vcs]\nstage = true\n";
    let got = items(base, set);
    assert_eq!(
        lines(&got),
        [
            "changes ask timeout_secs",
            "changes notify acp",
            "changes notify mcp",
            "changes vcs stage"
        ]
    );
    assert_eq!((got[0].old.as_str(), got[0].new.as_str()), ("120", "3600"));
    assert_eq!(
        lines(&items(set, base)),
        [
            "changes ask timeout_secs",
            "changes notify acp",
            "changes notify mcp",
            "changes vcs stage"
        ]
    );
}
