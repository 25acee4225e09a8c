//! Reads of content from 1 MiB on: the content is hashed on a second thread while the
//! content rules, the text check, the window and the answer's size are decided on the
//! request's own thread. Each decision still holds, and the record names the digest of
//! the whole content read.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::view::read_records;
use crate::common::{Gate, policy_with};

/// Over 2 MiB of numbered lines (the gateway hashes beside the scan from 1 MiB on).
fn large_text() -> String {
    (0..40_000)
        .map(|i| format!("{i:08} 0123456789abcdef0123456789abcdef0123456789abcdef\n"))
        .collect()
}

/// The last record of a `read_text_file` of `rel`.
fn last_read_record(g: &Gate) -> Value {
    read_records(&g.audit_log)
        .into_iter()
        .rev()
        .find(|r| r["op"] == "read_text_file")
        .expect("a read_text_file record")
}

#[test]
fn a_large_read_answers_its_window_and_records_the_whole_contents_digest() {
    let g = Gate::start();
    let text = large_text();
    assert!(text.len() > 2 << 20);
    g.put("big.txt", &text);
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    let p = g.abs("big.txt");

    let whole = g.ok("fs/read_text_file", json!({"path": p}));
    assert!(
        whole["content"].as_str() == Some(text.as_str()),
        "whole file"
    );
    let rec = last_read_record(&g);
    assert_eq!(rec["sha256"], json!(digest), "{rec}");
    assert_eq!(rec["bytes"], json!(text.len()), "{rec}");

    let window = g.ok(
        "fs/read_text_file",
        json!({"path": p, "line": 30_000, "limit": 3}),
    );
    let want: String = text.split_inclusive('\n').skip(29_999).take(3).collect();
    assert_eq!(window["content"], json!(want));
    assert_eq!(last_read_record(&g)["sha256"], json!(digest));
}

#[test]
fn a_large_read_is_refused_for_a_secret_in_it_or_for_not_being_text() {
    let g = Gate::start();
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    let mut secret = large_text();
    secret.push_str(&format!("aws_access_key_id = {key}\n"));
    g.put("config.txt", &secret);
    let e = g.err("fs/read_text_file", json!({"path": g.abs("config.txt")}));
    assert!(e.message.contains("content:aws-access-key-id"), "{e:?}");
    // The secret is found even when the window asked for lies before it.
    let e = g.err(
        "fs/read_text_file",
        json!({"path": g.abs("config.txt"), "line": 1, "limit": 1}),
    );
    assert!(e.message.contains("content:aws-access-key-id"), "{e:?}");
    assert_eq!(last_read_record(&g)["decision"], "deny");

    let mut binary = large_text().into_bytes();
    binary.extend_from_slice(b"\xff\xfe not UTF-8\n");
    g.put("binary.txt", &binary);
    let e = g.err("fs/read_text_file", json!({"path": g.abs("binary.txt")}));
    assert!(e.message.contains("binary content"), "{e:?}");
}

#[test]
fn a_large_read_over_the_message_limit_is_refused_but_a_window_of_it_is_read() {
    let policy = policy_with(16 << 20, 1 << 20, "deny", "").replace(
        "binary = \"deny\"",
        "binary = \"deny\"\nmax_message_bytes = 1572864",
    );
    let g = Gate::with_policy(&policy);
    let text = large_text();
    g.put("big.txt", &text);
    let p = g.abs("big.txt");
    let e = g.err("fs/read_text_file", json!({"path": p}));
    assert!(e.message.contains("over the message limit"), "{e:?}");
    let window = g.ok(
        "fs/read_text_file",
        json!({"path": p, "line": 2, "limit": 1}),
    );
    let want: String = text.split_inclusive('\n').skip(1).take(1).collect();
    assert_eq!(window["content"], json!(want));
}
