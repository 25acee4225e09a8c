//! The test vectors in audit/vectors/: made here, deterministically (fixed key seed,
//! fixed timestamps), and checked against the committed files.
//!
//! `FSGATE_REGEN_VECTORS=1 cargo test --lib audit::tests::vectors` rewrites them.

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;
use serde_json::{Value, json};

use super::*;
use crate::checkpoint::Checkpoint;
use crate::merkle::{self, CompactRange};
use crate::note::{self, TreeHead};
use crate::proof;
use crate::record::{self, GENESIS_PREV};
use crate::tombstone::tombstone_object;
use crate::{canonical, keys};

const LOG_ID: &str = "00112233445566778899aabbccddeeff";
const NAME: &str = "audit.jsonl";

pub(crate) fn vectors_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("audit")
        .join("vectors")
}

/// The key the vectors are signed with (its seed is public: test use only).
pub(crate) fn vector_key() -> SigningKey {
    SigningKey::from_bytes(&std::array::from_fn(|i| i as u8))
}

fn ts(i: u64) -> String {
    let t = time::macros::datetime!(2026-01-01 00:00:00 UTC)
        + time::Duration::seconds(i as i64 * 7)
        + time::Duration::microseconds(i as i64 * 1234);
    canonical::format_ts(t)
}

fn map(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// Seven records: start, four requests (one refused), a rename, stop.
fn events() -> Vec<AuditEvent> {
    let req = |op: &str, path: &str| AuditEvent {
        session: "sess-7f3a".into(),
        transport: "acp".into(),
        peer: "pid=4242,uid=1000".into(),
        op: op.into(),
        path: Some(path.into()),
        decision: "allow".into(),
        rule: Some("workspace-rw".into()),
        outcome: "ok".into(),
        ..Default::default()
    };
    vec![
        AuditEvent::lifecycle(
            "start",
            map(
                json!({"check": "new", "format": 1, "fsgate": "0.1.0", "fsync": "always",
                       "pid": 4242, "signed": true}),
            ),
        ),
        AuditEvent {
            args: map(json!({"limit": 20, "line": 1})),
            bytes: Some(311),
            sha256: Some(hex::encode(fsgate_base::sha256::Sha256::digest(
                b"fn main() {}\n",
            ))),
            duration_us: 84,
            ..req("read", "src/main.rs")
        },
        AuditEvent {
            bytes: Some(24),
            sha256: Some("7d".repeat(32)),
            backup: Some("docs/naïve café.md@2026-01-01T00:00:14.002468Z".into()),
            duration_us: 912,
            ..req("write", "docs/naïve café.md")
        },
        AuditEvent {
            decision: "deny".into(),
            rule: Some("secret-files".into()),
            reason: Some("secrets are never readable".into()),
            outcome: "-32003".into(),
            duration_us: 11,
            ..req("read", ".env")
        },
        AuditEvent {
            args: map(json!({"ignoreCase": true, "maxResults": 10,
                             "pattern": "fn \"main\"\\s*\\(\t/\u{1}\u{7f}\u{2028}"})),
            duration_us: 2301,
            ..req("grep", "src")
        },
        AuditEvent {
            path2: Some("src/lib2.rs".into()),
            duration_us: 406,
            ..req("rename", "src/lib.rs")
        },
        AuditEvent::lifecycle("stop", serde_json::Map::new()),
    ]
}

/// A crash story in write-ahead records: an intent closed by its outcome, two left open
/// by a crash, the next start carrying them and reconciling one, and a last change
/// still in progress where the log ends.
fn intent_events() -> Vec<AuditEvent> {
    let change = |kind: &str, op: &str, path: &str, args: Value| AuditEvent {
        kind: kind.into(),
        session: "sess-7f3a".into(),
        transport: "acp".into(),
        peer: "pid=4242,uid=1000".into(),
        op: op.into(),
        path: Some(path.into()),
        args: map(args),
        decision: "allow".into(),
        rule: Some("workspace-rw".into()),
        ..Default::default()
    };
    let start = |check: &str, open: Value| {
        AuditEvent::lifecycle(
            "start",
            map(
                json!({"check": check, "format": 1, "fsgate": "0.1.0", "fsync": "always",
                       "openIntents": open, "pid": 4242, "signed": true}),
            ),
        )
    };
    vec![
        start("new", json!([])),
        AuditEvent {
            sha256: Some("7d".repeat(32)),
            ..change(
                "intent",
                "write_text_file",
                "a.txt",
                json!({"oldSha256": "6c".repeat(32)}),
            )
        },
        AuditEvent {
            outcome: "ok".into(),
            sha256: Some("7d".repeat(32)),
            ..change("request", "write_text_file", "a.txt", json!({"intent": 2}))
        },
        change(
            "intent",
            "rm",
            "b.txt",
            json!({"oldSha256": "5b".repeat(32)}),
        ),
        change("intent", "mkdir", "c", json!({})),
        start(
            "ok",
            json!([{"op": "rm", "path": "b.txt", "seq": 4}, {"op": "mkdir", "path": "c", "seq": 5}]),
        ),
        AuditEvent {
            op: "rm".into(),
            path: Some("b.txt".into()),
            ..AuditEvent::lifecycle(
                "reconciled",
                map(json!({"found": "applied", "intent": 4, "onDisk": {"path": "missing"}})),
            )
        },
        change("intent", "write_text_file", "d.txt", json!({})),
    ]
}

/// Requests whose long strings the writer cut (section 2, long strings): a 5000-byte
/// path with a two-byte character across the cut, a method name of 6000 bytes and a
/// pattern of 4097 in `args`; a path of exactly 4096 bytes is kept whole.
fn cut_events() -> Vec<AuditEvent> {
    let req = |op: String, path: String| AuditEvent {
        session: "sess-7f3a".into(),
        transport: "acp".into(),
        peer: "pid=4242,uid=1000".into(),
        op,
        path: Some(path),
        decision: "none".into(),
        outcome: "-32602".into(),
        ..Default::default()
    };
    let mut path = "d/".repeat(127);
    path.push('é');
    while path.len() < 5000 {
        path.push_str("ab/");
    }
    vec![
        AuditEvent::lifecycle("start", map(json!({"check": "new", "format": 1}))),
        req("read_text_file".into(), path),
        req("m".repeat(6000), "x".into()),
        AuditEvent {
            args: map(json!({"ignoreCase": false, "pattern": "(".repeat(4097)})),
            ..req("grep".into(), "src".into())
        },
        req("stat".into(), "w".repeat(4096)),
        AuditEvent::lifecycle("stop", serde_json::Map::new()),
    ]
}

/// A process of `fsgate run` (section 2, coalesced reads): its lookups and opens in
/// one `reads` record, then its refusal and its change one record each.
fn coalesced_events() -> Vec<AuditEvent> {
    let peer = r#"pid 812 ppid 790 exe "/usr/bin/sh" argv ["sh","-c","cat a.txt; cat .env; echo x > n.txt"]"#;
    let req = |op: &str, path: &str| AuditEvent {
        session: "run-0123456789ab".into(),
        transport: "view".into(),
        peer: peer.into(),
        op: op.into(),
        path: Some(path.into()),
        decision: "allow".into(),
        rule: Some("workspace".into()),
        outcome: "ok".into(),
        duration_us: 40,
        ..Default::default()
    };
    let sha = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
    let reads = AuditEvent {
        bytes: Some(12),
        duration_us: 420,
        details: map(json!({"count": 5, "from": ts(2), "until": ts(2),
            "reads": {"ls": [["", 1]], "open": [["a.txt", 2, 12, sha, 1]], "stat": [["a.txt", 2]]}})),
        path: None,
        ..req("reads", "")
    };
    let refused = AuditEvent {
        decision: "deny".into(),
        rule: Some("secrets:dotenv".into()),
        reason: Some("secret".into()),
        outcome: "-32003".into(),
        ..req("stat", ".env")
    };
    let intent = AuditEvent {
        kind: "intent".into(),
        duration_us: 0,
        ..req("write_text_file", "n.txt")
    };
    let outcome = AuditEvent {
        args: map(json!({"intent": 4})),
        ..req("write_text_file", "n.txt")
    };
    vec![
        AuditEvent::lifecycle("start", map(json!({"check": "new", "format": 1}))),
        reads,
        refused,
        intent,
        outcome,
        AuditEvent::lifecycle("stop", serde_json::Map::new()),
    ]
}

/// As [`cut_events`], but record 3 lists its cut with a length a writer never cuts at
/// (4000 bytes: kept whole): hashed and chained correctly, and still not a record.
fn forged_cut_events() -> Vec<AuditEvent> {
    let mut evs = cut_events();
    let Some(forged) = evs[2].bounded() else {
        return evs;
    };
    let mut forged = forged;
    forged.details["cut"]["/op"]["bytes"] = json!(4000);
    evs[2] = forged;
    evs
}

const POLICY_SHA: &str = "4f4ae2c6b5a4d04b6f3e3e6a8ad1c22e6d2f1f7fcb0b0e3ba3ed77c9d0b5d5a1";

/// Seals `evs` into lines (with `\n`); `log_at` says which records start a file.
fn seal_all(evs: &[AuditEvent], log_at: &[usize]) -> Vec<(String, [u8; 32])> {
    let mut prev = GENESIS_PREV;
    let mut out = Vec::new();
    for (i, ev) in evs.iter().enumerate() {
        let seq = i as u64 + 1;
        let log = log_at.contains(&i).then_some(LOG_ID);
        let (line, hash) = record::seal(seq, &ts(seq), log, &ev.body(POLICY_SHA), &prev);
        out.push((String::from_utf8(line).unwrap_or_default(), hash));
        prev = hash;
    }
    out
}

/// The Merkle tree over `lines` (each with its `\n`).
fn tree_of(lines: &[String]) -> CompactRange {
    let mut tree = CompactRange::default();
    for l in lines {
        tree.push(merkle::leaf_hash(l.trim_end_matches('\n').as_bytes()));
    }
    tree
}

/// A signed checkpoint of the last of `lines` that commits to the tree over `tree_lines`
/// (the same lines, unless a case forges the tree).
fn tree_checkpoint(lines: &[String], tree_lines: &[String], head: &[u8; 32]) -> String {
    let tree = tree_of(tree_lines);
    let seq = lines.len() as u64;
    let head = hex::encode(head);
    let ts = ts(seq + 1);
    let cp = Checkpoint::build(
        LOG_ID,
        (seq, &head),
        "shutdown",
        &ts,
        Some(&tree),
        Some(&vector_key()),
    );
    format!("{}\n", cp.to_line())
}

fn checkpoint(seq: u64, hash: &[u8; 32], key: Option<&SigningKey>) -> String {
    let cp = Checkpoint::at(
        LOG_ID,
        seq,
        &hex::encode(hash),
        "shutdown",
        &ts(seq + 1),
        key,
    );
    format!("{}\n", cp.to_line())
}

/// A case: its files (name, content), and what verify must say.
type Case = (Vec<(String, String)>, Value);

/// Every case, and what verify must say (with the vector key pinned).
pub(crate) fn cases() -> BTreeMap<&'static str, Case> {
    let key = vector_key();
    let recs = seal_all(&events(), &[0]);
    let lines: Vec<String> = recs.iter().map(|r| r.0.clone()).collect();
    let last = recs[6].1;
    let good_cp = tree_checkpoint(&lines, &lines, &last);
    let file = |ls: &[String]| ls.concat();
    let cp_name = format!("{NAME}.checkpoint");
    let log_and_cp = |ls: &[String], cp: &str| {
        vec![
            (NAME.to_owned(), file(ls)),
            (cp_name.clone(), cp.to_owned()),
        ]
    };
    let intact = json!({"verdict": "intact"});
    let bad = |kind: &str, seq: Option<u64>, line: Option<u64>| json!({"verdict": "tampered", "kind": kind, "seq": seq, "line": line});
    let mut c = BTreeMap::new();
    c.insert("valid", (log_and_cp(&lines, &good_cp), intact.clone()));
    let mut other = lines.clone();
    other[3] = other[3].replace("\"decision\":\"deny\"", "\"decision\":\"allow\"");
    let forged_tree = tree_checkpoint(&lines, &other, &last);
    c.insert(
        "merkle_root_forged",
        (
            log_and_cp(&lines, &forged_tree),
            bad("replaced", Some(7), Some(1)),
        ),
    );

    let mut edited = lines.clone();
    edited[3] = edited[3].replace("\"decision\":\"deny\"", "\"decision\":\"allow\"");
    c.insert(
        "edited",
        (
            log_and_cp(&edited, &good_cp),
            bad("modified", Some(4), Some(4)),
        ),
    );

    let mut deleted = lines.clone();
    deleted.remove(3);
    c.insert(
        "deleted",
        (
            log_and_cp(&deleted, &good_cp),
            bad("missing", Some(5), Some(4)),
        ),
    );

    let mut swapped = lines.clone();
    swapped.swap(3, 4);
    c.insert(
        "swapped",
        (
            log_and_cp(&swapped, &good_cp),
            bad("reordered", Some(5), Some(4)),
        ),
    );

    c.insert(
        "truncated",
        (
            log_and_cp(&lines[..5], &good_cp),
            bad("truncated", Some(7), Some(1)),
        ),
    );

    let mut torn = lines[..6].concat();
    torn.push_str(&lines[6][..40]);
    c.insert(
        "torn",
        (
            vec![(NAME.to_owned(), torn), (cp_name.clone(), good_cp.clone())],
            bad("truncated", Some(7), Some(7)),
        ),
    );

    let mut malformed = lines.clone();
    malformed[2] = malformed[2].replacen("\"op\":\"write\"", "\"op\": \"write\"", 1);
    c.insert(
        "malformed",
        (
            log_and_cp(&malformed, &good_cp),
            bad("malformed", None, Some(3)),
        ),
    );

    // A forger edits record 4 and re-computes every hash after it.
    let mut evs = events();
    evs[3].decision = "allow".into();
    evs[3].outcome = "ok".into();
    let forged: Vec<String> = seal_all(&evs, &[0]).into_iter().map(|r| r.0).collect();
    let forged_last = seal_all(&evs, &[0])[6].1;
    c.insert(
        "rechained",
        (
            log_and_cp(&forged, &good_cp),
            bad("replaced", Some(7), Some(1)),
        ),
    );
    let other = SigningKey::from_bytes(&[0xee; 32]);
    c.insert(
        "rechained_resigned",
        (
            log_and_cp(&forged, &checkpoint(7, &forged_last, Some(&other))),
            bad("bad_signature", Some(7), Some(1)),
        ),
    );
    c.insert(
        "rechained_unsigned",
        (
            log_and_cp(&forged, &checkpoint(7, &forged_last, None)),
            bad("bad_signature", Some(7), Some(1)),
        ),
    );

    // Rotated: records 1-4 in NAME.000000000001, 5-7 in NAME (record 5 names the log).
    let rot = seal_all(&events(), &[0, 4]);
    let rl: Vec<String> = rot.iter().map(|r| r.0.clone()).collect();
    let rot_cp = checkpoint(7, &rot[6].1, Some(&key));
    let first = format!("{NAME}.000000000001");
    let rotated = vec![
        (first.clone(), rl[..4].concat()),
        (NAME.to_owned(), rl[4..].concat()),
        (cp_name.clone(), rot_cp.clone()),
    ];
    c.insert("rotated", (rotated, intact.clone()));
    c.insert(
        "rotated_gap",
        (
            vec![
                (first.clone(), rl[..4].concat()),
                (NAME.to_owned(), rl[5..].concat()),
                (cp_name.clone(), rot_cp.clone()),
            ],
            bad("gap", Some(6), Some(1)),
        ),
    );
    let tomb = |k: Option<&SigningKey>| {
        let obj = tombstone_object(
            LOG_ID,
            (1, 4, &hex::encode(rot[3].1)),
            &ts(20),
            "2026-01-02T00:00:00.000000Z",
            vec![json!({"name": first, "first_seq": 1, "last_seq": 4,
                        "sha256": hex::encode(fsgate_base::sha256::Sha256::digest(rl[..4].concat().as_bytes()))})],
            k,
        );
        format!(
            "{}\n",
            String::from_utf8_lossy(&canonical::to_vec(&Value::Object(obj)))
        )
    };
    let pruned = |t: Option<String>| {
        let mut files = vec![
            (NAME.to_owned(), rl[4..].concat()),
            (cp_name.clone(), rot_cp.clone()),
        ];
        if let Some(t) = t {
            files.push((format!("{NAME}.tombstones"), t));
        }
        files
    };
    c.insert("pruned", (pruned(Some(tomb(Some(&key)))), intact.clone()));

    let ir = seal_all(&intent_events(), &[0]);
    let il: Vec<String> = ir.iter().map(|r| r.0.clone()).collect();
    let icp = checkpoint(ir.len() as u64, &ir[ir.len() - 1].1, Some(&key));
    c.insert(
        "intents",
        (
            log_and_cp(&il, &icp),
            json!({"verdict": "intact", "open_intents": [
                {"seq": 5, "passed_start": 6}, {"seq": 8, "passed_start": null}]}),
        ),
    );
    let cut = |evs: &[AuditEvent]| -> Vec<(String, String)> {
        let recs = seal_all(evs, &[0]);
        let ls: Vec<String> = recs.iter().map(|r| r.0.clone()).collect();
        log_and_cp(&ls, &tree_checkpoint(&ls, &ls, &recs[recs.len() - 1].1))
    };
    c.insert("cut", (cut(&cut_events()), intact.clone()));
    c.insert("coalesced", (cut(&coalesced_events()), intact.clone()));
    c.insert(
        "cut_forged",
        (cut(&forged_cut_events()), bad("malformed", None, Some(3))),
    );
    c.insert(
        "pruned_without_tombstone",
        (pruned(None), bad("missing", Some(5), Some(1))),
    );
    c.insert(
        "pruned_unsigned_tombstone",
        (
            pruned(Some(tomb(None))),
            bad("bad_signature", Some(4), Some(1)),
        ),
    );
    c
}

fn expected_json() -> String {
    let mut m = serde_json::Map::new();
    for (name, (_, want)) in cases() {
        m.insert(name.to_owned(), want);
    }
    format!(
        "{}\n",
        serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default()
    )
}

fn readme() -> String {
    let mut s = String::from(
        "# Audit log test vectors\n\n\
         Made by `crates/fsgate-audit/src/tests/vectors.rs` (deterministic: fixed key seed, fixed\n\
         timestamps); regenerate with `FSGATE_REGEN_VECTORS=1 cargo test --lib audit::tests::vectors`.\n\
         Each directory is a log. Verify with the public key in `pubkey.hex`, e.g.\n\
         `python3 audit/verify.py --pubkey audit/vectors/pubkey.hex audit/vectors/edited`.\n\
         `expected.json` gives the verdict and, for tampered ones, the first failure's kind,\n\
         seq and line (see FORMAT.md section 9). The signing key's seed is the bytes\n\
         0x00..0x1f: it is public, for tests only.\n\n\
         `proofs/` holds proofs about the `valid` log (record seq 4 in the tree of 7; the tree of\n\
         3 extended by the tree of 7) and forgeries of them; `proofs/expected.json` says which\n\
         `fsgate audit check-proof` and `verify.py --check-proof` must find valid, e.g.\n\
         `python3 audit/verify.py --check-proof audit/vectors/proofs/inclusion_valid.tlog-proof --pubkey audit/vectors/pubkey.hex`.\n\n\
         | case | what was done | expected |\n|---|---|---|\n",
    );
    for (name, (_, want)) in cases() {
        s.push_str(&format!("| `{name}` | {} | {want} |\n", describe(name)));
    }
    s
}

/// What was done to make each case.
fn describe(case: &str) -> &'static str {
    match case {
        "valid" => {
            "7 records, signed shutdown checkpoint at seq 7 committing to the Merkle tree over them"
        }
        "merkle_root_forged" => {
            "as valid, but the (signed) checkpoint's Merkle root is over another record 4"
        }
        "edited" => "record 4: `decision` deny changed to allow, hash left alone",
        "deleted" => "record 4 removed",
        "swapped" => "records 4 and 5 swapped",
        "truncated" => "records 6 and 7 cut off (whole lines); the checkpoint names seq 7",
        "torn" => "the last line cut after 40 bytes (a crash mid-write, or a cut)",
        "malformed" => "record 3 re-spaced (`\"op\": \"write\"`): same data, not canonical",
        "rechained" => "record 4 edited and every hash from 4 on recomputed; original checkpoint",
        "rechained_resigned" => "as rechained, with a new checkpoint signed by another key",
        "rechained_unsigned" => "as rechained, with a new unsigned checkpoint",
        "rotated" => "records 1-4 in `audit.jsonl.000000000001`, 5-7 in `audit.jsonl`",
        "rotated_gap" => "as rotated, but record 5 (first of the second file) removed",
        "pruned" => "as rotated, first file removed behind a signed tombstone",
        "pruned_without_tombstone" => "as rotated, first file removed, no tombstone",
        "pruned_unsigned_tombstone" => "as pruned, but the tombstone is unsigned",
        "cut" => {
            "long strings cut by the writer: a 5000-byte path (a two-byte character across the cut), a 6000-byte method name, a 4097-byte pattern in `args`; a 4096-byte path kept whole"
        }
        "coalesced" => {
            "a process of `fsgate run`: its lookups, listing and opens in one `reads` record (coalesced reads), then its refusal, intent and change one record each"
        }
        "cut_forged" => {
            "as cut, but record 3's `details.cut` gives a length of 4000 (a string kept whole), re-hashed and re-chained"
        }
        "intents" => {
            "write-ahead: intent 2 closed by its outcome; 4 and 5 open at a crash, carried by the start at 6, 4 reconciled (7), 5 never; 8 open where the log ends"
        }
        _ => "",
    }
}

/// Every file of the vectors: relative path -> content.
fn all_files() -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    out.insert(
        PathBuf::from("pubkey.hex"),
        format!("{}\n", hex::encode(vector_key().verifying_key().to_bytes())),
    );
    out.insert(PathBuf::from("expected.json"), expected_json());
    out.insert(PathBuf::from("README.md"), readme());
    for (name, (files, _)) in cases() {
        for (f, content) in files {
            out.insert(Path::new(name).join(f), content);
        }
    }
    let mut verdicts = serde_json::Map::new();
    for (name, (text, want)) in proof_cases() {
        out.insert(Path::new("proofs").join(name), text);
        verdicts.insert(name.to_owned(), Value::String(want.to_owned()));
    }
    let verdicts = serde_json::to_string_pretty(&Value::Object(verdicts)).unwrap_or_default();
    out.insert(
        PathBuf::from("proofs/expected.json"),
        format!("{verdicts}\n"),
    );
    out
}

/// A signed note for the tree over `lines`, by `key`.
fn note_for(lines: &[String], key: &SigningKey) -> String {
    let head = TreeHead {
        origin: note::origin(LOG_ID),
        size: lines.len() as u64,
        root: tree_of(lines).root(),
    };
    head.sign(Some(key))
}

/// Proofs over the `valid` log, and whether `check-proof` must find each valid.
pub(crate) fn proof_cases() -> BTreeMap<&'static str, (String, &'static str)> {
    let key = vector_key();
    let lines: Vec<String> = seal_all(&events(), &[0]).into_iter().map(|r| r.0).collect();
    let leaves: Vec<_> = lines
        .iter()
        .map(|l| merkle::leaf_hash(l.trim_end().as_bytes()))
        .collect();
    let rec = |i: usize| lines[i].trim_end().as_bytes().to_vec();
    let path = merkle::inclusion_proof(&leaves, 3).unwrap_or_default();
    let note7 = note_for(&lines, &key);
    let mut c = BTreeMap::new();
    let valid = proof::inclusion_text(&rec(3), 3, &path, &note7);
    c.insert("inclusion_valid.tlog-proof", (valid, "valid"));
    let edited = String::from_utf8_lossy(&rec(3)).replace("\"deny\"", "\"allow\"");
    let wrong_record = proof::inclusion_text(edited.as_bytes(), 3, &path, &note7);
    c.insert(
        "inclusion_wrong_record.tlog-proof",
        (wrong_record, "invalid"),
    );
    let mut bent = path.clone();
    bent[1][0] ^= 1;
    let wrong_path = proof::inclusion_text(&rec(3), 3, &bent, &note7);
    c.insert("inclusion_wrong_path.tlog-proof", (wrong_path, "invalid"));
    let note6 = note_for(&lines[..6], &key);
    let wrong_size = proof::inclusion_text(&rec(3), 3, &path, &note6);
    c.insert(
        "inclusion_wrong_tree_size.tlog-proof",
        (wrong_size, "invalid"),
    );
    let forged = note_for(&lines, &SigningKey::from_bytes(&[7; 32]));
    let forged = proof::inclusion_text(&rec(3), 3, &path, &forged);
    c.insert("inclusion_forged_signature.tlog-proof", (forged, "invalid"));
    let cpath = merkle::consistency_proof(&leaves, 3).unwrap_or_default();
    let note3 = note_for(&lines[..3], &key);
    let consistent = proof::consistency_text(&note3, &note7, &cpath);
    c.insert("consistency_valid.proof", (consistent, "valid"));
    let mut other = lines.clone();
    other[1] = other[1].replace("src/main.rs", "src/mane.rs");
    let rewritten = proof::consistency_text(&note_for(&other[..3], &key), &note7, &cpath);
    c.insert(
        "consistency_rewritten_history.proof",
        (rewritten, "invalid"),
    );
    c
}

#[test]
fn the_proof_vectors_check_as_expected() {
    let key = vector_key().verifying_key();
    for (name, (text, want)) in proof_cases() {
        let got = match proof::check(&text, &key) {
            Ok(_) => "valid",
            Err(proof::ProofError::Invalid(_)) => "invalid",
            Err(e) => panic!("{name}: {e}"),
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn committed_vectors_are_the_generated_ones() {
    let dir = vectors_dir();
    let files = all_files();
    if std::env::var_os("FSGATE_REGEN_VECTORS").is_some() {
        if dir.exists() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    std::fs::remove_dir_all(&p).unwrap();
                }
            }
        }
        for (rel, content) in &files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, content).unwrap();
        }
    }
    for (rel, content) in &files {
        let on_disk = std::fs::read_to_string(dir.join(rel)).unwrap_or_default();
        assert_eq!(
            &on_disk,
            content,
            "audit/vectors/{} is stale: run FSGATE_REGEN_VECTORS=1 cargo test --lib audit::tests::vectors",
            rel.display()
        );
    }
}

#[test]
fn the_rust_verifier_gives_every_expected_verdict() {
    let pinned =
        keys::parse_public_key(&hex::encode(vector_key().verifying_key().to_bytes())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, (files, want)) in cases() {
        let case = dir.path().join(name);
        std::fs::create_dir_all(&case).unwrap();
        for (f, content) in files {
            std::fs::write(case.join(f), content).unwrap();
        }
        let opts = VerifyOptions {
            pinned: Some(pinned),
            ..Default::default()
        };
        let rep = verify_paths(&[case], &opts);
        assert_eq!(
            summary(&serde_json::to_value(&rep).unwrap()),
            want,
            "case {name}"
        );
    }
}

/// The part of a report that the expected verdicts pin down.
pub(crate) fn summary(report: &Value) -> Value {
    let s = &report["series"][0];
    let verdict = report["verdict"].clone();
    if verdict == "intact" {
        let open = &s["open_intents"];
        if open.as_array().is_some_and(|a| !a.is_empty()) {
            return json!({"verdict": verdict, "open_intents": open});
        }
        return json!({"verdict": verdict});
    }
    let e = &s["error"];
    json!({"verdict": verdict, "kind": e["kind"], "seq": e["seq"], "line": e["line"]})
}
