//! Pushed change events: through the gateway and from outside it, debounced, ignored
//! directories silent, hidden paths never reported, per-connection subscriptions
//! (tests/peers/ws/events.py with a real Python `websockets` client).

use crate::ws_harness::{WsGate, python_or_skip};

#[test]
fn change_events_follow_the_policy_and_the_subscription() {
    let Some(py) = python_or_skip("ws change events") else {
        return;
    };
    let gate = WsGate::start(None, |root| {
        std::fs::create_dir_all(root.join("src")).expect("src");
        std::fs::create_dir_all(root.join("docs")).expect("docs");
        std::fs::write(root.join("src/existing.txt"), "old").expect("existing");
    });
    let summary = gate.peer_ok(&py, "events.py", &[]);
    let burst = summary["burst"].as_u64().expect("burst count");
    assert!((1..=2).contains(&burst), "{summary}");
    assert!(summary["events_a"].as_u64().unwrap_or(0) > 15, "{summary}");
    // The gateway's writes happened; the refused one did not.
    assert_eq!(
        std::fs::read_to_string(gate.root.join("src/existing.txt")).expect("existing"),
        "replaced atomically"
    );
    assert_eq!(
        std::fs::read_to_string(gate.root.join(".env")).expect(".env"),
        "SECRET=1"
    );
}
