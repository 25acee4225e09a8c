//! The relay between the editor and the running agent, and the stop signals that end
//! the agent.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::runtime::runtime_with_signals;
use crate::peer::stdio_peer;
use fsgate_doors::proxy::AgentEnd;

/// The relay between the editor (our stdio) and the running agent, with the MCP server
/// hosted for it.
pub(super) struct Relay<'g> {
    pub(super) gateway: &'g Arc<fsgate_gateway::Gateway>,
    pub(super) policy: Option<PathBuf>,
    pub(super) child: std::process::Child,
    pub(super) hosted: (std::net::TcpListener, Arc<fsgate_doors::hosted::Hosted>),
    pub(super) session_meta: Option<serde_json::Value>,
    /// Where the questions of the agent's view go (under `--confine-agent`).
    pub(super) questions: Option<Arc<fsgate_doors::view_ask::ViewQuestions>>,
    /// The confined agent's sessions, for the view's records (None: no view).
    pub(super) view_sessions: Option<Arc<fsgate_gateway::agent_sessions::AgentSessions>>,
}

impl Relay<'_> {
    /// Runs until the agent ends: its end, and the signal that stopped it, if one did.
    pub(super) fn run(self, pid: u32) -> Result<(std::io::Result<AgentEnd>, StoppedBy), String> {
        let gateway = self.gateway;
        let allow_terminal = gateway.policy().settings().acp.allow_terminal;
        let (runtime, stop) = match runtime_with_signals(gateway, self.policy) {
            Ok(r) => r,
            Err(e) => {
                // Never relayed: the agent does not run on alone.
                let mut child = self.child;
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let stopped_by = StoppedBy::default();
        runtime.spawn(end_agent_on_signal(stop, Arc::clone(&stopped_by), pid));
        let (listener, hosted) = self.hosted;
        let serving = runtime.spawn(Arc::clone(&hosted).serve(listener));
        fsgate_doors::stdio::enlarge_pipe(std::io::stdin().as_fd());
        fsgate_doors::stdio::enlarge_pipe(std::io::stdout().as_fd());
        let result = runtime.block_on(fsgate_doors::proxy::run(
            Arc::clone(gateway),
            stdio_peer(),
            tokio::io::stdin(),
            tokio::io::stdout(),
            self.child,
            (
                allow_terminal,
                Some(hosted),
                self.session_meta,
                self.view_sessions,
            ),
            self.questions,
        ));
        serving.abort();
        // A blocking read of the editor's stdin may still be parked in the runtime's
        // blocking pool (the editor keeps its end open): do not wait for it.
        runtime.shutdown_background();
        Ok((result, stopped_by))
    }
}

/// The signal that made fsgate end the agent, set when it arrives.
pub(super) type StoppedBy = Arc<std::sync::OnceLock<&'static str>>;

/// SIGTERM / SIGINT end the agent (gracefully, then forcefully); the relay then ends,
/// the log gets its stop record, and fsgate exits 0 (it stopped as asked).
async fn end_agent_on_signal(mut stop: crate::signals::Stop, stopped: StoppedBy, pid: u32) {
    let sig = stop.termination().await;
    let _ = stopped.set(sig);
    tracing::warn!("{sig}: ending the agent (pid {pid})");
    let Some(agent) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process(agent, rustix::process::Signal::TERM);
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let _ = rustix::process::kill_process(agent, rustix::process::Signal::KILL);
}
