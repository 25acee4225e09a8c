//! Allowed reads coalesced per process (audit/FORMAT.md section 2, "Coalesced reads").
//!
//! A process under `fsgate run` makes thousands of lookups, listings and opens: one
//! record each (300-500 bytes, most of it the process's name) would make a walk of
//! 10,000 files cost many megabytes of log. An allowed read that only names paths is
//! instead counted in its process's group (same session, transport, peer, rule and
//! policy); a group becomes one `reads` record that names every path with its count,
//! once its entries fill `MAX_ENTRY_BYTES`, once it is `WINDOW` old, before any
//! other record of the same process (so its reads come before its next change or
//! refusal in the log), and before the log's `stop` record. Changes, refusals and
//! anything else are never coalesced.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::record::{AuditEvent, KIND_REQUEST};

/// The `op` of a coalesced record.
pub const OP_READS: &str = "reads";
/// How long a group waits at most before it is recorded.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);
/// The written bytes of a group's entries at most: with the process's name (at most
/// 4 KiB) the record stays within the 32 KiB of any request record.
const MAX_ENTRY_BYTES: usize = 24 * 1024;
/// The entries of every group held at once at most; past it all are recorded now.
const MAX_HELD_BYTES: usize = 1024 * 1024;

/// What makes two reads one group's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    session: String,
    transport: String,
    peer: String,
    rule: Option<String>,
    policy: Arc<str>,
    /// `ok`, or not-found (a lookup of a name that is not there).
    outcome: String,
    /// The workspace the paths lie in, when several are served (`args.workspace`).
    workspace: Option<String>,
}

/// One path read by one operation (with the content's digest where it was hashed).
type Entry = (String, String, Option<String>);

/// The reads of one process not yet recorded.
#[derive(Debug)]
struct Group {
    opened: Instant,
    from: SystemTime,
    until: SystemTime,
    count: u64,
    bytes: Option<u64>,
    duration_us: u64,
    /// (op, path, sha256) -> (count, bytes, opens whose content was remembered clean).
    entries: BTreeMap<Entry, (u64, u64, u64)>,
    written: usize,
}

/// What is held, and what the flushing thread is told.
#[derive(Debug, Default)]
struct Held {
    groups: HashMap<Key, Group>,
    written: usize,
    /// Groups full or past their window, for the flushing thread.
    ready: Vec<AuditEvent>,
    ready_bytes: usize,
    stopped: bool,
}

/// The groups of one log, shared by its appenders and its flushing thread.
#[derive(Debug, Default)]
pub(crate) struct Coalescer {
    held: Mutex<Held>,
    cv: Condvar,
    /// Whether any group is held (read without the lock on every append).
    any: AtomicBool,
}

/// What [`Coalescer::add`] did.
pub(crate) enum Added {
    /// Held; the events are groups to append now (the flushing thread is behind).
    Held(Vec<AuditEvent>),
    /// Not a read that may be coalesced (or the coalescer is stopped).
    NotMine,
}

/// The outcome of a lookup of a name that is not there (a build probes many).
fn not_found() -> String {
    fsgate_base::error::code::NOT_FOUND.to_string()
}

/// The one argument a coalesced read may have and lose: its content was found clean
/// before (an `open`'s). Any other but the workspace's name (an open for writing) keeps
/// the record its own.
const REMEMBERED: &str = "contentRemembered";
/// The argument naming the workspace among several; the group's, kept on its record.
const WORKSPACE: &str = "workspace";

/// Whether `ev` is an allowed read that names nothing but its path.
fn coalescible(ev: &AuditEvent) -> bool {
    ev.kind == KIND_REQUEST
        && ev.decision == "allow"
        && (ev.outcome == "ok" || ev.outcome == not_found())
        && ev.path.is_some()
        && ev.path2.is_none()
        && ev.backup.is_none()
        && ev.details.is_empty()
        && ev.args.keys().all(|k| k == REMEMBERED || k == WORKSPACE)
        && ev.args.get(WORKSPACE).is_none_or(Value::is_string)
        && !ev.op.is_empty()
        && crate::record::ChangeOp::from_name(&ev.op).is_none()
}

impl Coalescer {
    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds `ev` (decided under `policy`) in its process's group.
    pub(crate) fn add(&self, ev: &AuditEvent, policy: Arc<str>) -> Added {
        let Some(path) = ev.path.as_ref().filter(|_| coalescible(ev)) else {
            return Added::NotMine;
        };
        let mut held = self.lock();
        if held.stopped {
            return Added::NotMine;
        }
        let key = Key {
            session: ev.session.clone(),
            transport: ev.transport.clone(),
            peer: ev.peer.clone(),
            rule: ev.rule.clone(),
            policy,
            outcome: ev.outcome.clone(),
            workspace: ev
                .args
                .get(WORKSPACE)
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        let entry = (ev.op.clone(), path.clone(), ev.sha256.clone());
        let size = entry_size(&entry);
        let full = held
            .groups
            .get(&key)
            .is_some_and(|g| g.written + size > MAX_ENTRY_BYTES);
        if full && let Some(g) = held.groups.remove(&key) {
            held.ready_up(&key, g);
        }
        let now = SystemTime::now();
        // The flushing thread sleeps until the oldest group's window ends: only a first
        // group, or a group made ready, changes when it must wake (a wake-up per read
        // would cost two context switches on every lookup and open).
        let first = held.groups.is_empty();
        let g = held.groups.entry(key).or_insert_with(|| Group::new(now));
        let new = g.add(entry, ev, now, size);
        held.written += new;
        if held.written > MAX_HELD_BYTES {
            held.ready_all();
        }
        self.any.store(true, Ordering::Release);
        if first || !held.ready.is_empty() {
            self.cv.notify_one();
        }
        let behind = held.ready_bytes > MAX_HELD_BYTES;
        Added::Held(if behind {
            held.take_ready()
        } else {
            Vec::new()
        })
    }

    /// The groups of the process `peer` of `session`, as records to append before one
    /// of its own.
    pub(crate) fn take_for(&self, session: &str, peer: &str) -> Vec<AuditEvent> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut held = self.lock();
        let keys: Vec<Key> = (held.groups.keys())
            .filter(|k| k.session == session && k.peer == peer)
            .cloned()
            .collect();
        for k in keys {
            if let Some(g) = held.groups.remove(&k) {
                held.ready_up(&k, g);
            }
        }
        held.take_ready()
    }

    /// Stops holding anything; every group, as records to append now.
    pub(crate) fn stop(&self) -> Vec<AuditEvent> {
        let mut held = self.lock();
        held.stopped = true;
        held.ready_all();
        self.cv.notify_all();
        held.take_ready()
    }

    /// Waits until a group is due (full, or past its window): the records to append.
    /// None once stopped.
    pub(crate) fn due(&self) -> Option<Vec<AuditEvent>> {
        let mut held = self.lock();
        loop {
            if held.stopped {
                return None;
            }
            let now = Instant::now();
            let past: Vec<Key> = (held.groups.iter())
                .filter(|(_, g)| now >= g.opened + WINDOW)
                .map(|(k, _)| k.clone())
                .collect();
            for k in past {
                if let Some(g) = held.groups.remove(&k) {
                    held.ready_up(&k, g);
                }
            }
            if !held.ready.is_empty() {
                return Some(held.take_ready());
            }
            let next = held.groups.values().map(|g| g.opened + WINDOW).min();
            held = match next {
                Some(at) => {
                    let wait = at.saturating_duration_since(now);
                    let (h, _) = self
                        .cv
                        .wait_timeout(held, wait)
                        .unwrap_or_else(|p| p.into_inner());
                    h
                }
                None => self.cv.wait(held).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

impl Held {
    fn ready_up(&mut self, key: &Key, g: Group) {
        self.written = self.written.saturating_sub(g.written);
        let ev = g.record(key);
        self.ready_bytes += ev_size(&ev);
        self.ready.push(ev);
    }

    fn ready_all(&mut self) {
        let all: Vec<(Key, Group)> = self.groups.drain().collect();
        for (k, g) in all {
            self.ready_up(&k, g);
        }
        // Oldest first, so the log keeps the order the reads were made in.
        self.ready.sort_by(|a, b| from_of(a).cmp(from_of(b)));
    }

    fn take_ready(&mut self) -> Vec<AuditEvent> {
        self.ready_bytes = 0;
        std::mem::take(&mut self.ready)
    }
}

fn from_of(ev: &AuditEvent) -> &str {
    ev.details
        .get("from")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Group {
    fn new(now: SystemTime) -> Group {
        Group {
            opened: Instant::now(),
            from: now,
            until: now,
            count: 0,
            bytes: None,
            duration_us: 0,
            entries: BTreeMap::new(),
            written: 0,
        }
    }

    /// Counts one read; the written bytes its entry added (0 if it was there).
    fn add(&mut self, entry: Entry, ev: &AuditEvent, now: SystemTime, size: usize) -> usize {
        self.until = now;
        self.count += 1;
        self.duration_us = self.duration_us.saturating_add(ev.duration_us);
        if let Some(b) = ev.bytes {
            self.bytes = Some(self.bytes.unwrap_or(0).saturating_add(b));
        }
        let slot = self.entries.entry(entry);
        let new = matches!(slot, std::collections::btree_map::Entry::Vacant(_));
        let (n, bytes, remembered) = slot.or_default();
        *n += 1;
        *bytes = bytes.saturating_add(ev.bytes.unwrap_or(0));
        *remembered += u64::from(ev.args.get(REMEMBERED) == Some(&Value::Bool(true)));
        if new {
            self.written += size;
            size
        } else {
            0
        }
    }

    /// The group as one `reads` record.
    fn record(self, key: &Key) -> AuditEvent {
        let mut reads: Map<String, Value> = Map::new();
        for ((op, path, sha), (n, bytes, remembered)) in self.entries {
            let item = match sha {
                Some(sha) => json!([path, n, bytes, sha, remembered]),
                None => json!([path, n]),
            };
            if let Value::Array(list) = reads.entry(op).or_insert_with(|| json!([])) {
                list.push(item);
            }
        }
        let mut details = Map::new();
        details.insert("count".into(), self.count.into());
        details.insert("from".into(), ts(self.from).into());
        details.insert("until".into(), ts(self.until).into());
        details.insert("reads".into(), Value::Object(reads));
        let mut args = Map::new();
        if let Some(ws) = &key.workspace {
            args.insert(WORKSPACE.into(), ws.clone().into());
        }
        AuditEvent {
            session: key.session.clone(),
            transport: key.transport.clone(),
            peer: key.peer.clone(),
            op: OP_READS.into(),
            decision: "allow".into(),
            rule: key.rule.clone(),
            outcome: key.outcome.clone(),
            args,
            bytes: self.bytes,
            duration_us: self.duration_us,
            details,
            policy_sha256: Some(Arc::clone(&key.policy)),
            ..Default::default()
        }
    }
}

/// `t` as a record's `ts`.
fn ts(t: SystemTime) -> String {
    super::canonical::format_ts(OffsetDateTime::from(t))
}

/// The bytes an entry takes in its record, about.
fn entry_size((op, path, sha): &Entry) -> usize {
    let digest = if sha.is_some() { 92 } else { 0 };
    super::cut::written_len(path) + op.len() / 4 + 12 + digest
}

/// The bytes a ready record holds, about.
fn ev_size(ev: &AuditEvent) -> usize {
    let entries: usize = ev
        .details
        .get("reads")
        .and_then(Value::as_object)
        .map(|m| {
            m.values()
                .filter_map(Value::as_array)
                .map(|a| a.len() * 24)
                .sum()
        })
        .unwrap_or(0);
    ev.peer.len() + ev.session.len() + entries + 256
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(peer: &str, op: &str, path: &str) -> AuditEvent {
        AuditEvent {
            session: "run-1".into(),
            transport: "view".into(),
            peer: peer.into(),
            op: op.into(),
            path: Some(path.into()),
            decision: "allow".into(),
            rule: Some("workspace".into()),
            outcome: "ok".into(),
            duration_us: 3,
            ..Default::default()
        }
    }

    fn held(c: &Coalescer, ev: &AuditEvent) {
        assert!(matches!(c.add(ev, Arc::from("p")), Added::Held(v) if v.is_empty()));
    }

    #[test]
    fn reads_of_one_process_are_one_record_naming_every_path_with_its_count() {
        let c = Coalescer::default();
        held(&c, &read("pid 1", "stat", "a"));
        held(&c, &read("pid 1", "stat", "a"));
        held(&c, &read("pid 1", "ls", ""));
        held(&c, &read("pid 2", "stat", "b"));
        let mut denied = read("pid 1", "stat", ".env");
        denied.decision = "deny".into();
        assert!(matches!(c.add(&denied, Arc::from("p")), Added::NotMine));
        let mine = c.take_for("run-1", "pid 1");
        assert_eq!(mine.len(), 1);
        let d = &mine[0].details;
        assert_eq!(d["count"], 3);
        assert_eq!(d["reads"], json!({"ls": [["", 1]], "stat": [["a", 2]]}));
        assert_eq!(mine[0].duration_us, 9);
        let rest = c.stop();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].peer, "pid 2");
        assert!(matches!(
            c.add(&read("pid 1", "stat", "a"), Arc::from("p")),
            Added::NotMine
        ));
    }

    #[test]
    fn reads_in_several_workspaces_are_a_group_each_naming_its_workspace() {
        let c = Coalescer::default();
        for ws in ["app", "lib", "app"] {
            let mut ev = read("pid 1", "stat", "a");
            ev.args.insert(WORKSPACE.into(), ws.into());
            held(&c, &ev);
        }
        let mut odd = read("pid 1", "stat", "a");
        odd.args.insert(WORKSPACE.into(), 7.into());
        assert!(matches!(c.add(&odd, Arc::from("p")), Added::NotMine));
        let mut mine = c.take_for("run-1", "pid 1");
        mine.sort_by(|a, b| {
            a.args[WORKSPACE]
                .to_string()
                .cmp(&b.args[WORKSPACE].to_string())
        });
        let named: Vec<(&Value, &Value)> = (mine.iter())
            .map(|e| (&e.args[WORKSPACE], &e.details["count"]))
            .collect();
        assert_eq!(
            named,
            [(&json!("app"), &json!(2)), (&json!("lib"), &json!(1))]
        );
    }

    #[test]
    fn a_full_group_is_ready_and_each_record_stays_bounded() {
        let c = Coalescer::default();
        for i in 0..5000 {
            held(&c, &read("pid 1", "stat", &format!("dir/file-{i:05}.txt")));
        }
        let ready = c.due().unwrap();
        assert!(ready.len() >= 4, "{}", ready.len());
        for ev in &ready {
            assert!(ev.body("").len() <= 28 * 1024, "{}", ev.body("").len());
        }
        let named: usize = ready
            .iter()
            .chain(&c.stop())
            .map(|e| e.details["reads"]["stat"].as_array().unwrap().len())
            .sum();
        assert_eq!(named, 5000);
    }
}
