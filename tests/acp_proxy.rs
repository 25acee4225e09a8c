//! `fsgate acp` with real peers: agents built on the published ACP SDKs (Python and
//! TypeScript, tests/peers/acp/) run behind the proxy while these tests play the editor.
//!
//! The peers come from `./scripts/install-peers.sh` (.peers/, gitignored). Without them
//! a test prints `SKIPPED: <reason>` and passes, except under `CI` or
//! `FSGATE_REQUIRE_PEERS`, where a missing peer is a failure (`crate::common::skip_or_fail`).

// Spawns `fsgate acp -- AGENT` and speaks raw JSON-RPC lines as the editor.
pub mod editor;
// Every check once per SDK agent: read, write, refusals, capabilities, ids, lifecycle.
mod sdk;
// Extras with a raw-JSON fake agent: ids of both types, disguised requests, EOF.
mod raw;
// An agent's 2 MiB paths, method and extension names, session ids and parameters: recorded and answered bounded.
mod bounds;
// Change notes with the test-only agent binary: an overwrite's diff has the text it replaced.
mod notes;
// An editor that closes its input mid-turn: the agent still gets its file answers, then ends.
mod closing;
// The relay: file/terminal look-alikes and ambiguous lines never reach the editor.
mod relay;
// --confine-agent: no direct access to the workspace or home, the gateway still works.
mod confine;
// --confine-agent with agents installed as people install them, found by discovery;
// --check-sandbox, and the refusal that names the policy key.
mod installs;
// fast-agent (optional third peer) with its passthrough model: real tool calls.
mod fast_agent;
// Zed's Claude Code adapter, npm-installed, started confined through node_modules/.bin.
mod claude_code;
// A confined agent (its own session) dies with its gateway.
mod orphan;
// The agent's whole process tree ends with its session (a cgroup of its own).
mod process_tree;
// `ask` rules and change notes with the Python SDK as the editor: allow once, allow for
// the session, reject, cancel, no answer; [notify] acp = false.
mod ask;
// The MCP server fsgate hosts for the agent: over HTTP or its bridge command, the policy
// and one log under the ACP session's id, confined to it, asking the editor.
mod hosted;
