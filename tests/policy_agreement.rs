//! The policy simulator (`fsgate policy test`) against the real gateway: random policies
//! × a fixed tree × every operation (read, stat, ls, glob, tree, grep, write, edit,
//! mkdir, rm, and a file's rename). Each case starts one `fsgate serve --transport mcp`,
//! records what every operation on every path really does (allowed, or refused and by
//! which rule), writes those answers as `[[test]]` cases (by the operation's own name;
//! a rename as its documented steps) into a copy of the policy, and runs `fsgate policy
//! test --json` on it once: every case must pass.

use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};

use crate::common::run_cli;
use crate::mcp_harness::{McpGate, text_of};

/// A gateway operation this test performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GwOp {
    Read,
    Stat,
    Ls,
    Glob,
    Tree,
    Grep,
    Write,
    Edit,
    Mkdir,
    Rm,
    /// rename of a file to a new name: no single `[[test]]` op; the simulator is asked
    /// each check the operation table lists for a move, in its order. (MCP `move_file`
    /// is the same rename, refused if the target exists.)
    Move,
}

/// The `[[test]]` op the simulator is asked for each gateway operation: the operation's
/// own name, so the simulator decides each composite operation itself (which classes on
/// which paths), as policies/README.md's operation table documents it.
const SIMULATOR_OP: [(GwOp, &str); 10] = [
    (GwOp::Read, "read"),
    (GwOp::Stat, "stat"),
    (GwOp::Ls, "ls"),
    (GwOp::Glob, "glob"),
    (GwOp::Tree, "tree"),
    (GwOp::Grep, "grep"),
    (GwOp::Write, "write"),
    (GwOp::Edit, "edit"),
    (GwOp::Mkdir, "mkdir"),
    (GwOp::Rm, "rm"),
];

/// A file move's checks, in the documented order: `delete` then `read` on the source,
/// `write` on the target.
const MOVE_STEPS: [&str; 3] = ["delete", "read", "write"];

/// Files moved to a new name (whose directory exists), each moved back after.
const MOVES: [(&str, &str); 6] = [
    ("b.md", "docs/m.md"),
    ("c.rs", "src/a/m.rs"),
    ("src/b.md", "Docs/m.md"),
    ("src/a/c.rs", "m.rs"),
    ("docs/b.md", "SRC/m.md"),
    ("Docs/b.md", "src/m.rs"),
];

fn simulator_op(op: GwOp) -> &'static str {
    SIMULATOR_OP
        .iter()
        .find(|(o, _)| *o == op)
        .map_or("?", |(_, s)| s)
}

/// The fixed tree: files (each holding one line naming itself), with case variants
/// (`B.md`, `Docs`, `SRC`) and secret names (`.env`).
const FILES: [&str; 12] = [
    "b.md",
    "B.md",
    "c.rs",
    ".env",
    "src/c.rs",
    "src/b.md",
    "src/a/b.md",
    "src/a/c.rs",
    "docs/b.md",
    "docs/.env",
    "Docs/b.md",
    "SRC/c.rs",
];
/// The tree's directories.
const DIRS: [&str; 5] = ["src", "src/a", "docs", "Docs", "SRC"];
/// Directories that do not exist yet, for mkdir (their parents do).
const NEW_DIRS: [&str; 4] = ["a", "src/docs", "Docs/src", "SRC/a"];

/// What policy globs are made of.
const COMPONENTS: [&str; 11] = [
    "src", "docs", "Docs", "a", "b.md", "c.rs", "*", "**", "*.md", "SRC", "B.md",
];

/// The one line each file holds: what grep finds, and edits replace with itself.
fn line_of(path: &str) -> String {
    format!("[agree {path}]")
}

/// One generated `[[rule]]`.
#[derive(Debug, Clone)]
struct GenRule {
    allow: bool,
    ops: Vec<&'static str>,
    paths: Vec<String>,
    extensions: Option<Vec<&'static str>>,
}

/// A policy's text: built-in secret names on, no `[content]`, the generated rules.
fn policy_text(rules: &[GenRule]) -> String {
    let mut t = String::from("version = 1\n\n[secrets]\nbuiltin = true\n");
    for (i, r) in rules.iter().enumerate() {
        let effect = if r.allow { "allow" } else { "deny" };
        let _ = write!(
            t,
            "\n[[rule]]\nid = \"r{i}\"\neffect = \"{effect}\"\nops = {}\npaths = {}\n",
            json!(r.ops),
            json!(r.paths)
        );
        if let Some(exts) = &r.extensions {
            let _ = writeln!(t, "extensions = {}", json!(exts));
        }
    }
    t
}

/// A glob of 1-3 components, with a random leading `./` or `/`, trailing `/` and case.
fn glob() -> impl Strategy<Value = String> {
    let case = prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)];
    let prefix = prop_oneof![6 => Just(""), 1 => Just("./"), 1 => Just("/")];
    let comps = proptest::collection::vec(select(&COMPONENTS[..]), 1..=3);
    (comps, case, prefix, proptest::bool::weighted(0.15)).prop_map(
        |(comps, case, prefix, slash)| {
            let body = comps.join("/");
            let body = match case {
                1 => body.to_uppercase(),
                2 => {
                    let mut c = body.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect())
                        .unwrap_or_default()
                }
                _ => body,
            };
            format!("{prefix}{body}{}", if slash { "/" } else { "" })
        },
    )
}

fn rule() -> impl Strategy<Value = GenRule> {
    let ops = prop_oneof![
        1 => Just(vec!["*"]),
        6 => subsequence(vec!["read", "write", "delete", "list"], 1..=4),
    ];
    let exts = proptest::option::weighted(
        0.2,
        select(vec![vec!["md"], vec!["rs"], vec!["MD"], vec!["md", "rs"]]),
    );
    (
        proptest::bool::weighted(0.6),
        ops,
        proptest::collection::vec(glob(), 1..=2),
        exts,
    )
        .prop_map(|(allow, ops, paths, extensions)| GenRule {
            allow,
            ops,
            paths,
            extensions,
        })
}

/// What the gateway did with one operation on one path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Allowed,
    /// Refused (or hidden); `rule` when the answer names one.
    Denied {
        rule: Option<String>,
        text: String,
    },
    /// An error that is no refusal (names no rule): the simulator never answers so, so
    /// this is a disagreement whatever it decides.
    Broken(String),
}

/// One operation on one path and the gateway's answer.
#[derive(Debug, Clone)]
struct Observation {
    op: GwOp,
    path: &'static str,
    dir: bool,
    seen: Seen,
    /// A move's target.
    to: Option<&'static str>,
}

/// The refusal's rule: `refused: ... (rule R, path P)`.
fn named_rule(text: &str) -> Option<String> {
    let at = text.rfind("(rule ")?;
    let rest = &text[at + "(rule ".len()..];
    let end = rest.find([',', ')'])?;
    Some(rest[..end].to_string())
}

/// An `isError` tool result is a refusal naming its rule, or else broken; otherwise
/// allowed.
fn seen_of(r: &Value) -> Seen {
    if r["isError"] != json!(true) {
        return Seen::Allowed;
    }
    let text = text_of(r);
    match named_rule(&text) {
        Some(rule) => Seen::Denied {
            rule: Some(rule),
            text,
        },
        None => Seen::Broken(text),
    }
}

/// Every string anywhere in a JSON value.
fn strings_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings_in(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_in(x, out)),
        _ => {}
    }
}

/// A gateway on the tree, with a request counter.
struct Probe {
    g: McpGate,
    next: u64,
    out: Vec<Observation>,
}

impl Probe {
    fn start(policy: &str) -> Probe {
        let mut g = McpGate::start(Some(policy));
        for f in FILES {
            g.dirs.put(f, format!("{}\n", line_of(f)));
        }
        g.initialize("2025-06-18");
        Probe {
            g,
            next: 1,
            out: Vec::new(),
        }
    }

    fn tool(&mut self, name: &str, args: Value) -> Value {
        self.next += 1;
        self.g.tool(self.next, name, args)
    }

    fn abs(&self, rel: &str) -> String {
        self.g.dirs.abs(rel)
    }

    fn record(&mut self, op: GwOp, path: &'static str, dir: bool, seen: Seen) {
        self.out.push(Observation {
            op,
            path,
            dir,
            seen,
            to: None,
        });
    }

    /// A per-path call whose refusal names its rule.
    fn call(&mut self, op: GwOp, path: &'static str, dir: bool, name: &str, args: Value) {
        let seen = seen_of(&self.tool(name, args));
        self.record(op, path, dir, seen);
    }

    /// A path shown (allowed) or not in a listing-like answer `r`: hidden (denied,
    /// naming no rule), or the whole call refused (denied by the rule it names: for
    /// every path, the first check that fails is the one on the directory the call
    /// starts from).
    fn shown(&mut self, op: GwOp, (path, dir): (&'static str, bool), present: bool, r: &Answer) {
        let seen = match (present, seen_of(&r.value)) {
            (true, _) => Seen::Allowed,
            (false, Seen::Allowed) => Seen::Denied {
                rule: None,
                text: format!("not in the answer of {}", r.call),
            },
            (false, Seen::Denied { rule, text }) => Seen::Denied {
                rule,
                text: format!("{} refused: {text}", r.call),
            },
            (false, Seen::Broken(text)) => Seen::Broken(format!("{}: {text}", r.call)),
        };
        self.record(op, path, dir, seen);
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

fn name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, n)| n)
}

/// A listing-like answer and the call that gave it.
struct Answer {
    call: String,
    value: Value,
}

impl Answer {
    fn new(call: impl Into<String>, value: Value) -> Answer {
        Answer {
            call: call.into(),
            value,
        }
    }
}

/// Every path in a `directory_tree` answer (nested `{name, type, children}`).
fn tree_paths(nodes: &Value, prefix: &str, out: &mut Vec<String>) {
    for n in nodes.as_array().into_iter().flatten() {
        let Some(name) = n["name"].as_str() else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        tree_paths(&n["children"], &path, out);
        out.push(path);
    }
}

/// read, stat, ls (listed by its parent), glob, tree and grep (all three from the
/// root), for every file and directory.
fn observe_reads(p: &mut Probe) {
    let entries = FILES.iter().map(|f| (*f, false));
    let entries: Vec<(&'static str, bool)> =
        entries.chain(DIRS.iter().map(|d| (*d, true))).collect();
    let mut listings: std::collections::HashMap<&str, Answer> = Default::default();
    let glob = Answer::new("glob `**`", p.tool("glob", json!({"pattern": "**"})));
    let mut glob_paths = Vec::new();
    strings_in(&glob.value, &mut glob_paths);
    let root = p.abs("");
    let tree = Answer::new(
        "directory_tree of the root",
        p.tool("directory_tree", json!({"path": root})),
    );
    let mut tree_found = Vec::new();
    if let Ok(v) = serde_json::from_str::<Value>(&text_of(&tree.value)) {
        tree_paths(&v, "", &mut tree_found);
    }
    let grep_args = json!({"pattern": "\\[agree ", "maxResults": 10000});
    let grep = Answer::new("grep over the root", p.tool("grep", grep_args));
    let grep_text = grep.value.to_string();
    for (path, dir) in entries {
        let abs = p.abs(path);
        if !dir {
            let args = json!({"path": abs});
            p.call(GwOp::Read, path, dir, "read_text_file", args);
        }
        p.call(GwOp::Stat, path, dir, "get_file_info", json!({"path": abs}));
        let up = parent(path);
        if !listings.contains_key(up) {
            let listing = p.tool("list_directory", json!({"path": p.abs(up)}));
            listings.insert(up, Answer::new(format!("list_directory {up:?}"), listing));
        }
        let listing = &listings[up];
        let want = format!("{} {}", if dir { "[DIR]" } else { "[FILE]" }, name(path));
        let listed = listing.value["isError"] != json!(true)
            && text_of(&listing.value).lines().any(|l| l == want);
        p.shown(GwOp::Ls, (path, dir), listed, listing);
        let globbed = glob_paths.iter().any(|s| *s == path || *s == abs);
        p.shown(GwOp::Glob, (path, dir), globbed, &glob);
        let treed = tree_found.iter().any(|s| *s == path);
        p.shown(GwOp::Tree, (path, dir), treed, &tree);
        if !dir {
            let found = grep_text.contains(&line_of(path));
            p.shown(GwOp::Grep, (path, dir), found, &grep);
        }
    }
}

/// write and edit that leave every file as it was, then mkdir of new directories.
fn observe_changes(p: &mut Probe) {
    for path in FILES {
        let abs = p.abs(path);
        let content = format!("{}\n", line_of(path));
        let args = json!({"path": abs, "content": content});
        p.call(GwOp::Write, path, false, "write_file", args);
        let line = line_of(path);
        let args = json!({"path": abs, "oldText": line, "newText": line});
        p.call(GwOp::Edit, path, false, "edit_file", args);
    }
    for path in NEW_DIRS {
        let abs = p.abs(path);
        p.call(GwOp::Mkdir, path, true, "mkdir", json!({"path": abs}));
    }
}

/// rename of each file in MOVES, moved back (directly) when it went.
fn observe_moves(p: &mut Probe) {
    for (from, to) in MOVES {
        let args = json!({"oldPath": p.abs(from), "newPath": p.abs(to)});
        let seen = seen_of(&p.tool("rename", args));
        if seen == Seen::Allowed {
            let root = &p.g.dirs.root;
            std::fs::rename(root.join(to), root.join(from)).expect("move back");
        }
        p.out.push(Observation {
            op: GwOp::Move,
            path: from,
            dir: false,
            seen,
            to: Some(to),
        });
    }
}

/// rm: directories first (never empty, so a policy that lets it through meets "not
/// empty" and nothing is removed), then files.
fn observe_removals(p: &mut Probe) {
    for path in DIRS {
        let r = p.tool("rm", json!({"path": p.abs(path)}));
        let mut seen = seen_of(&r);
        if let Seen::Broken(text) = &seen
            && text.contains("not empty")
        {
            seen = Seen::Allowed;
        }
        p.record(GwOp::Rm, path, true, seen);
    }
    for path in FILES {
        let abs = p.abs(path);
        p.call(GwOp::Rm, path, false, "rm", json!({"path": abs}));
    }
}

/// One `[[test]]` case: op, path, dir, expected effect and rule.
type Case<'a> = (&'a str, &'a str, bool, &'a str, Option<&'a str>);

/// The cases an observation stands for, expecting what the gateway did. A move is
/// asked step by step: the steps before the one its refusal names expect allow, that
/// one deny by the rule; an allowed move expects every step allowed.
fn cases_of(o: &Observation) -> Vec<Case<'_>> {
    let (expect, rule) = match &o.seen {
        Seen::Allowed => ("allow", None),
        Seen::Denied { rule, .. } => ("deny", rule.as_deref()),
        Seen::Broken(_) => ("deny", None),
    };
    let Some(to) = o.to else {
        return vec![(simulator_op(o.op), o.path, o.dir, expect, rule)];
    };
    let steps = MOVE_STEPS.map(|c| (c, if c == "write" { to } else { o.path }));
    let refused = match &o.seen {
        Seen::Denied { text, .. } => steps
            .iter()
            .position(|(c, p)| text.contains(&format!("{c} of `{p}` denied"))),
        _ => None,
    };
    match (&o.seen, refused) {
        (Seen::Allowed, _) => steps.map(|(c, p)| (c, p, false, "allow", None)).to_vec(),
        (_, Some(i)) => steps[..=i]
            .iter()
            .enumerate()
            .map(|(j, (c, p))| match j == i {
                true => (*c, *p, false, "deny", rule),
                false => (*c, *p, false, "allow", None),
            })
            .collect(),
        // No step named: one case, so the observation is reported (as broken).
        _ => vec![(steps[0].0, o.path, false, "deny", rule)],
    }
}

/// The policy with the observations' `[[test]]` cases, and which observation each
/// case stands for.
fn with_cases(policy: &str, obs: &[Observation]) -> (String, Vec<usize>) {
    let mut t = policy.to_string();
    let mut owners = Vec::new();
    for (i, o) in obs.iter().enumerate() {
        for (op, path, dir, expect, rule) in cases_of(o) {
            owners.push(i);
            let _ = write!(
                t,
                "\n[[test]]\nop = \"{op}\"\npath = {}\nexpect = \"{expect}\"\n",
                json!(path)
            );
            if dir {
                t.push_str("dir = true\n");
            }
            if let Some(r) = rule {
                let _ = writeln!(t, "rule = {}", json!(r));
            }
        }
    }
    (t, owners)
}

/// Runs the simulator on the cases; one line per disagreement.
fn disagreements(p: &Probe, policy: &str) -> Vec<String> {
    let file = p.g.dirs.state.join("simulated.toml");
    let (text, owners) = with_cases(policy, &p.out);
    std::fs::write(&file, &text).expect("write the simulated policy");
    let out = run_cli(&["policy", "test", "--json", &file.to_string_lossy()]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "policy test --json: {e}\nstdout: {}\nstderr: {}\nfile:\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let cases = doc["files"][0]["cases"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(cases.len(), owners.len(), "one result per case: {doc}");
    owners
        .iter()
        .map(|i| &p.out[*i])
        .zip(&cases)
        .filter(|(o, c)| c["passed"] != json!(true) || matches!(o.seen, Seen::Broken(_)))
        .map(|(o, c)| describe(o, c))
        .collect()
}

fn describe(o: &Observation, case: &Value) -> String {
    let gateway = match &o.seen {
        Seen::Allowed => "allow".to_string(),
        Seen::Denied { rule, text } => format!(
            "deny{} ({text})",
            rule.as_deref()
                .map(|r| format!(" by {r}"))
                .unwrap_or_default()
        ),
        Seen::Broken(text) => format!("an error that is no refusal ({text})"),
    };
    let got = &case["got"];
    let sim = if got.is_object() {
        format!(
            "{} by {}",
            got["effect"].as_str().unwrap_or("?"),
            got["rule"].as_str().unwrap_or("?")
        )
    } else {
        format!("no decision: {}", case["failure"])
    };
    format!(
        "{:?} {}{}{} (simulator: `{}` on {}): gateway {gateway}; simulator {sim}",
        o.op,
        o.path,
        o.to.map(|t| format!(" -> {t}")).unwrap_or_default(),
        if o.dir { " (dir)" } else { "" },
        case["op"].as_str().unwrap_or("?"),
        case["path"]
    )
}

/// The disagreements between the simulator and the gateway under this policy.
fn run_case(rules: &[GenRule]) -> (String, Vec<String>) {
    let policy = policy_text(rules);
    let mut p = Probe::start(&policy);
    observe_reads(&mut p);
    observe_changes(&mut p);
    observe_moves(&mut p);
    observe_removals(&mut p);
    let found = disagreements(&p, &policy);
    (policy, found)
}

/// A fixed seed, so every run tries the same policies; `FSGATE_AGREE_SEED` and
/// `FSGATE_AGREE_CASES` try others.
fn config() -> Config {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        cases: env("FSGATE_AGREE_CASES").map_or(24, |n| n as u32),
        rng_seed: RngSeed::Fixed(env("FSGATE_AGREE_SEED").unwrap_or(16)),
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// For every generated policy, path and operation, `policy test` decides as the
    /// gateway did: allow or deny, and the deciding rule where the gateway names one.
    #[test]
    fn the_simulator_decides_every_operation_as_the_gateway_does(
        rules in proptest::collection::vec(rule(), 2..=6)
    ) {
        let (policy, found) = run_case(&rules);
        prop_assert!(
            found.is_empty(),
            "{} disagreement(s) under this policy:\n{policy}\n{}",
            found.len(),
            found.join("\n")
        );
    }
}

/// The probe itself, under a policy whose answers are known: allowed reads, listings
/// and changes are seen as allowed, secrets and a deny rule as refusals naming the rule,
/// and the simulator agrees. Without this, a probe that saw nothing could agree by luck.
#[test]
fn the_probe_sees_what_the_gateway_allows_and_refuses() {
    let rules = [
        GenRule {
            allow: true,
            ops: vec!["*"],
            paths: vec!["**".into()],
            extensions: None,
        },
        GenRule {
            allow: false,
            ops: vec!["write"],
            paths: vec!["docs".into()],
            extensions: None,
        },
    ];
    let policy = policy_text(&rules);
    let mut p = Probe::start(&policy);
    observe_reads(&mut p);
    observe_changes(&mut p);
    observe_moves(&mut p);
    observe_removals(&mut p);
    let seen = |op: GwOp, path: &str| {
        p.out
            .iter()
            .find(|o| o.op == op && o.path == path)
            .map(|o| o.seen.clone())
            .unwrap_or_else(|| panic!("no observation of {op:?} {path}"))
    };
    for (op, path) in [
        (GwOp::Read, "src/a/b.md"),
        (GwOp::Stat, "SRC"),
        (GwOp::Ls, "src/a/c.rs"),
        (GwOp::Glob, "docs/b.md"),
        (GwOp::Tree, "src/a/c.rs"),
        (GwOp::Tree, "Docs"),
        (GwOp::Grep, "src/a/b.md"),
        (GwOp::Edit, "src/c.rs"),
        (GwOp::Mkdir, "src/docs"),
        (GwOp::Move, "src/a/c.rs"),
        (GwOp::Rm, "src"),
        (GwOp::Rm, "b.md"),
    ] {
        assert_eq!(seen(op, path), Seen::Allowed, "{op:?} {path}");
    }
    for (op, path, rule) in [
        (GwOp::Write, "docs/b.md", "r1"),
        (GwOp::Edit, "docs/b.md", "r1"),
        (GwOp::Read, "docs/.env", "secrets:dotenv"),
        (GwOp::Move, "b.md", "r1"),
    ] {
        let Seen::Denied { rule: Some(r), .. } = seen(op, path) else {
            panic!("{op:?} {path}: {:?}", seen(op, path));
        };
        assert!(
            r == rule || (rule.starts_with("secrets:") && r.starts_with("secrets:")),
            "{op:?} {path}: {r}"
        );
    }
    for op in [GwOp::Ls, GwOp::Glob, GwOp::Tree, GwOp::Grep] {
        assert!(
            matches!(seen(op, ".env"), Seen::Denied { .. }),
            "{op:?} .env"
        );
    }
    assert!(p.g.dirs.root.join("src/docs").is_dir(), "mkdir made it");
    assert!(
        p.g.dirs.root.join("src/a").is_dir(),
        "rm of a directory removed nothing"
    );
    assert!(
        !p.g.dirs.root.join("b.md").exists(),
        "rm of a file removed it"
    );
    assert_eq!(
        p.out.len(),
        FILES.len() * 9 + DIRS.len() * 5 + NEW_DIRS.len() + MOVES.len()
    );
    let found = disagreements(&p, &policy);
    assert!(found.is_empty(), "{policy}\n{}", found.join("\n"));
}

/// Listing the ancestors of an allowed subtree is allowed, so the agent can reach it;
/// a file named like one of them is no ancestor: an allow on `b.md/src` lets the root
/// be listed, but the file `b.md` stays hidden and unstattable, in the gateway and the
/// simulator alike.
#[test]
fn a_file_never_leads_towards_an_allowed_subtree() {
    let rules = [GenRule {
        allow: true,
        ops: vec!["*"],
        paths: vec!["b.md/src".into()],
        extensions: None,
    }];
    let policy = policy_text(&rules);
    let mut p = Probe::start(&policy);
    observe_reads(&mut p);
    for o in p.out.iter().filter(|o| o.path == "b.md") {
        match (&o.op, &o.seen) {
            (GwOp::Stat | GwOp::Read, Seen::Denied { rule: Some(r), .. }) => {
                assert_eq!(r, "default-deny");
            }
            // Hidden from a root that may be listed: no refusal.
            (_, Seen::Denied { rule: None, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    let found = disagreements(&p, &policy);
    assert!(found.is_empty(), "{policy}\n{}", found.join("\n"));
}
