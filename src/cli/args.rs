//! The command line's words (clap): every command, `serve`'s and `acp`'s options.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::gateway_args::GatewayArgs;
use super::{asks, run};

/// fsgate: the filesystem gateway between untrusted AI agents and your files.
///
/// fsgate is the agent's only door to a workspace: every read, write and delete is
/// checked against a TOML policy (deny wins), executed through a capability handle on
/// the workspace root, and recorded.
#[derive(Debug, Parser)]
#[command(name = "fsgate", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Serve a workspace to one agent over stdio (ACP or MCP), MCP over HTTP, or WebSocket.
    ///
    /// Example: fsgate serve --workspace ~/project
    /// then send newline-delimited JSON-RPC on stdin, e.g.
    /// {"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/home/me/project/README.md"}}
    Serve(ServeArgs),
    /// Run a command with the workspace as a filesystem fsgate serves to it.
    ///
    /// COMMAND, and every process it starts, sees each workspace at its own path
    /// through fsgate's view (FUSE, in a private mount namespace): a secret the policy
    /// hides does not exist there, every read and change is decided by the policy and
    /// recorded, a change is backed up first, and a write the policy refuses fails with
    /// EACCES (at open for its path, at close for its content). fsgate's audit log,
    /// backups and policy are hidden from COMMAND. Outside the workspaces COMMAND is
    /// walled in as a confined agent is (the policy's `[agent]` section: system paths,
    /// a scratch HOME and TMPDIR, the variables it names); `--no-confine` lifts that
    /// wall. Needs /dev/fuse, mount namespaces and Landlock; without them fsgate says
    /// what is missing and exits 125 without running COMMAND. See docs/run.md.
    ///
    /// Exit status: COMMAND's own (128 + N if signal N ended it); as env(1): 125 when
    /// fsgate failed and ran nothing, 126 when COMMAND cannot be run, 127 when it is
    /// not found.
    ///
    /// Example: fsgate run --workspace ~/project -- sh -c 'make test'
    ///
    /// Several: fsgate run --workspace ~/project --workspace lib=~/src/lib -- make
    Run(run::RunArgs),
    /// List and answer the questions `ask` rules put under a running `fsgate run`.
    ///
    /// The command owns its terminal; from another one, `fsgate asks` lists what each
    /// running `fsgate run` of the workspace waits for, and `--allow ID`, `--allow-run
    /// ID` or `--reject ID` answers. A question nobody answers within `[ask]
    /// timeout_secs` is refused (EACCES). Only the user running fsgate can answer; the
    /// answer is recorded naming who gave it. See docs/run.md.
    ///
    /// Example: fsgate asks --workspace ~/project --allow run-3f2a9c01b7de:1
    Asks(asks::AsksArgs),
    /// Host an ACP agent: relay the editor <-> agent and answer the agent's file access.
    ///
    /// Besides the agent's `fs/*` requests, fsgate adds an MCP server of its own, named
    /// `fsgate`, to every session the agent opens (over the ACP connection itself where
    /// the agent advertises the draft MCP-over-ACP transport, else over HTTP on 127.0.0.1
    /// with a secret per session, or through `fsgate mcp-connect`), under the same policy
    /// and audit log.
    ///
    /// The agent's profile (`[agent] profile` in the policy; by default detected from
    /// AGENT_CMD: claude-agent-acp, gemini-cli, fast-agent, opencode, codex-acp) turns its
    /// built-in file tools off through its documented settings; fsgate says at start what
    /// stays on. See docs/agents.md.
    ///
    /// Exit status: the agent's own when it exits by itself (128 + N if signal N ended
    /// it); 0 when SIGTERM or SIGINT stopped fsgate (it ends the agent first); 124 when
    /// the editor closed fsgate's input and the agent was still running 5 s after its
    /// own input was closed (once it answered the editor's requests and had fsgate's
    /// answers to its own, at most 5 s on): fsgate killed it, and says so on stderr; 2 when fsgate could not start (policy,
    /// workspace, audit log, agent command); 1 when the relay itself failed.
    Acp(AcpArgs),
    /// Policy tools: check (lint), explain a decision, run [[test]] cases, diff two policies, print the schema.
    #[command(subcommand)]
    Policy(fsgate_policy::cli::PolicyCommand),
    /// Audit log tools: verify the chain, show and report records, prove one record, ship to syslog, prune.
    #[command(subcommand)]
    Audit(fsgate_audit::cli::AuditCommand),
    /// Backup tools: list and restore previous versions of files.
    #[command(subcommand)]
    Backup(fsgate_backup::cli::BackupCommand),
    /// Put back everything a session (or a time range) changed, as it was before.
    ///
    /// Reads the audit log for the changes, the backups for what was there, and undoes
    /// the changes newest first through the gateway (its fixed floor, a backup of what it
    /// replaces, write-ahead records naming the session undone in `args.undo`). A file
    /// changed since by someone else is left as it is and listed, unless --force.
    /// Run it with the gateway stopped: it refuses while one holds the log.
    ///
    /// Exit status: 0 everything undone (or nothing to undo); 1 some changes left as
    /// they are (listed: changed since, or no backup); 2 nothing done (bad arguments,
    /// unknown session, a log that does not verify); 3 nothing done: a running gateway
    /// holds the audit log.
    ///
    /// Example: fsgate undo --workspace ~/project --session 3f2a... --dry-run
    Undo(crate::undo::UndoArgs),
    /// Relay stdio to the MCP server `fsgate acp` hosts for its agent (started by the agent).
    ///
    /// `fsgate acp` gives this command to agents that start their MCP servers as
    /// commands; it needs FSGATE_MCP_TOKEN, the session's secret, which fsgate puts in
    /// the command's environment. It holds no state: the gateway decides and records.
    McpConnect {
        /// The port of the hosted server on 127.0.0.1.
        #[arg(long)]
        port: u16,
    },
    /// Print a shell completion script for fsgate.
    ///
    /// bash: fsgate completions bash > ~/.local/share/bash-completion/completions/fsgate
    ///
    /// zsh: fsgate completions zsh > DIR/_fsgate, DIR a directory on $fpath
    ///
    /// fish: fsgate completions fish > ~/.config/fish/completions/fsgate.fish
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page fsgate(1) (roff), or write one page per command with --dir.
    ///
    /// Example: fsgate man --dir ~/.local/share/man/man1 && man fsgate-serve
    Man {
        /// Write fsgate.1, fsgate-serve.1, fsgate-audit-verify.1, ... into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// Wire protocol for `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Transport {
    /// Agent Client Protocol file-system methods, JSON-RPC 2.0 lines on stdio.
    Acp,
    /// Model Context Protocol server on stdio.
    Mcp,
    /// WebSocket files channel (needs --listen).
    Ws,
    /// MCP over Streamable HTTP at http://ADDR/mcp (needs --listen).
    Http,
}

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    pub(super) common: GatewayArgs,
    /// Wire protocol: acp (default), mcp, ws, or http.
    #[arg(long, value_enum, default_value_t = Transport::Acp)]
    pub(super) transport: Transport,
    /// Address for --transport ws or http: HOST:PORT, or just PORT for 127.0.0.1:PORT.
    #[arg(long, value_name = "ADDR")]
    pub(super) listen: Option<String>,
    /// Print what the Landlock sandbox enforces on this kernel and exit.
    #[arg(long)]
    pub(super) check_sandbox: bool,
}

#[derive(Debug, Args)]
pub(super) struct AcpArgs {
    #[command(flatten)]
    pub(super) common: GatewayArgs,
    /// Run the agent under its own Landlock ruleset with no access to the workspace.
    #[arg(long)]
    pub(super) confine_agent: bool,
    /// With --confine-agent: print the agent's whole ruleset and what this kernel
    /// enforces, then exit without starting the agent.
    #[arg(long, requires = "confine_agent")]
    pub(super) check_sandbox: bool,
    /// The agent command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "AGENT_CMD")]
    pub(super) agent: Vec<String>,
}
