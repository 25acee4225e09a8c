//! `[audit]`, `[backup]`, `[sandbox]`, `[agent]`, `[acp]`, `[ws]`, `[http]`, `[ask]`,
//! `[notify]`, `[vcs]`: compared key by key as written (an absent key counts as its default), with a
//! direction where it is clear. `[ask] timeout_secs`, `[notify]` and `[vcs] stage` have
//! none: a longer wait still refuses without an answer, and telling or staging changes
//! what a person sees, not what the agent may do.

use toml::{Table, Value};

use super::item::{Direction, Item};

/// The sections compared, in report order.
const SECTIONS: [&str; 10] = [
    "audit", "backup", "sandbox", "agent", "acp", "ws", "http", "ask", "notify", "vcs",
];

/// List keys compared entry by entry: an entry added grants more.
const GRANT_LISTS: [(&str, &str); 7] = [
    ("agent", "read"),
    ("agent", "read_write"),
    ("agent", "execute"),
    ("agent", "env"),
    ("agent", "unix_sockets"),
    ("ws", "allowed_origins"),
    ("http", "allowed_origins"),
];

/// Top-level keys compared elsewhere (or, for `test`, not part of what is enforced).
const COMPARED_ELSEWHERE: [&str; 6] = ["version", "secrets", "limits", "rule", "test", "content"];

/// `*_bases`: the texts of the files each policy extends, base first: what a policy
/// inherits (sections, named sets) is compared as its own.
pub(super) fn sections(
    (old_text, old_bases): (&str, &[String]),
    (new_text, new_bases): (&str, &[String]),
    out: &mut Vec<Item>,
) {
    let (a, b) = (
        effective(old_text, old_bases),
        effective(new_text, new_bases),
    );
    known_sections(&a, &b, out);
    other_keys(&a, &b, out);
}

/// What the section `[name]` as `text` sets it loosens against its defaults (a policy
/// that extends one without that section may set it only if this is empty).
pub(crate) fn loosened_from_defaults(text: &str, name: &str) -> Vec<Item> {
    let mut mine = Table::new();
    if let Some(v) = parse(text).remove(name) {
        mine.insert(name.to_string(), v);
    }
    let mut out = Vec::new();
    known_sections(&Table::new(), &mine, &mut out);
    out.retain(|i| i.direction == Direction::Loosens);
    out
}

/// The policy's own table with what its bases give it: a section it does not set, and
/// the named sets it does not define (an extending file can change neither).
fn effective(text: &str, bases: &[String]) -> Table {
    let mut own = parse(text);
    for base in bases.iter().map(|t| parse(t)) {
        for (key, value) in base {
            let inherited = SECTIONS.contains(&key.as_str()) || key == "sets";
            match (own.get_mut(&key), value) {
                (None, value) if inherited => {
                    own.insert(key, value);
                }
                (Some(Value::Table(mine)), Value::Table(theirs)) if key == "sets" => {
                    for (name, globs) in theirs {
                        mine.entry(name).or_insert(globs);
                    }
                }
                _ => {}
            }
        }
    }
    own
}

/// Top-level keys no other comparison covers (named path sets, a base policy, keys
/// added later): `changes`, sub-key by sub-key for tables.
fn other_keys(a: &Table, b: &Table, out: &mut Vec<Item>) {
    let skip = |k: &str| SECTIONS.contains(&k) || COMPARED_ELSEWHERE.contains(&k);
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).filter(|k| !skip(k)).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let (va, vb) = (a.get(key), b.get(key));
        if let (Some(Value::Table(ta)), Some(Value::Table(tb))) = (va, vb) {
            let mut sub: Vec<&String> = ta.keys().chain(tb.keys()).collect();
            sub.sort();
            sub.dedup();
            for k in sub.into_iter().filter(|k| ta.get(*k) != tb.get(*k)) {
                let (x, y) = (text(ta.get(k)), text(tb.get(k)));
                out.push(Item::new(Direction::Changes, key, k, x, y));
            }
        } else if va != vb {
            out.push(Item::new(Direction::Changes, key, key, text(va), text(vb)));
        }
    }
}

fn known_sections(a: &Table, b: &Table, out: &mut Vec<Item>) {
    for sec in SECTIONS {
        let empty = Table::new();
        let ta = a.get(sec).and_then(Value::as_table).unwrap_or(&empty);
        let tb = b.get(sec).and_then(Value::as_table).unwrap_or(&empty);
        let mut keys: Vec<&String> = ta.keys().chain(tb.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let va = ta.get(key).cloned().or_else(|| default(sec, key));
            let vb = tb.get(key).cloned().or_else(|| default(sec, key));
            if va != vb {
                compare(sec, key, va.as_ref(), vb.as_ref(), out);
            }
        }
    }
}

/// The text as a table, with the older `[sandbox] agent_system_paths` moved to
/// `[agent] system_paths` (the policy loader folds it in the same way).
fn parse(text: &str) -> Table {
    let mut doc = text.parse::<Table>().unwrap_or_default();
    let legacy = doc
        .get_mut("sandbox")
        .and_then(Value::as_table_mut)
        .and_then(|t| t.remove("agent_system_paths"));
    if let Some(v) = legacy
        && let Some(agent) = doc
            .entry("agent")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
    {
        agent.entry("system_paths").or_insert(v);
    }
    doc
}

/// Defaults of the keys whose direction is judged, so that writing a default out does
/// not count as a change.
fn default(sec: &str, key: &str) -> Option<Value> {
    let int = |n: i64| Some(Value::Integer(n));
    let s = |v: &str| Some(Value::String(v.into()));
    match (sec, key) {
        ("audit", "fsync") => s("always"),
        ("audit", "checkpoint_every") => int(1000),
        ("audit", "heartbeat_secs") => int(30),
        ("audit", "max_file_bytes") => int(64 << 20),
        ("audit", "ship") => Some(Value::Array(Vec::new())),
        ("backup", "max_total_bytes" | "max_sparse_bytes") => int(1 << 30),
        ("backup", "max_file_bytes") => int(64 << 20),
        ("backup", "on_limit") => s("refuse"),
        ("sandbox", "require_landlock") | ("acp", "allow_terminal") => Some(Value::Boolean(false)),
        ("agent", "network") => s("all"),
        ("agent", "profile") => s("auto"),
        ("agent", "discover") => Some(Value::Boolean(true)),
        ("ws", "max_in_flight") => int(32),
        ("ws", "max_connections") => int(64),
        ("ws", "max_pending_handshakes") => int(16),
        ("ws", "handshake_timeout_ms") => int(3000),
        ("ws", "write_stall_ms") => int(30_000),
        ("ws", "debounce_ms") => int(100),
        ("http", "max_sessions" | "max_connections") => int(64),
        ("http", "max_in_flight") => int(32),
        ("http", "max_pending_connections") => int(16),
        ("http", "request_timeout_ms") => int(10_000),
        ("http", "write_stall_ms") => int(30_000),
        ("http", "session_idle_ms") => int(1_800_000),
        ("ask", "timeout_secs") => int(120),
        ("notify", "acp" | "mcp") => Some(Value::Boolean(true)),
        ("vcs", "stage") => Some(Value::Boolean(false)),
        _ if GRANT_LISTS.contains(&(sec, key)) => Some(Value::Array(Vec::new())),
        _ => None,
    }
}

fn text(v: Option<&Value>) -> String {
    v.map_or("(unset)".into(), Value::to_string)
}

fn compare(sec: &str, key: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Item>) {
    let listed = matches!((sec, key), ("agent", "system_paths" | "network"));
    if (GRANT_LISTS.contains(&(sec, key)) || listed)
        && let (Some(la), Some(lb)) = (a.and_then(Value::as_array), b.and_then(Value::as_array))
    {
        return entries(sec, key, la, lb, out);
    }
    if (sec, key) == ("audit", "ship") {
        let none = Vec::new();
        let la = a.and_then(Value::as_array).unwrap_or(&none);
        let lb = b.and_then(Value::as_array).unwrap_or(&none);
        return safeguards(sec, key, la, lb, out);
    }
    let d = direction(sec, key, a, b);
    out.push(Item::new(d, sec, key, text(a), text(b)));
}

/// A list of safeguards (`[audit] ship` collectors) one by one: removed loosens, added
/// tightens.
fn safeguards(sec: &str, key: &str, a: &[Value], b: &[Value], out: &mut Vec<Item>) {
    for x in a.iter().filter(|x| !b.contains(x)) {
        out.push(Item::new(
            Direction::Loosens,
            sec,
            key,
            x.to_string(),
            "(removed)",
        ));
    }
    for x in b.iter().filter(|x| !a.contains(x)) {
        out.push(Item::new(
            Direction::Tightens,
            sec,
            key,
            "(absent)",
            x.to_string(),
        ));
    }
}

/// A list's entries one by one: added grants more (loosens), removed tightens.
fn entries(sec: &str, key: &str, a: &[Value], b: &[Value], out: &mut Vec<Item>) {
    for x in b.iter().filter(|x| !a.contains(x)) {
        out.push(Item::new(
            Direction::Loosens,
            sec,
            key,
            "(absent)",
            x.to_string(),
        ));
    }
    for x in a.iter().filter(|x| !b.contains(x)) {
        out.push(Item::new(
            Direction::Tightens,
            sec,
            key,
            x.to_string(),
            "(removed)",
        ));
    }
}

/// How a value change moves access or weakens a safeguard.
fn direction(sec: &str, key: &str, a: Option<&Value>, b: Option<&Value>) -> Direction {
    let looser = match (sec, key) {
        ("audit", "fsync") => rank_fsync(b).zip(rank_fsync(a)).map(|(x, y)| x < y),
        // Fewer checkpoints (0 = none) or heartbeats (0 = off) leave more unsealed.
        ("audit", "checkpoint_every" | "heartbeat_secs") => {
            zero_is_never(b).zip(zero_is_never(a)).map(|(x, y)| x > y)
        }
        ("audit", "signing_key" | "checkpoint_sink") => presence(a, b),
        ("backup", "keep_versions") => unset_is_max(b).zip(unset_is_max(a)).map(|(x, y)| x < y),
        ("backup", "max_age") => age(b).zip(age(a)).map(|(x, y)| x < y),
        ("backup", "on_limit") => Some(str_of(b) == Some("change-without-backup")),
        ("agent", "network") => rank_network(b).zip(rank_network(a)).map(|(x, y)| x > y),
        ("agent", "home" | "tmpdir") => presence(b, a),
        ("ws", "max_message_bytes" | "max_in_flight" | "max_connections")
        | ("ws", "max_pending_handshakes" | "handshake_timeout_ms" | "write_stall_ms")
        | ("http", "max_message_bytes" | "max_sessions" | "max_in_flight")
        | ("http", "max_connections" | "max_pending_connections" | "request_timeout_ms")
        | ("http", "write_stall_ms" | "session_idle_ms") => int(b).zip(int(a)).map(|(x, y)| x > y),
        _ => bool_key(key, a, b),
    };
    looser.map_or(Direction::Changes, Direction::wider)
}

/// Some(true) when the value was there and is gone (a safeguard removed).
fn presence(a: Option<&Value>, b: Option<&Value>) -> Option<bool> {
    match (a.is_some(), b.is_some()) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// `allow_*` and `discover` switched on grant more; `require_*` switched off does.
fn bool_key(key: &str, a: Option<&Value>, b: Option<&Value>) -> Option<bool> {
    let (Some(x), Some(y)) = (a?.as_bool(), b?.as_bool()) else {
        return None;
    };
    if key.starts_with("allow_") || key == "discover" {
        Some(y && !x)
    } else if key.starts_with("require_") || key.ends_with("auth") {
        Some(x && !y)
    } else {
        None
    }
}

fn str_of(v: Option<&Value>) -> Option<&str> {
    v?.as_str()
}

fn int(v: Option<&Value>) -> Option<i64> {
    v?.as_integer()
}

fn rank_fsync(v: Option<&Value>) -> Option<u8> {
    match str_of(v)? {
        "always" => Some(2),
        "batch" => Some(1),
        "never" => Some(0),
        _ => None,
    }
}

fn zero_is_never(v: Option<&Value>) -> Option<i64> {
    int(v).map(|n| if n == 0 { i64::MAX } else { n })
}

fn unset_is_max(v: Option<&Value>) -> Option<i64> {
    match v {
        None => Some(i64::MAX),
        Some(v) => v.as_integer(),
    }
}

/// `[backup] max_age` in seconds; unset keeps versions for ever.
fn age(v: Option<&Value>) -> Option<u64> {
    match v {
        None => Some(u64::MAX),
        Some(v) => fsgate_backup::config::parse_age(v.as_str()?)
            .ok()
            .map(|d| d.as_secs()),
    }
}

/// "none" < a list of ports < "all" (two port lists are compared entry by entry).
fn rank_network(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::String(s) if s == "none" => Some(0),
        Value::String(s) if s == "all" => Some(u64::MAX),
        Value::Array(_) => Some(1),
        _ => None,
    }
}
