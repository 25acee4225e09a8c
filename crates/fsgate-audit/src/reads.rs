//! What the agents read, for `fsgate audit report`: the file reads answered (what an
//! agent saw) per file and per session, and apart from them the reads refused because
//! the file is a secret (by its name or its content). Every collection is capped, and
//! what is left out is counted.

use std::collections::BTreeMap;

use serde_json::Value;

use super::rows::{MAX_ROWS, text};

/// The operations that read a file's content (`open`: a process's, through `fsgate
/// run`'s view; its reads are counted in coalesced `reads` records).
const READ_OPS: &[&str] = &["read_text_file", "read_file", "open"];

/// Reads of one file, or by one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReadCounts {
    /// Reads answered.
    pub count: u64,
    /// Bytes they returned.
    pub bytes: u64,
    /// The first read's time.
    pub first_ts: String,
    /// The last read's time.
    pub last_ts: String,
    /// Reads whose record verification does not vouch for.
    pub unverified: u64,
}

impl ReadCounts {
    fn add(&mut self, v: &Value, verified: bool) {
        let bytes = v.get("bytes").and_then(Value::as_u64).unwrap_or_default();
        let ts = text(v, "ts");
        self.add_counted((ts, ts), (1, bytes), verified);
    }

    /// Counts `n` reads of `bytes` in all, recorded at `ts`.
    /// `n` reads of `bytes` made from `first` to `last`.
    fn add_counted(&mut self, (first, last): (&str, &str), (n, bytes): (u64, u64), verified: bool) {
        self.count += n;
        self.bytes += bytes;
        if self.first_ts.is_empty() || first < self.first_ts.as_str() {
            self.first_ts = first.to_owned();
        }
        if last > self.last_ts.as_str() {
            self.last_ts = last.to_owned();
        }
        self.unverified += u64::from(!verified);
    }
}

/// A read refused because the file is a secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretRefusal {
    /// Which log (index into the report's logs).
    pub log: usize,
    /// The record's seq.
    pub seq: u64,
    /// When.
    pub ts: String,
    /// Who asked.
    pub session: String,
    /// The operation.
    pub op: String,
    /// The file.
    pub path: String,
    /// The rule that refused it (`secrets:<id>` or `content:<id>`).
    pub rule: String,
    /// Whether verification vouches for the record.
    pub verified: bool,
}

/// Everything read, and the secrets refused.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reads {
    /// Reads answered, by file.
    pub by_file: BTreeMap<String, ReadCounts>,
    /// Reads of files not listed (over [`MAX_ROWS`] files).
    pub files_omitted: u64,
    /// Reads answered, by session.
    pub by_session: BTreeMap<String, ReadCounts>,
    /// Reads of sessions not listed.
    pub sessions_omitted: u64,
    /// Reads refused because the file is a secret, in log order.
    pub secrets: Vec<SecretRefusal>,
    /// Such refusals not listed.
    pub secrets_omitted: u64,
}

/// Whether a refusal's rule is one of the secret rules: a secret name or secret content.
pub(crate) fn is_secret_rule(rule: &str) -> bool {
    rule.starts_with("secrets:") || rule.starts_with("content:")
}

impl Reads {
    /// Takes in one request record of log number `log`.
    pub(crate) fn observe(&mut self, log: usize, v: &Value, verified: bool) {
        if text(v, "op") == crate::coalesce::OP_READS {
            return self.observe_coalesced(v, verified);
        }
        // Any request for a secret refused, whatever its op: through the view `cat .env`
        // is refused at its lookup (`stat`), before any read.
        if text(v, "decision") == "deny" && is_secret_rule(text(v, "rule")) {
            return self.secret(log, v, verified);
        }
        let read = READ_OPS.contains(&text(v, "op"));
        if !read || text(v, "decision") != "allow" || text(v, "outcome") != "ok" {
            return;
        }
        let path = text(v, "path");
        count_in(
            &mut self.by_file,
            &mut self.files_omitted,
            path,
            v,
            verified,
        );
        let session = text(v, "session");
        let (map, omitted) = (&mut self.by_session, &mut self.sessions_omitted);
        count_in(map, omitted, session, v, verified);
    }

    /// The content reads a `reads` record holds: `[path, count, bytes, sha256]` each.
    fn observe_coalesced(&mut self, v: &Value, verified: bool) {
        let Some(reads) = v["details"]["reads"].as_object() else {
            return;
        };
        // When the reads were made (`from`, `until`), not when their record was written,
        // up to a second after.
        let ts = text(v, "ts");
        let when = |k: &str| {
            v["details"][k]
                .as_str()
                .filter(|t| !t.is_empty())
                .unwrap_or(ts)
        };
        let (span, session) = ((when("from"), when("until")), text(v, "session"));
        for (op, list) in reads {
            if !READ_OPS.contains(&op.as_str()) {
                continue;
            }
            for e in list.as_array().into_iter().flatten() {
                let Some(path) = e[0].as_str() else { continue };
                let counted = (e[1].as_u64().unwrap_or(1), e[2].as_u64().unwrap_or(0));
                for (map, omitted, key) in [
                    (&mut self.by_file, &mut self.files_omitted, path),
                    (&mut self.by_session, &mut self.sessions_omitted, session),
                ] {
                    if !map.contains_key(key) && map.len() >= MAX_ROWS {
                        *omitted += counted.0;
                        continue;
                    }
                    let c = map.entry(key.to_owned()).or_default();
                    c.add_counted(span, counted, verified);
                }
            }
        }
    }

    fn secret(&mut self, log: usize, v: &Value, verified: bool) {
        if self.secrets.len() >= MAX_ROWS {
            self.secrets_omitted += 1;
            return;
        }
        self.secrets.push(SecretRefusal {
            log,
            seq: v.get("seq").and_then(Value::as_u64).unwrap_or_default(),
            ts: text(v, "ts").to_owned(),
            session: text(v, "session").to_owned(),
            op: text(v, "op").to_owned(),
            path: text(v, "path").to_owned(),
            rule: text(v, "rule").to_owned(),
            verified,
        });
    }
}

/// Counts a read under `key` in `map`, or as omitted once `map` is full.
fn count_in(
    map: &mut BTreeMap<String, ReadCounts>,
    omitted: &mut u64,
    key: &str,
    v: &Value,
    verified: bool,
) {
    if !map.contains_key(key) && map.len() >= MAX_ROWS {
        *omitted += 1;
        return;
    }
    map.entry(key.to_owned()).or_default().add(v, verified);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(seq: u64, ts: &str, session: &str, path: &str, decision: &str, rule: &str) -> Value {
        json!({"seq": seq, "ts": ts, "kind": "request", "session": session, "op": "read_text_file",
               "path": path, "decision": decision, "rule": rule,
               "outcome": if decision == "allow" { "ok" } else { "refused" }, "bytes": 10})
    }

    #[test]
    fn reads_count_per_file_and_session_and_secrets_stand_apart() {
        let mut r = Reads::default();
        let (t1, t2) = ("2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:02.000000Z");
        r.observe(0, &read(1, t2, "a", "x.txt", "allow", "all"), true);
        r.observe(0, &read(2, t1, "b", "x.txt", "allow", "all"), false);
        r.observe(0, &read(3, t2, "a", ".env", "deny", "secrets:dotenv"), true);
        r.observe(
            0,
            &read(4, t2, "a", "k.txt", "deny", "content:aws-access-key-id"),
            true,
        );
        r.observe(
            0,
            &read(5, t2, "a", "../etc", "deny", "workspace-boundary"),
            true,
        );
        let x = &r.by_file["x.txt"];
        assert_eq!((x.count, x.bytes, x.unverified), (2, 20, 1));
        assert_eq!((x.first_ts.as_str(), x.last_ts.as_str()), (t1, t2));
        assert_eq!(r.by_session["a"].count, 1);
        assert_eq!(r.by_session["b"].count, 1);
        let rules: Vec<&str> = r.secrets.iter().map(|s| s.rule.as_str()).collect();
        assert_eq!(rules, ["secrets:dotenv", "content:aws-access-key-id"]);
        assert_eq!(r.by_file.len(), 1, "refusals are not reads");
    }

    #[test]
    fn a_secret_refused_at_its_lookup_is_a_secret_refused() {
        // Through the view, `cat .env` is refused at the lookup, a `stat`.
        let mut r = Reads::default();
        let ts = "2026-01-01T00:00:01.000000Z";
        let mut lookup = read(1, ts, "run-a", ".env", "deny", "secrets:dotenv");
        lookup["op"] = "stat".into();
        r.observe(0, &lookup, true);
        let mut other = read(2, ts, "run-a", "../x", "deny", "workspace-boundary");
        other["op"] = "stat".into();
        r.observe(0, &other, true);
        let ops: Vec<(&str, &str)> = (r.secrets.iter())
            .map(|s| (s.op.as_str(), s.path.as_str()))
            .collect();
        assert_eq!(ops, [("stat", ".env")]);
    }

    #[test]
    fn a_coalesced_records_reads_are_placed_when_they_were_made() {
        // Written a second after its reads: first and last are its `from` and `until`.
        let mut r = Reads::default();
        let v = json!({"seq": 3, "ts": "2026-01-01T00:00:02.000000Z", "kind": "request",
            "session": "run-a", "op": crate::coalesce::OP_READS, "decision": "allow",
            "outcome": "ok", "details": {"from": "2026-01-01T00:00:00.500000Z",
            "until": "2026-01-01T00:00:01.250000Z",
            "reads": {"open": [["a.txt", 2, 10, "00"]], "stat": [["b.txt", 1]]}}});
        r.observe(0, &v, true);
        let a = &r.by_file["a.txt"];
        assert_eq!((a.count, a.bytes), (2, 10));
        assert_eq!(a.first_ts, "2026-01-01T00:00:00.500000Z");
        assert_eq!(a.last_ts, "2026-01-01T00:00:01.250000Z");
        assert!(!r.by_file.contains_key("b.txt"), "a lookup is no read");
        assert_eq!(
            r.by_session["run-a"].first_ts,
            "2026-01-01T00:00:00.500000Z"
        );
    }

    #[test]
    fn files_past_the_cap_are_counted() {
        let mut r = Reads::default();
        let ts = "2026-01-01T00:00:01.000000Z";
        for i in 0..MAX_ROWS + 3 {
            r.observe(0, &read(1, ts, "a", &format!("f{i}"), "allow", "all"), true);
        }
        assert_eq!((r.by_file.len(), r.files_omitted), (MAX_ROWS, 3));
        assert_eq!(r.by_session["a"].count, (MAX_ROWS + 3) as u64);
    }
}
