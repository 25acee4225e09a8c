//! Real coding agents from their registries behind `fsgate acp` (and their own command
//! lines under `fsgate run`), each driven by a scripted stand-in for its model API on
//! loopback (tests/agents/model_stub.py: no key, no network). The test plays the editor;
//! the fake plays the model and logs everything the model was sent, so a test can assert
//! which tools the model was offered and that it never received a secret.
//!
//! The agents come from `./scripts/install-peers.sh` (.peers/claude-agent-acp,
//! .peers/claude-acp, .peers/gemini-cli, .peers/codex, .peers/codex-acp, Node 22 in
//! .peers/node22). A missing one prints `SKIPPED` locally and fails under CI
//! (`crate::common::skip_or_fail`).

// The model fake: start it, read its log.
mod fake;
// One agent, one workspace, the nine steps, and what must hold afterwards.
mod scenario;
// Claude Code through @agentclientprotocol/claude-agent-acp.
mod claude;
// Gemini CLI (`gemini --acp`).
mod gemini;
// Codex's, Gemini CLI's and Claude Code's own command lines under `fsgate run`: their shell governed.
mod under_run;
// The agent's own shell tool, confined: its processes through fsgate's view.
mod shell;
// The agent's file tool rewrites a file its shell read: the shell's next read sees it whole.
mod edit_then_shell;
// Codex through codex-acp behind `fsgate acp --confine-agent`: its shell and apply_patch on the view.
mod codex_acp;
