//! Many WebSocket clients at once: 8 Python `websockets` clients pipelining requests
//! (tests/peers/ws/many_clients.py), each its own session in the audit log.

use std::collections::HashMap;

use crate::ws_harness::{WsGate, python_or_skip};

#[test]
fn eight_clients_at_once_each_its_own_session() {
    let Some(py) = python_or_skip("ws 8 clients") else {
        return;
    };
    let gate = WsGate::start(None, |root| {
        std::fs::write(root.join("shared.txt"), "shared").expect("shared");
    });
    let summary = gate.peer_ok(&py, "many_clients.py", &["8", "10"]);
    assert_eq!(summary["clients"], 8);
    let requests = summary["requests"].as_u64().expect("count");
    assert_eq!(requests, 8 * (10 * 12 + 1));
    println!("8 clients, {requests} requests in {}s", summary["seconds"]);
    for i in 0..8 {
        for r in 0..10 {
            let p = gate.root.join(format!("c{i}/r{r}-f0.txt"));
            let want = format!("{i}:/c{i}/r{r}-f0.txt");
            assert_eq!(std::fs::read_to_string(&p).expect("written file"), want);
        }
    }
    let mut per_session: HashMap<String, usize> = HashMap::new();
    for r in gate.audit_requests() {
        *per_session
            .entry(r["session"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert_eq!(per_session.len(), 8, "{per_session:?}");
    assert!(per_session.values().all(|n| *n == 121), "{per_session:?}");
}
