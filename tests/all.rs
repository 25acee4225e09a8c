//! The one integration test binary: spawns the real `fsgate` and checks what README.md,
//! the docs and `fsgate --help` promise.

// Harness: spawn `fsgate serve`, talk JSON-RPC, time out instead of hanging.
mod common;

// initialize, fs/read_text_file windows, _fsgate/read_file.
mod acp_read;
// Reads from 1 MiB on: hashed beside the scan, window and answer size.
mod acp_read_large;
// fs/write_text_file: create-on-write, parents, atomic replace.
mod acp_write;
// _fsgate/ls, stat, glob, grep.
mod acp_listing;
// _fsgate/edit_text_file exactly-once semantics.
mod acp_edit;
// _fsgate/mkdir, rm, rename.
mod acp_mutate;
// JSON-RPC errors, oversized lines, ids, concurrency, EOF, clean stdout.
mod acp_errors;
// One audit record per bad message on fsgate serve; ls answers cut at the message limit.
mod acp_bounds;
// Peak memory of fsgate serve while a client pipelines reads and greps and stops reading.
mod acp_memory;
// A gateway that cannot serve after its log was opened: its `stop` says why.
mod stopped_early;
// Escapes by path text: outside absolute paths, prefixes, `..`, /proc/self/root, NUL.
mod escape_paths;
// Several workspaces: sibling roots sharing a prefix, every door, scoped rules, start-up.
mod workspaces;
// Escapes through symlinks, including links inside that lead to denied paths.
mod escape_symlinks;
// Escapes through hard links, FIFOs, sockets, devices and swap races.
mod escape_special;
// Walks cut at the depth limit, and names that look like the gateway's own temp files.
mod escape_walks;
// Secrets: odd case, rename, edit, and leaks through ls/glob/grep.
mod escape_secrets;
// What a person reads escapes what an agent chose: tables, CSV, stderr, logs; --json exact.
mod escape_output;
// Custom policies: read-only, default-deny, extensions, binary, limits.
mod policy_custom;
// Secret content rules, the fixed floor and SIGHUP reload in the running gateway.
mod policy_runtime;
// extends and disabled_patterns in the running gateway, over MCP.
mod policy_compose;
// Command line: help text, invalid policies and workspaces refuse to start.
mod cli;
// Where the audit log and backups are: told at start, found again by --workspace.
mod locations;
// Two gateways on one workspace: a chain each, read together.
mod two_gateways;
// One record proved: Merkle checkpoints, audit prove, audit check-proof.
mod audit_proofs;
// scripts/demo.sh: the guided tour, the same story on every run.
mod demo;
// `fsgate policy check|explain|test|diff|schema`: formats and exit codes.
mod policy_cli;
// policy check: rules matching the wrong paths or never winning; suggested tests pass.
mod policy_lint;
// `policy test` decides every operation as the gateway does: random policies × a tree.
mod policy_agreement;
// Installing and configuring: docs/clients/ configurations start fsgate; completions; man pages.
mod install;
// The documents: README.md within its size budget, SECURITY.md cites real tests, links resolve.
mod docs;
// The audit log the gateway writes, and `fsgate audit ...`; both verifiers agree.
mod audit_gateway;
// `fsgate audit report --html`, rendered by headless Chromium: verdict, inert, offline.
mod audit_report;
// [audit] ship to a real rsyslog (TCP, TLS, local socket): restarts lose nothing, verify from its copy.
mod audit_ship;
// `audit show` for people: fitted, aligned, --stats, --follow; hostile paths inert.
mod audit_show;
// A rotated log named by its active file: verify, show, report, prune, --trusted take its series.
mod audit_series;
// `fsgate acp` with real ACP SDK agents behind the proxy.
mod acp_proxy;
// The kernel wall (Landlock) holding on its own, via the test-only fsgate-wallprobe.
mod sandbox_kernel;
// SIGTERM/SIGINT at any instant of start-up, on every mode: exit 0, `stop` last, chain intact.
mod signals;
// MCP harness: spawn `fsgate serve --transport mcp`, talk JSON-RPC lines.
mod mcp_harness;
// The reference MCP filesystem server next to fsgate: same calls, compared answers.
mod mcp_reference;
// Parity with the reference server: head/tail, edit diffs, search_files, media files.
mod mcp_parity_text;
// Drop-in parity in results: output schemas, structured content, file info, messages.
mod mcp_parity_results;
// MCP roots narrow the workspace, never widen it; the reference next to fsgate.
mod mcp_parity_roots;
mod mcp_roots_wait;
// MCP eras: stateless requests answered alone, removed and undeclared methods, strays.
mod mcp_eras;
// Random message sequences on the MCP door, the ACP door and the ACP proxy: never the end.
mod wire_sequences;
// MCP on the wire: both protocol eras, refusals as tool errors, policy-shaped tool lists.
mod mcp_wire;
// Issue 17 under MCP: ask rules through elicitation, changes as log messages.
mod mcp_ask;
// MCP with the official Python SDK clients 2.x and 1.x (skipped without them).
mod mcp_peers;
// MCP over Streamable HTTP (serve --transport http): the Python SDKs of both eras,
// token, Host and Origin checks, sizes, sessions, the pre-auth budget, records.
mod mcp_http;
// MCP over HTTP reads: refusals in the MCP tools' words, content sized as two copies.
mod mcp_http_reads;
// ask rules on the stateless 2026-07-28 wire: InputRequiredResult (MRTR), stdio and HTTP.
mod mcp_mrtr;
// MCP: exactly one audit record per message, whoever answers it.
mod mcp_records;
// MCP: every tool call takes one path, answered in its era, its _meta checked first.
mod mcp_calls;
// MCP on stdio: peak RSS while a client pipelines reads and stops reading.
mod mcp_memory;
// MCP move_file: one rename that never replaces, also under concurrent moves.
mod mcp_move;
// An idle gateway: at most 3 threads, none of them woken while nothing happens.
mod idle;
// WebSocket harness: spawn `fsgate serve --transport ws`, drive it with a Rust client.
mod ws_harness;
// WebSocket files channel: every message type, errors, binary, message limit.
mod ws_files;
// WebSocket change events: gateway and outside changes, ignored dirs, hidden paths.
mod ws_events;
// WebSocket auth: token, Origin and Host checks on the upgrade request.
mod ws_auth;
// WebSocket concurrency: 8 clients at once, each its own audit session.
mod ws_concurrent;
// WebSocket `[ws]` settings on an in-process server: origins, connection and size limits, ignore.
mod ws_settings;
// WebSocket memory: back-pressure in bytes, answers over the limit, peak RSS.
mod ws_memory;
// WebSocket doors: silent and slow connections cannot lock out the token holder.
mod ws_doors;
// The files channel's error strings, entry fields and change events as it defines them.
mod ws_parity;
// WebSocket `ask` rules: permission questions answered, refused, left silent; unknown ids.
mod ws_permission;
// Backups through the gateway: each change saves the old content, list, restore, retention, fail closed.
mod backup_gateway;
// Huge and sparse files in backups, their limits and quota; retention keeps session originals.
mod backup_limits;
// kill -9 mid-stream of writes, restart: chain verifies, torn tail recovered, files whole.
mod crash_gateway;
// `fsgate undo`: a session put back from the log and the backups; dry run, --force, refusal.
mod undo;
// `fsgate undo` never follows a link, never writes where the policy refuses every agent, never takes an agent's session for an undo.
mod undo_safety;
// Write-ahead records: a failing audit log refuses changes; kill -9 at each syscall of a change, then restart reconciles it.
mod writeahead;
// A write's syncs, in the order strace saw them, each before what depends on it.
mod durable_order;
// A write's outcome recorded beside its directory's sync: confirmed by the next record, reconciled after a crash until then.
mod entry_durable;
// Unnamed files made ahead of the writes that take them.
mod spare_files;
// Bounded memory and answers: a client that stops reading, truncated listings, reads over the message limit.
mod bounded;
// What an agent chooses is recorded and echoed bounded: 2 MiB fields on the ACP, MCP and WebSocket doors.
mod audit_bounds;
// Size conditions on rules (min_size / max_size) through fsgate serve over MCP.
mod policy_size;
// The benchmark driver (benches/driver) in quick mode against fsgate: every answer checks.
mod bench_driver;
// Issue 34: wide directories in pages on every door; the watcher at the inotify limit.
mod monorepo;
// [vcs] stage: the index of a real git repository after writes, renames and rms.
mod vcs_stage;
// Real coding agents (Claude Code, Gemini CLI) behind `fsgate acp`, driven by a scripted model.
mod agents;
// The doors' layer rules on the source: no path parsed, no policy decided, no lower layer reached.
mod layers;
// fsgate run: real commands through the filesystem view (as root).
mod view_run;
// fsgate run --confine: the [agent] wall outside the workspace, the view inside.
mod view_run_confine;
// fsgate run: `ask` rules answered with `fsgate asks`, and faults.
mod view_asks;
mod view_faults;
// fsgate run as a user who is not root.
mod view_nonroot;
// fsgate run's records: each process named, its reads coalesced; audit show and report by process.
mod view_audit;
// git through fsgate run's view under the default policy: hooks and config never written.
mod view_git;
// fsgate run: SQLite and its locks, mmap, O_TMPFILE, atomic saves, watchers in the view.
mod view_tools;
// fsgate acp --confine-agent: the agent's processes through the same view.
mod view_acp;
// ask rules hit by the confined agent's processes, put to the editor.
mod view_acp_ask;
// What the kernel keeps of the view never hides a change: the agent's file tools' changes
// seen by its shell at once; absent names, hidden names and listings.
mod view_cache;
// The confinement attacked from inside the view: umount, namespaces, /proc, handles, links, ptrace, TIOCSTI.
mod view_attack;
// fsgate run: chmod recorded, undone and never set-ID; executable checkouts; hard links refused, callers copy.
mod view_modes;
// fsgate run: symlinks made (recorded, undone, never leading out) and shown as links: venv, npm, git.
mod view_links;
// fsgate run: timestamps (touch, utime) set, recorded, refused where writes are, undone.
mod view_times;
// fsgate run and acp --confine-agent with several workspaces: a view each, one gateway.
mod view_several;
// fsgate run: builds inside the wall (make and cc; cargo from rustup), recorded and up to date.
mod view_build;
