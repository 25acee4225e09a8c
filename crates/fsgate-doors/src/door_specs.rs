//! Each door's own words for what a read could not answer: the gateway composes them
//! from the door's `DoorSpec`, and this pins the whole refusal per door.

use fsgate_base::error::GatewayError;
use fsgate_gateway::ops;
use fsgate_gateway::ops::{Op, PathStyle, RequestCtx};
use fsgate_gateway::{DoorSpec, Gateway, Request};
use fsgate_policy::Policy;

const AS_TEXT: &str = "binary content (NUL byte or invalid UTF-8) cannot be read as text";

/// A gateway on a workspace holding a binary `b.png` and a 5000-byte `big.txt`, under
/// the default policy changed by `change`.
fn gateway(change: impl Fn(String) -> String) -> (tempfile::TempDir, Gateway) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("root");
    std::fs::write(root.join("b.png"), b"a\0b").expect("write");
    std::fs::write(root.join("big.txt"), "x".repeat(5000)).expect("write");
    let text = change(fsgate_policy::DEFAULT_POLICY_TOML.to_string());
    let pol = Policy::from_toml(&text, "test").expect("policy");
    let ws = fsgate_workspace::Workspace::open(&root).expect("workspace");
    (tmp, Gateway::new(pol, ws))
}

/// The refusal of a `read_text` of `name` through `door`.
fn refusal(gw: &Gateway, door: &'static DoorSpec, name: &str) -> String {
    let ctx = RequestCtx {
        style: PathStyle::AbsoluteOrRelative,
        session: "s".into(),
        door,
        peer: "t".into(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    };
    let op = Op::ReadText(ops::ReadText {
        path: name.into(),
        line: None,
        limit: None,
    });
    match gw
        .serve(&ctx, Request::Op(op), fsgate_gateway::How::alone())
        .0
    {
        Err(GatewayError::Limit { reason, .. }) => reason,
        other => panic!("{}: not a limit: {other:?}", door.name),
    }
}

fn every_door() -> [&'static DoorSpec; 5] {
    [
        &crate::acp::DOOR,
        &crate::mcp::DOOR,
        &crate::http::DOOR,
        &crate::hosted::DOOR,
        &crate::ws::DOOR,
    ]
}

/// The way each door names to read binary and media content, and to read in parts.
fn words(door: &DoorSpec) -> [&'static str; 3] {
    match door.name {
        "acp" => [
            "; use _fsgate/read_file",
            "; the policy lets media files (images, audio) be read base64-encoded with \
             _fsgate/read_file if their content matches their extension",
            "; read the file in parts (line and limit)",
        ],
        "mcp" | "http" | "acp-mcp" => [
            "; use read_media_file",
            "; the policy lets media files (images, audio) be read with read_media_file if \
             their content matches their extension",
            "; read the file in parts (read_text_file with line and limit)",
        ],
        "ws" => [
            "; a \"read\" request answers it as base64",
            "; a \"read\" request answers a media file (image, audio) as base64 if its \
             content matches its extension",
            "",
        ],
        other => panic!("no words pinned for {other}"),
    }
}

#[test]
fn every_door_names_its_own_way_to_read_what_a_read_refused() {
    let (_media_tmp, media) = gateway(|t| t);
    let (_tmp, base64) = gateway(|t| {
        t.replace("binary = \"media\"", "binary = \"base64\"")
            .replace("[limits]\n", "[limits]\nmax_message_bytes = 8192\n")
    });
    for door in every_door() {
        let [binary, media_words, in_parts] = words(door);
        assert_eq!(
            refusal(&media, door, "b.png"),
            format!("{AS_TEXT}{media_words}")
        );
        assert_eq!(
            refusal(&base64, door, "b.png"),
            format!("{AS_TEXT}{binary}")
        );
        // The content as a JSON string (quoted) in every copy, and the envelope.
        let encoded = 5002 * door.content_copies + 4096;
        assert_eq!(
            refusal(&base64, door, "big.txt"),
            format!(
                "the answer would be {encoded} bytes once encoded, over the message limit \
                 of 8192 bytes{in_parts}"
            )
        );
    }
}

/// The MCP doors send a read's content twice, the others once; each is named in
/// records as before.
#[test]
fn the_mcp_doors_send_content_twice_and_every_door_keeps_its_name() {
    let names: Vec<_> = every_door()
        .iter()
        .map(|d| (d.name, d.content_copies))
        .collect();
    assert_eq!(
        names,
        [
            ("acp", 1),
            ("mcp", 2),
            ("http", 2),
            ("acp-mcp", 2),
            ("ws", 1)
        ]
    );
}
